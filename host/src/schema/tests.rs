use super::*;
use serde_json::json;

fn schemas(file: &str) -> Schemas {
    let text = std::fs::read_to_string(format!("{}/../{file}", env!("CARGO_MANIFEST_DIR"))).expect("crd file");
    let objects: Vec<Value> =
        serde_yaml::Deserializer::from_str(&text).map(|d| serde::Deserialize::deserialize(d).expect("yaml")).collect();
    let mut s = Schemas::default();
    s.add_crds(file, &objects).expect("a crd");
    s
}

fn foo() -> Gvk {
    Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo")
}

fn messages(v: Vec<Violation>) -> Vec<String> {
    v.iter().map(ToString::to_string).collect()
}

#[test]
fn a_status_wrapped_in_status_is_refused_with_its_path() {
    let s = schemas("crds/foo.yaml");
    assert_eq!(
        messages(s.check_status(&foo(), &json!({ "status": { "availableReplicas": 1 } }))),
        vec![".status.status: field not declared in schema"]
    );
    assert!(s.check_status(&foo(), &json!({ "availableReplicas": 1 })).is_empty());
}

#[test]
fn types_and_bounds_of_a_custom_resource_are_checked() {
    let s = schemas("crds/foo.yaml");
    let obj = |spec: Value| json!({ "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": { "name": "a" }, "spec": spec });
    assert_eq!(
        messages(s.check_object(&obj(json!({ "replicas": "3" })))),
        vec![".spec.replicas: expected an integer, got string \"3\" (write it without quotes)"]
    );
    assert_eq!(
        messages(s.check_object(&obj(json!({ "replicas": 11 })))),
        vec![".spec.replicas: should be less than or equal to 10, got 11"]
    );
    assert_eq!(
        messages(s.check_object(&obj(json!({ "deploymentname": "x" })))),
        vec![".spec.deploymentname: field not declared in schema"]
    );
    assert!(s.check_object(&obj(json!({ "replicas": 3, "deploymentName": "x" }))).is_empty());
    assert_eq!(s.namespaced(&foo()), Some(true));
}

#[test]
fn preserve_unknown_fields_accepts_anything_below() {
    let s = schemas("tests/crds/chaos.yaml");
    let g = Gvk::new("test.kwop.dev", "v1", "Chaos");
    assert!(s.check_status(&g, &json!({ "anything": { "at": ["all"] } })).is_empty());
}

#[test]
fn enums_nullable_int_or_string_and_required() {
    let schema = json!({
        "type": "object", "required": ["mode"],
        "properties": {
            "mode": { "type": "string", "enum": ["a", "b"] },
            "port": { "x-kubernetes-int-or-string": true },
            "note": { "type": "string", "nullable": true },
            "tags": { "type": "array", "items": { "type": "string" }, "maxItems": 1 },
            "labels": { "type": "object", "additionalProperties": { "type": "string" } },
        }
    });
    let mut out = Vec::new();
    structural::check(
        &schema,
        &json!({ "mode": "c", "port": true, "note": null, "tags": [1, "x"], "labels": { "k": 2 } }),
        "",
        Required::Check,
        &mut out,
    );
    assert_eq!(
        messages(out),
        vec![
            ".mode: unsupported value \"c\": supported values: \"a\", \"b\"",
            ".port: expected an integer or a string, got boolean true",
            ".tags: may have at most 1 items, has 2",
            ".tags[0]: expected a string, got number 1 (quote it)",
            ".labels.k: expected a string, got number 2 (quote it)",
        ]
    );
    let mut out = Vec::new();
    structural::check(&schema, &json!({}), "", Required::Check, &mut out);
    assert_eq!(messages(out), vec![".mode: Required value"]);
}

#[test]
fn a_number_in_configmap_data_is_caught_through_the_type() {
    let s = Schemas::default();
    let cm = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "x" }, "data": { "replicas": 1 } });
    let v = messages(s.check_object(&cm));
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].starts_with(".data.replicas: invalid type: integer `1`, expected a string"), "{v:?}");
    // A partial Deployment intent (no selector or template) is not an error: apply merges.
    let d = json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "x" }, "spec": { "replicas": 2 } });
    assert!(s.check_object(&d).is_empty());
    let d = json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "x" }, "spec": { "replicas": "2" } });
    assert_eq!(messages(s.check_object(&d)).len(), 1);
}

#[test]
fn a_file_that_is_not_a_crd_is_an_error() {
    let mut s = Schemas::default();
    let Err(e) = s.add_crds("x.yaml", &[json!({ "kind": "ConfigMap" })]) else { panic!("a ConfigMap is not a CRD") };
    assert!(e.to_string().contains("expected a CustomResourceDefinition"), "{e}");
}
