//! Lists an intent sets that an object does not converge to: where server-side apply alone
//! cannot restore a hand edit.
//!
//! Server-side apply merges keyed lists (`ports` by port+protocol, `containers` by name) item by
//! item. When someone edits a key by hand (a Service port 80 → 8080, a container renamed), the
//! edited item belongs to them, and applying the intent adds the plugin's item *beside* it
//! instead of replacing it: the result keeps a foreign item (or the API server refuses it, e.g.
//! two unnamed ports). The applier then replaces exactly these lists with the intent's and
//! applies again to own them. Lists are found through objects only: a list inside a list is
//! handled by replacing the outer one, which is all a merge patch can address.

use super::covers;
use serde_json::{Map, Value};

/// A path through nested objects, e.g. `["spec", "ports"]`.
pub type Path = Vec<String>;

/// Lists of `desired` that `observed` holds differently (before applying): candidates for a
/// hand edit that server-side apply will merge with instead of undo.
pub fn differing(observed: &Value, desired: &Value) -> Vec<Path> {
    let mut out = Vec::new();
    walk(observed, desired, &mut Vec::new(), &mut out, &|o, d| {
        o.len() != d.len() || o.iter().zip(d).any(|(oi, di)| !covers(oi, di))
    });
    out
}

/// Lists of `desired` that `written` (what the API server returned after the apply) holds with
/// more items than the intent: items someone else owns, which apply never removes.
pub fn with_foreign_items(written: &Value, desired: &Value) -> Vec<Path> {
    let mut out = Vec::new();
    walk(written, desired, &mut Vec::new(), &mut out, &has_extra_items);
    out
}

fn has_extra_items(o: &[Value], d: &[Value]) -> bool {
    if o.len() != d.len() {
        return o.len() > d.len();
    }
    // Same length: an item may still carry foreign items in a nested list (a port added to the
    // plugin's container). Items are compared in order, as apply keeps the intent's order.
    o.iter().zip(d).any(|(oi, di)| {
        let mut nested = Vec::new();
        walk(oi, di, &mut Vec::new(), &mut nested, &has_extra_items);
        !nested.is_empty()
    })
}

fn walk(
    observed: &Value,
    desired: &Value,
    path: &mut Path,
    out: &mut Vec<Path>,
    differs: &dyn Fn(&[Value], &[Value]) -> bool,
) {
    match (observed, desired) {
        (Value::Object(o), Value::Object(d)) => {
            for (k, dv) in d {
                if path.is_empty() && k == "metadata" {
                    // Metadata lists (finalizers, ownerReferences) are the host's business.
                    continue;
                }
                if let Some(ov) = o.get(k) {
                    path.push(k.clone());
                    walk(ov, dv, path, out, differs);
                    path.pop();
                }
            }
        }
        (Value::Array(o), Value::Array(d)) if differs(o, d) => out.push(path.clone()),
        _ => {}
    }
}

/// A JSON merge patch that replaces each list at `paths` with the intent's value and carries
/// `resource_version` (a conflict, not a silent overwrite, if the object changed meanwhile).
/// Merge patches replace lists whole, for built-in kinds and custom resources alike.
pub fn replace_patch(desired: &Value, paths: &[Path], resource_version: Option<&str>) -> Value {
    let mut patch = Value::Object(Map::new());
    for p in paths {
        let Some(value) = get(desired, p) else {
            continue;
        };
        let mut at = &mut patch;
        for (i, key) in p.iter().enumerate() {
            let Value::Object(m) = at else {
                break;
            };
            if i + 1 == p.len() {
                m.insert(key.clone(), value.clone());
                break;
            }
            at = m.entry(key.clone()).or_insert_with(|| Value::Object(Map::new()));
        }
    }
    if let (Some(rv), Value::Object(m)) = (resource_version, &mut patch) {
        m.insert("metadata".into(), serde_json::json!({ "resourceVersion": rv }));
    }
    patch
}

fn get<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |at, k| at.get(k))
}

/// `/spec/ports`-style text for logs.
pub fn display(paths: &[Path]) -> String {
    paths.iter().map(|p| format!("/{}", p.join("/"))).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(s: &str) -> Path {
        s.split('/').filter(|x| !x.is_empty()).map(str::to_string).collect()
    }

    #[test]
    fn a_hand_edited_port_is_a_differing_list_and_defaults_are_not() {
        let desired = json!({"spec": {"ports": [{"port": 80}], "selector": {"app": "x"}}});
        let edited = json!({"spec": {"ports": [{"port": 8080, "protocol": "TCP"}], "selector": {"app": "x"}}});
        assert_eq!(differing(&edited, &desired), vec![p("spec/ports")]);
        let defaulted = json!({"spec": {"ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}]}});
        assert!(differing(&defaulted, &desired).is_empty());
    }

    #[test]
    fn foreign_items_are_found_at_the_outer_list() {
        let desired = json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "a"}]}}}});
        let renamed = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "nginx-x", "image": "a"}, {"name": "nginx", "image": "a"}]}}}});
        assert_eq!(with_foreign_items(&renamed, &desired), vec![p("spec/template/spec/containers")]);
        let nested = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "nginx", "image": "a", "ports": [{"containerPort": 1}, {"containerPort": 2}]}]}}}});
        let desired_ports = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "nginx", "image": "a", "ports": [{"containerPort": 1}]}]}}}});
        assert_eq!(with_foreign_items(&nested, &desired_ports), vec![p("spec/template/spec/containers")]);
        // Defaults inside the plugin's own items are not foreign items.
        let ok = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "nginx", "image": "a", "imagePullPolicy": "Always"}]}}}});
        assert!(with_foreign_items(&ok, &desired).is_empty());
    }

    #[test]
    fn metadata_lists_are_never_touched() {
        let desired = json!({"metadata": {"finalizers": ["a"]}, "data": {"k": "v"}});
        let observed = json!({"metadata": {"finalizers": ["a", "b"]}, "data": {"k": "v"}});
        assert!(with_foreign_items(&observed, &desired).is_empty());
        assert!(differing(&observed, &desired).is_empty());
    }

    #[test]
    fn the_patch_replaces_only_the_named_lists_and_pins_the_version() {
        let desired = json!({"spec": {"ports": [{"port": 80}], "type": "ClusterIP", "x": {"l": [1]}}});
        let patch = replace_patch(&desired, &[p("spec/ports"), p("spec/x/l")], Some("42"));
        assert_eq!(
            patch,
            json!({"spec": {"ports": [{"port": 80}], "x": {"l": [1]}}, "metadata": {"resourceVersion": "42"}})
        );
        assert_eq!(display(&[p("spec/ports")]), "/spec/ports");
    }
}
