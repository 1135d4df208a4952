//! What a plugin's `mutate` may do to an object, checked, and the JSONPatch the API server gets.
//! Pure, so the webhook and `kwop plugin mutate` share it.
//!
//! A plugin returns the whole object as it should be stored; the host compares it with what it
//! sent, field by field (arrays as one value), and refuses the mutation if any changed field is
//! not under a path the plugin declared in `plugin-info.mutates` — whatever the path, never the
//! object's identity and what the API server or the host own ([`FIXED`]: `apiVersion`, `kind`,
//! `metadata.name/namespace/uid/…`, finalizers, owner references, `status`), nor a `kwop.dev/`
//! label or annotation (the host's tracking, sharding and trace marks). The declaration cannot
//! name the fixed paths either (see `vocab::info`). The patch is `json-patch`'s diff of the two.

use serde_json::Value;

/// The outcome of a checked mutation.
#[derive(Debug, Clone, PartialEq)]
pub enum Checked {
    /// Nothing changed.
    Unchanged,
    /// The patch to send, and the dotted paths it changes (for logs and messages).
    Patch(json_patch::Patch, Vec<String>),
}

/// Never changed at admission, whatever a plugin declared.
pub const FIXED: [&[&str]; 15] = [
    &["apiVersion"],
    &["kind"],
    &["metadata", "name"],
    &["metadata", "generateName"],
    &["metadata", "namespace"],
    &["metadata", "uid"],
    &["metadata", "resourceVersion"],
    &["metadata", "generation"],
    &["metadata", "creationTimestamp"],
    &["metadata", "deletionTimestamp"],
    &["metadata", "deletionGracePeriodSeconds"],
    &["metadata", "finalizers"],
    &["metadata", "ownerReferences"],
    &["metadata", "managedFields"],
    &["status"],
];

/// A `kwop.dev/` label or annotation (`metadata.labels.kwop.dev/…`, `….x.kwop.dev/…`).
fn host_mark(path: &[String]) -> bool {
    matches!(path, [m, kind, key, ..] if m == "metadata" && (kind == "labels" || kind == "annotations")
        && key.split('/').next().is_some_and(|prefix| prefix == "kwop.dev" || prefix.ends_with(".kwop.dev")))
}

/// Checks `mutated` against `sent` and the plugin's `declared` paths.
pub fn check(plugin: &str, sent: &Value, mutated: &Value, declared: &[String]) -> Result<Checked, String> {
    if !mutated.is_object() {
        return Err(format!("{plugin}'s mutation is not a JSON object"));
    }
    let mut changed = Vec::new();
    leaves(sent, mutated, &mut Vec::new(), &mut changed);
    if changed.is_empty() {
        return Ok(Checked::Unchanged);
    }
    let declared: Vec<Vec<&str>> = declared.iter().map(|d| d.split('.').collect()).collect();
    let under =
        |path: &[String], prefix: &[&str]| path.len() >= prefix.len() && path.iter().zip(prefix).all(|(a, b)| a == b);
    for path in &changed {
        if let Some(f) = FIXED.iter().find(|f| under(path, f)) {
            return Err(format!(
                "{plugin}'s mutation changes {}, which no mutation may change",
                if path.len() > f.len() { f.join(".") } else { path.join(".") }
            ));
        }
        if host_mark(path) {
            return Err(format!("{plugin}'s mutation changes {}, a kwop.dev/ mark only the host sets", path.join(".")));
        }
        if !declared.iter().any(|d| under(path, d)) {
            let list: Vec<String> = declared.iter().map(|d| d.join(".")).collect();
            return Err(format!(
                "{plugin}'s mutation changes {}, which it did not declare (plugin-info.mutates: {})",
                path.join("."),
                if list.is_empty() { "nothing".to_string() } else { list.join(", ") }
            ));
        }
    }
    let paths = changed.iter().map(|p| p.join(".")).collect();
    Ok(Checked::Patch(json_patch::diff(sent, mutated), paths))
}

