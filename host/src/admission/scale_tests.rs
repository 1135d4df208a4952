//! Unit tests of composing a scale request's primary (`scale.rs`): the path, the write, the
//! Scale's replicas, and what the failure policy makes of a scale that cannot be composed.

use super::*;
use crate::admission::decide;
use crate::vocab::FailurePolicy;
use serde_json::json;

fn object(v: Value) -> DynamicObject {
    serde_json::from_value(v).expect("a test object")
}

fn foo() -> DynamicObject {
    object(json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": { "name": "f", "namespace": "ns", "uid": "u-1", "resourceVersion": "42" },
        "spec": { "deploymentName": "web", "replicas": 3 },
        "status": { "availableReplicas": 3 },
    }))
}

#[test]
fn spec_replicas_is_written_and_nothing_else_changes() {
    let path = ReplicasPath::parse(".spec.replicas").expect("the usual path");
    assert_eq!(path.text(), ".spec.replicas");
    let stored = foo();
    let composed = compose(&stored, &path, 4).expect("composed");
    assert_eq!(composed.data["spec"], json!({ "deploymentName": "web", "replicas": 4 }));
    assert_eq!(composed.data["status"], json!({ "availableReplicas": 3 }), "status is not the Scale's to set");
    assert_eq!(composed.metadata, stored.metadata, "the stored object's name, uid and resourceVersion");
    assert_eq!(composed.types, stored.types, "a Foo, not a Scale");
    assert_eq!(stored.data["spec"]["replicas"], 3, "the stored object stays as it is (the old object)");
}

#[test]
fn a_nested_path_is_written_making_the_objects_on_the_way() {
    let path = ReplicasPath::parse(".spec.a.b").expect("nested");
    let composed = compose(&foo(), &path, 5).expect("composed");
    assert_eq!(composed.data["spec"]["a"], json!({ "b": 5 }));
    assert_eq!(composed.data["spec"]["replicas"], 3, "another field, untouched");
    // An explicit null on the way is no object yet: replaced.
    let mut stored = foo();
    stored.data["spec"]["a"] = Value::Null;
    assert_eq!(compose(&stored, &path, 1).expect("composed").data["spec"]["a"]["b"], 1);
    // An object without a spec at all.
    let bare = object(json!({ "apiVersion": "x.dev/v1", "kind": "X", "metadata": { "name": "x" } }));
    assert_eq!(compose(&bare, &path, 2).expect("composed").data, json!({ "spec": { "a": { "b": 2 } } }));
}

#[test]
fn odd_paths_are_refused_with_the_reason() {
    for (path, why) in [
        ("spec.replicas", "start with '.'"),
        ("", "start with '.'"),
        (".spec", "under .spec"),
        (".status.replicas", "under .spec"),
        (".metadata.labels.n", "under .spec"),
        (".spec..replicas", "empty"),
        (".spec.replicas.", "empty"),
        (".spec.items[0].replicas", "no array"),
        (".spec.*", "no array"),
        (".spec['replicas']", "no array"),
        (".spec.a b", "no array"),
    ] {
        let e = ReplicasPath::parse(path).expect_err(path).to_string();
        assert!(e.contains(why) && e.contains(&format!("{path:?}")), "{path}: {e}");
    }
}

#[test]
fn a_stored_value_of_the_wrong_shape_is_an_error_not_overwritten() {
    let mut stored = foo();
    stored.data["spec"]["replicas"] = json!("three");
    let e = compose(&stored, &ReplicasPath::parse(".spec.replicas").expect("path"), 4).expect_err("a string");
    assert!(
        e.to_string()
            .contains("the stored object has \"three\" at .spec.replicas, where .spec.replicas needs an integer"),
        "{e}"
    );
    let e =
        compose(&foo(), &ReplicasPath::parse(".spec.replicas.count").expect("path"), 4).expect_err("3 is no object");
    assert!(e.to_string().contains("has 3 at .spec.replicas, where .spec.replicas.count needs an object"), "{e}");
}

#[test]
fn the_scale_says_how_many_and_zero_is_left_out() {
    let scale = |spec: Value| {
        object(json!({ "apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": { "name": "f" }, "spec": spec }))
    };
    assert_eq!(replicas_of(&scale(json!({ "replicas": 7 }))).expect("7"), 7);
    assert_eq!(replicas_of(&scale(json!({}))).expect("omitted"), 0, "autoscaling/v1 omits zero");
    let e = replicas_of(&scale(json!({ "replicas": "7" }))).expect_err("a string");
    assert!(e.to_string().contains("spec.replicas is not an integer: \"7\""), "{e}");
}

#[test]
fn a_scale_that_cannot_be_composed_is_refused_under_fail_and_allowed_with_a_warning_under_ignore() {
    let e = ScaleError::NoScale { crd: "foos.samplecontroller.k8s.io".into(), version: "v1alpha1".into() };
    let error = format!("quorum could not validate the scale of ns/f: {e}");
    let fail = decide::failure(error.clone(), FailurePolicy::Fail);
    assert!(!fail.allowed && fail.label() == "error", "{fail:?}");
    assert!(
        fail.message().contains("has no scale subresource") && fail.message().contains("ns/f"),
        "{}",
        fail.message()
    );
    let ignore = decide::failure(error, FailurePolicy::Ignore);
    assert!(ignore.allowed && ignore.label() == "error_ignored", "{ignore:?}");
    assert!(
        ignore.warnings[0].contains("has no scale subresource") && ignore.warnings[0].contains("failure policy Ignore")
    );
}
