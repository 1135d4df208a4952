//! Native unit tests with a fake cache and captured logs: `cargo test` (./test.sh).

use kwop_guest::k8s_openapi::api::core::v1::ConfigMap;
use kwop_guest::testing::{self, FakeCache, Level};
use serde_json::{json, Value};
use {{crate}}::Plugin;

fn foo(spec: Value) -> Value {
    json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": { "name": "example", "namespace": "default", "uid": "u1" },
        "spec": spec,
    })
}

#[test]
fn a_foo_gets_a_configmap_describing_it() {
    let out = testing::reconcile::<Plugin>(&foo(json!({ "deploymentName": "web", "replicas": 3 })), FakeCache::new())
        .expect("an outcome");
    let cm: ConfigMap = out.applied_as(0).expect("a ConfigMap");
    assert_eq!(cm.metadata.name.as_deref(), Some("example-info"));
    let data = cm.data.expect("data");
    assert_eq!(data["deploymentName"], "web");
    assert_eq!(data["replicas"], "3");
    assert_eq!(out.events()[0].reason, "Synced");
    assert_eq!(testing::logs(), vec![(Level::Debug, "creating ConfigMap example-info".to_string())]);
}

#[test]
fn an_existing_configmap_is_updated_not_created() {
    let cache = FakeCache::new().with(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "example-info", "namespace": "default" },
    }));
    testing::reconcile::<Plugin>(&foo(json!({ "deploymentName": "web" })), cache).expect("an outcome");
    assert_eq!(testing::logs(), vec![(Level::Debug, "updating ConfigMap example-info".to_string())]);
}

#[test]
fn a_foo_without_deployment_name_is_a_failure_not_retried() {
    let Err(f) = testing::reconcile::<Plugin>(&foo(json!({})), FakeCache::new()) else { panic!("expected a failure") };
    assert!(!f.retry);
    assert_eq!(f.events[0].reason, "InvalidSpec");
}
