//! Native unit tests of the sync logic. The conformance fixtures under `tests/fixtures/foo`
//! check the same behaviours through the WASM component.

use super::*;
use serde_json::json;

fn foo(deployment_name: Option<&str>, replicas: Option<i64>) -> Value {
    let mut spec = serde_json::Map::new();
    if let Some(n) = deployment_name {
        spec.insert("deploymentName".into(), json!(n));
    }
    if let Some(r) = replicas {
        spec.insert("replicas".into(), json!(r));
    }
    json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": { "name": "test", "namespace": "default", "uid": "uid-foo" },
        "spec": spec
    })
}

fn deployment(owner_uid: Option<&str>, available: Option<i64>) -> Value {
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "test", "namespace": "default" },
        "spec": { "replicas": 1 }
    });
    if let Some(uid) = owner_uid {
        d["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "test",
            "uid": uid, "controller": true, "blockOwnerDeletion": true
        }]);
    }
    if let Some(a) = available {
        d["status"] = json!({ "availableReplicas": a });
    }
    d
}

fn none(_: &str, _: &str) -> Option<Value> {
    None
}

#[test]
fn creates_the_deployment_sample_controller_would() {
    let d = sync(&foo(Some("test"), Some(1)), &none).expect("sync");
    assert_eq!(
        d.apply,
        vec![json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "test", "namespace": "default" },
            "spec": {
                "replicas": 1,
                "selector": { "matchLabels": { "app": "nginx", "controller": "test" } },
                "template": {
                    "metadata": { "labels": { "app": "nginx", "controller": "test" } },
                    "spec": { "containers": [ { "name": "nginx", "image": "nginx:latest" } ] }
                }
            }
        })]
    );
    assert_eq!(d.status, json!({ "availableReplicas": 0 }));
    assert_eq!(d.events, vec![Event::new(Severity::Normal, "Synced", "Foo synced successfully")]);
}

#[test]
fn unset_replicas_stay_unset() {
    let d = sync(&foo(Some("test"), None), &none).expect("sync");
    assert!(d.apply[0]["spec"].get("replicas").is_none());
}

#[test]
fn status_copies_available_replicas_of_the_owned_deployment() {
    let found = |ns: &str, n: &str| (ns == "default" && n == "test").then(|| deployment(Some("uid-foo"), Some(3)));
    let d = sync(&foo(Some("test"), Some(3)), &found).expect("sync");
    assert_eq!(d.status, json!({ "availableReplicas": 3 }));
}

#[test]
fn unowned_deployment_is_left_alone_and_reported() {
    let found = |_: &str, _: &str| Some(deployment(None, None));
    let f = sync(&foo(Some("test"), Some(1)), &found).expect_err("must fail");
    assert!(f.retry);
    assert_eq!(f.message, "Resource \"test\" already exists and is not managed by Foo");
    assert_eq!(f.events[0].reason, "ErrResourceExists");
    assert_eq!(f.events[0].severity, Severity::Warning);
}

#[test]
fn deployment_controlled_by_another_foo_is_not_ours() {
    let found = |_: &str, _: &str| Some(deployment(Some("uid-other"), None));
    assert!(sync(&foo(Some("test"), Some(1)), &found).is_err());
}

#[test]
fn non_controller_owner_reference_does_not_count() {
    let mut d = deployment(Some("uid-foo"), None);
    d["metadata"]["ownerReferences"][0]["controller"] = json!(false);
    let found = move |_: &str, _: &str| Some(d.clone());
    assert!(sync(&foo(Some("test"), Some(1)), &found).is_err());
}

#[test]
fn missing_or_empty_deployment_name_is_a_warning_without_retry() {
    for f in [foo(None, Some(1)), foo(Some(""), Some(1))] {
        let f = sync(&f, &none).expect_err("must fail");
        assert!(!f.retry);
        assert_eq!(f.events[0].reason, INVALID_SPEC);
        assert_eq!(f.events[0].severity, Severity::Warning);
    }
}

#[test]
fn invalid_deployment_name_is_a_warning_without_retry() {
    for bad in ["Has_Upper", "-lead", "trail-", "a..b", &"x".repeat(254)] {
        let f = sync(&foo(Some(bad), Some(1)), &none).expect_err(bad);
        assert!(!f.retry, "{bad}");
        assert!(f.message.contains("not a valid Deployment name"), "{}", f.message);
    }
    assert!(sync(&foo(Some("a.b-c.d9"), Some(1)), &none).is_ok());
}

#[test]
fn garbage_foo_is_rejected_without_retry() {
    let f = sync(&json!({ "spec": "nope" }), &none).expect_err("must fail");
    assert!(!f.retry);
}
