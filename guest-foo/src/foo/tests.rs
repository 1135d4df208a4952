//! Native unit tests of the sync logic. The conformance fixtures under `tests/fixtures/foo`
//! check the same behaviours through the WASM component.

use super::*;
use kwop_guest::Severity;
use serde_json::json;

fn foo(deployment_name: Option<&str>, replicas: Option<i32>) -> Foo {
    Foo {
        metadata: Meta {
            name: "test".into(),
            namespace: Some("default".into()),
            uid: "uid-foo".into(),
            generation: Some(2),
            deletion_timestamp: None,
        },
        spec: FooSpec { deployment_name: deployment_name.map(Into::into), replicas },
        status: None,
    }
}

const NOW: Time = Time::EXAMPLE;

fn deployment(owner_uid: Option<&str>, available: Option<i32>) -> Observed {
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "test", "namespace": "default" },
        "spec": { "replicas": 1, "selector": {}, "template": {} }
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
    serde_json::from_value(d).expect("valid observed Deployment")
}

fn none(_: &str, _: &str) -> Option<Observed> {
    None
}

#[test]
fn creates_the_deployment_sample_controller_would() {
    let d = sync(&foo(Some("test"), Some(1)), &none, NOW).expect("sync");
    assert_eq!(
        serde_json::to_value(&d.deployment).expect("json"),
        json!({
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
        })
    );
    assert_eq!(d.status.available_replicas, 0);
    assert_eq!(d.events, vec![Event::normal("Synced", "Foo synced successfully")]);
}

#[test]
fn unset_replicas_stay_unset() {
    let d = sync(&foo(Some("test"), None), &none, NOW).expect("sync");
    assert!(d.deployment.spec.replicas.is_none());
}

#[test]
fn status_copies_available_replicas_of_the_owned_deployment() {
    let found = |ns: &str, n: &str| (ns == "default" && n == "test").then(|| deployment(Some("uid-foo"), Some(3)));
    let d = sync(&foo(Some("test"), Some(3)), &found, NOW).expect("sync");
    assert_eq!(d.status.available_replicas, 3);
}

#[test]
fn unowned_deployment_is_left_alone_and_reported() {
    let found = |_: &str, _: &str| Some(deployment(None, None));
    let f = sync(&foo(Some("test"), Some(1)), &found, NOW).expect_err("must fail");
    assert!(f.retry);
    assert_eq!(f.message, "Resource \"test\" already exists and is not managed by Foo");
    assert_eq!(f.events[0].reason, "ErrResourceExists");
    assert_eq!(f.events[0].severity, Severity::Warning);
}

#[test]
fn deployment_controlled_by_another_foo_is_not_ours() {
    let found = |_: &str, _: &str| Some(deployment(Some("uid-other"), None));
    assert!(sync(&foo(Some("test"), Some(1)), &found, NOW).is_err());
}

#[test]
fn non_controller_owner_reference_does_not_count() {
    let mut d = deployment(Some("uid-foo"), None);
    d.metadata.owner_references[0].controller = Some(false);
    let found = move |_: &str, _: &str| Some(d.clone());
    assert!(sync(&foo(Some("test"), Some(1)), &found, NOW).is_err());
}

#[test]
fn missing_or_empty_deployment_name_is_a_warning_without_retry() {
    for f in [foo(None, Some(1)), foo(Some(""), Some(1))] {
        let f = sync(&f, &none, NOW).expect_err("must fail");
        assert!(!f.retry);
        assert_eq!(f.events[0].reason, INVALID_SPEC);
        assert_eq!(f.events[0].severity, Severity::Warning);
    }
}

#[test]
fn invalid_deployment_name_is_a_warning_without_retry() {
    for bad in ["Has_Upper", "-lead", "trail-", "a..b", &"x".repeat(254)] {
        let f = sync(&foo(Some(bad), Some(1)), &none, NOW).expect_err(bad);
        assert!(!f.retry, "{bad}");
        assert!(f.message.contains("not a valid Deployment name"), "{}", f.message);
    }
    assert!(sync(&foo(Some("a.b-c.d9"), Some(1)), &none, NOW).is_ok());
}