/// Every changed field between `a` and `b`: objects are compared key by key, anything else
/// (scalars, arrays, a type change) as one value.
fn leaves(a: &Value, b: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                at.push(k.clone());
                let empty = Value::Object(serde_json::Map::new());
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => leaves(p, q, at, out),
                    // An object added or removed whole: its fields are what changed.
                    (None, Some(o @ Value::Object(m))) | (Some(o @ Value::Object(m)), None) if !m.is_empty() => {
                        let (p, q) = if x.contains_key(k) { (o, &empty) } else { (&empty, o) };
                        leaves(p, q, at, out)
                    }
                    _ => out.push(at.clone()),
                }
                at.pop();
            }
        }
        _ if a != b => out.push(at.clone()),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn foo() -> Value {
        json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
            "metadata": {"name": "a", "namespace": "n", "labels": {"app.kubernetes.io/name": "x"}},
            "spec": {"deploymentName": "d"}})
    }

    fn declared(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_default_under_a_declared_path_is_one_patch_operation() {
        let mut m = foo();
        m["spec"]["replicas"] = json!(1);
        let Checked::Patch(patch, paths) = check("p", &foo(), &m, &declared(&["spec.replicas"])).expect("allowed")
        else {
            panic!("a change")
        };
        assert_eq!(paths, vec!["spec.replicas"]);
        assert_eq!(
            serde_json::to_value(&patch).expect("json"),
            json!([{"op": "add", "path": "/spec/replicas", "value": 1}])
        );
        // The patch applies to what was sent and gives the mutation.
        let mut applied = foo();
        json_patch::patch(&mut applied, &patch).expect("applies");
        assert_eq!(applied, m);
        assert_eq!(check("p", &foo(), &foo(), &declared(&["spec.replicas"])), Ok(Checked::Unchanged));
        // A whole new spec, with the declared field only, is a change of spec.replicas.
        let mut bare = foo();
        bare.as_object_mut().expect("object").remove("spec");
        let mut with = bare.clone();
        with["spec"] = json!({"replicas": 2});
        assert!(matches!(check("p", &bare, &with, &declared(&["spec.replicas"])), Ok(Checked::Patch(..))));
        // Label keys with dots stay one segment under a declared parent.
        let mut l = foo();
        l["metadata"]["labels"]["app.kubernetes.io/part-of"] = json!("y");
        assert!(check("p", &foo(), &l, &declared(&["metadata.labels"])).is_ok());
    }

    #[test]
    fn anything_outside_the_declared_paths_or_the_identity_is_refused_by_name() {
        let mut m = foo();
        m["spec"]["replicas"] = json!(1);
        m["spec"]["deploymentName"] = json!("other");
        let e = check("p", &foo(), &m, &declared(&["spec.replicas"])).expect_err("undeclared");
        assert!(
            e.contains("changes spec.deploymentName, which it did not declare (plugin-info.mutates: spec.replicas)"),
            "{e}"
        );
        let mut r = foo();
        r["metadata"]["name"] = json!("b");
        let e = check("p", &foo(), &r, &declared(&["metadata"])).expect_err("identity");
        assert!(e.contains("changes metadata.name, which no mutation may change"), "{e}");
        let mut f = foo();
        f["metadata"]["finalizers"] = json!(["kwop.dev/other"]);
        let e = check("p", &foo(), &f, &declared(&["metadata"])).expect_err("finalizers");
        assert!(e.contains("changes metadata.finalizers, which no mutation may change"), "{e}");
        let mut k = foo();
        k["metadata"]["labels"]["kwop.dev/owner"] = json!("forged");
        let e = check("p", &foo(), &k, &declared(&["metadata.labels"])).expect_err("a host mark");
        assert!(e.contains("metadata.labels.kwop.dev/owner, a kwop.dev/ mark only the host sets"), "{e}");
        let mut a = foo();
        a["metadata"]["annotations"] = json!({"shard.kwop.dev/x": "1"});
        assert!(check("p", &foo(), &a, &declared(&["metadata.annotations"])).is_err());
        let mut s = foo();
        s["status"] = json!({"availableReplicas": 3});
        assert!(check("p", &foo(), &s, &declared(&["spec"])).expect_err("status").contains("status"));
        let mut gone = foo();
        gone.as_object_mut().expect("object").remove("spec");
        let e = check("p", &foo(), &gone, &declared(&["spec.replicas"])).expect_err("removed spec");
        assert!(e.contains("changes spec.deploymentName,"), "{e}");
        assert!(check("p", &foo(), &json!([1]), &[]).expect_err("not an object").contains("not a JSON object"));
    }
}
