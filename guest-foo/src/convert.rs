//! Admission beyond validation: the default guest-foo sets (`mutate`) and the conversion between
//! the Foo CRD's two versions (`convert`) — plain functions over JSON, unit-tested natively.
//!
//! `v1alpha1` (sample-controller's shape, the stored version): `spec.deploymentName`,
//! `spec.replicas`. `v1beta1` groups what describes the Deployment: `spec.deployment.name`,
//! `spec.deployment.replicas`. Everything else (metadata, status, other spec fields) is carried
//! over untouched, so a conversion round-trips.

use serde_json::{Map, Value};

/// The group of the Foo CRD.
pub const GROUP: &str = "samplecontroller.k8s.io";
/// The versions guest-foo converts between.
pub const VERSIONS: [&str; 2] = ["v1alpha1", "v1beta1"];

/// The replicas a Foo gets when it asks for none (guest-foo v2: 3, so a hot swap shows).
pub const DEFAULT_REPLICAS: i64 = if cfg!(feature = "v2") { 3 } else { 1 };

/// The Foo with `spec.replicas` set when it is missing (or null); `None` when nothing changes.
pub fn default_replicas(mut foo: Value) -> Option<Value> {
    let spec = foo.as_object_mut()?.entry("spec").or_insert_with(|| Value::Object(Map::new()));
    let spec = spec.as_object_mut()?;
    match spec.get("replicas") {
        Some(v) if !v.is_null() => None,
        _ => {
            spec.insert("replicas".into(), Value::from(DEFAULT_REPLICAS));
            Some(foo)
        }
    }
}

/// `foo` converted to `api_version` (`samplecontroller.k8s.io/v1alpha1` or `/v1beta1`).
pub fn convert(mut foo: Value, api_version: &str) -> Result<Value, String> {
    let want = version_of(api_version)?;
    let from = foo.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
    let have = version_of(&from)?;
    let obj = foo.as_object_mut().ok_or("a Foo is a JSON object")?;
    if have != want {
        if let Some(spec) = obj.get_mut("spec") {
            let spec = spec.as_object_mut().ok_or("spec is not an object")?;
            match (have, want) {
                ("v1alpha1", _) => to_beta(spec)?,
                _ => to_alpha(spec)?,
            }
        }
    }
    obj.insert("apiVersion".into(), Value::from(api_version));
    Ok(foo)
}

fn version_of(api_version: &str) -> Result<&str, String> {
    match api_version.split_once('/') {
        Some((GROUP, v)) if VERSIONS.contains(&v) => Ok(v),
        _ => Err(format!("guest-foo converts Foos between {GROUP}/{VERSIONS:?}, not {api_version:?}")),
    }
}

fn to_beta(spec: &mut Map<String, Value>) -> Result<(), String> {
    if spec.contains_key("deployment") {
        return Err("a v1alpha1 Foo with spec.deployment has no v1beta1 form (the field is v1beta1's)".into());
    }
    let mut d = Map::new();
    if let Some(n) = spec.remove("deploymentName") {
        d.insert("name".into(), n);
    }
    if let Some(r) = spec.remove("replicas") {
        d.insert("replicas".into(), r);
    }
    if !d.is_empty() {
        spec.insert("deployment".into(), Value::Object(d));
    }
    Ok(())
}

fn to_alpha(spec: &mut Map<String, Value>) -> Result<(), String> {
    for taken in ["deploymentName", "replicas"] {
        if spec.contains_key(taken) {
            return Err(format!("a v1beta1 Foo with spec.{taken} has no v1alpha1 form (the field is v1alpha1's)"));
        }
    }
    let Some(d) = spec.remove("deployment") else { return Ok(()) };
    let Value::Object(mut d) = d else { return Err("spec.deployment is not an object".into()) };
    if let Some(n) = d.remove("name") {
        spec.insert("deploymentName".into(), n);
    }
    if let Some(r) = d.remove("replicas") {
        spec.insert("replicas".into(), r);
    }
    if let Some(k) = d.keys().next() {
        return Err(format!("spec.deployment.{k} has no v1alpha1 form"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn alpha() -> Value {
        json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
            "metadata": {"name": "a", "namespace": "n", "uid": "u", "labels": {"x": "y"}},
            "spec": {"deploymentName": "d", "replicas": 2, "other": true},
            "status": {"availableReplicas": 1}})
    }

    #[test]
    fn v1alpha1_and_v1beta1_convert_both_ways_and_round_trip() {
        let beta = convert(alpha(), "samplecontroller.k8s.io/v1beta1").expect("converts");
        assert_eq!(beta["spec"], json!({"deployment": {"name": "d", "replicas": 2}, "other": true}));
        assert_eq!(
            (beta["metadata"].clone(), beta["status"].clone()),
            (alpha()["metadata"].clone(), alpha()["status"].clone())
        );
        assert_eq!(convert(beta, "samplecontroller.k8s.io/v1alpha1").expect("back"), alpha());
        // Same version: only apiVersion is (re)set; a Foo without spec converts.
        assert_eq!(convert(alpha(), "samplecontroller.k8s.io/v1alpha1").expect("same"), alpha());
        let bare = json!({"apiVersion": "samplecontroller.k8s.io/v1beta1", "kind": "Foo", "metadata": {"name": "b"}});
        assert_eq!(
            convert(bare, "samplecontroller.k8s.io/v1alpha1").expect("bare")["apiVersion"],
            "samplecontroller.k8s.io/v1alpha1"
        );
    }

    #[test]
    fn what_has_no_form_in_the_other_version_is_refused_by_name() {
        let e = convert(alpha(), "samplecontroller.k8s.io/v2").expect_err("unknown version");
        assert!(e.contains("not \"samplecontroller.k8s.io/v2\""), "{e}");
        let mut odd = convert(alpha(), "samplecontroller.k8s.io/v1beta1").expect("converts");
        odd["spec"]["deployment"]["image"] = json!("nginx");
        let e = convert(odd, "samplecontroller.k8s.io/v1alpha1").expect_err("no alpha form");
        assert!(e.contains("spec.deployment.image"), "{e}");
    }

    #[test]
    fn a_foo_without_replicas_gets_the_default_and_one_with_them_is_left_alone() {
        let mut f = alpha();
        assert_eq!(default_replicas(f.clone()), None);
        f["spec"]["replicas"] = Value::Null;
        assert_eq!(default_replicas(f).expect("defaulted")["spec"]["replicas"], json!(DEFAULT_REPLICAS));
        let no_spec = json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": {}});
        assert_eq!(default_replicas(no_spec).expect("defaulted")["spec"], json!({"replicas": DEFAULT_REPLICAS}));
    }
}