#[test]
fn the_json_boundary_parses_and_serialises_like_the_plugin() {
    let primary =
        r#"{"metadata":{"name":"test","namespace":"default","uid":"u"},"spec":{"deploymentName":"test","replicas":2}}"#;
    let (apply, status) = reconcile_json(primary, &|_, _| None, NOW).expect("ok");
    assert!(status.starts_with(r#"{"availableReplicas":0,"conditions":[{"type":"Ready","status":"False""#), "{status}");
    assert!(apply[0].contains(r#""replicas":2"#));
    assert!(!reconcile_json(r#"{"spec":"nope"}"#, &|_, _| None, NOW).expect_err("garbage").retry);
}

#[test]
fn conditions_say_ready_when_the_replicas_are_available_and_keep_their_transition_time() {
    let t0 = Time::from_seconds(1_800_000_000);
    // Just created: not ready, progressing, observed generation 2.
    let d = sync(&foo(Some("test"), Some(3)), &none, t0).expect("sync");
    let s = serde_json::to_value(&d.status).expect("json");
    assert_eq!(s["observedGeneration"], 2);
    assert_eq!(
        s["conditions"][0],
        json!({"type": "Ready", "status": "False", "observedGeneration": 2,
        "lastTransitionTime": "2027-01-15T08:00:00Z", "reason": "Unavailable", "message": "0 of 3 replicas available"})
    );
    assert_eq!(
        (s["conditions"][1]["type"].as_str(), s["conditions"][1]["reason"].as_str()),
        (Some("Progressing"), Some("ScalingUp"))
    );
    // Later, all available: Ready flips (new transition time), Progressing completes.
    let mut f = foo(Some("test"), Some(3));
    f.status = Some(d.status.clone());
    let found = |_: &str, _: &str| Some(deployment(Some("uid-foo"), Some(3)));
    let t1 = Time::from_seconds(1_800_000_060);
    let d2 = sync(&f, &found, t1).expect("sync");
    let ready = &d2.status.conditions[0];
    assert!(ready.is_true() && ready.last_transition_time == "2027-01-15T08:01:00Z", "{ready:?}");
    assert_eq!(d2.status.conditions[1].reason, "Complete");
    // In sync: the same status again, whatever the clock says (nothing to write).
    f.status = Some(d2.status.clone());
    let d3 = sync(&f, &found, Time::from_seconds(1_900_000_000)).expect("sync");
    assert_eq!(d3.status, d2.status);
}

#[test]
fn admission_refuses_a_missing_an_invalid_or_a_foreign_deployment_name() {
    let foreign = |_: &str, _: &str| Some(deployment(Some("someone-else"), None));
    let ours = |_: &str, _: &str| Some(deployment(Some("uid-foo"), None));
    assert_eq!(admit(&foo(Some("web"), Some(1)), None, &none), Ok(vec![]));
    assert_eq!(admit(&foo(Some("web"), Some(1)), None, &ours), Ok(vec![]));
    for (f, lookup, needle) in [
        (foo(None, Some(1)), &none as &dyn Fn(&str, &str) -> Option<Observed>, "is required"),
        (foo(Some(""), Some(1)), &none, "is required"),
        (
            foo(Some("Bad_Name"), Some(1)),
            &none,
            "\"Bad_Name\" is not a valid Deployment name: must consist of lower case",
        ),
        (foo(Some("web"), Some(1)), &foreign, "already exists in namespace \"default\" and is not managed by this Foo"),
    ] {
        let v = admit(&f, None, lookup).expect_err(needle);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].field.as_deref(), Some("spec.deploymentName"));
        assert!(v[0].message.contains(needle), "{}", v[0].message);
    }
    // An UPDATE that leaves spec alone is not refused (a finalizer or a label can still change),
    // but warned about; one that changes spec to something wrong is refused.
    let bad = foo(Some("web"), Some(1));
    let warned = admit(&bad, Some(&bad), &foreign).expect("allowed");
    assert!(warned[0].starts_with("spec.deploymentName: Deployment \"web\" already exists"), "{warned:?}");
    assert!(admit(&foo(Some("web"), Some(2)), Some(&bad), &foreign).is_err());
}
