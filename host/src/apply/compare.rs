//! "Does the observed object already satisfy the intent?"

use kube::api::DynamicObject;
use serde_json::Value;

/// True when every field of `desired` is present in `observed` with the same value: maps are
/// compared key by key (extra observed keys are fine: defaults, other managers' fields), lists
/// element by element with equal length, numbers by value (`1` = `1.0`). A `null` in `desired`
/// asks for the field to be absent.
pub fn covers(observed: &Value, desired: &Value) -> bool {
    match (observed, desired) {
        (Value::Object(o), Value::Object(d)) => d.iter().all(|(k, dv)| match o.get(k) {
            Some(ov) => covers(ov, dv),
            None => dv.is_null(),
        }),
        (Value::Array(o), Value::Array(d)) => o.len() == d.len() && o.iter().zip(d).all(|(ov, dv)| covers(ov, dv)),
        (Value::Number(o), Value::Number(d)) => o == d || o.as_f64() == d.as_f64(),
        (o, d) => o == d,
    }
}

/// The fields of `desired` that `observed` does not [`covers`], as dotted paths (`spec.replicas`;
/// a list is named whole), at most `max`: what a write changed, in words for `kwop explain`.
pub fn uncovered(observed: &Value, desired: &Value, max: usize) -> Vec<String> {
    fn walk(o: Option<&Value>, d: &Value, at: &mut Vec<String>, out: &mut Vec<String>, max: usize) {
        if out.len() >= max {
            return;
        }
        match (o, d) {
            (Some(Value::Object(o)), Value::Object(d)) => {
                for (k, dv) in d {
                    at.push(k.clone());
                    walk(o.get(k), dv, at, out, max);
                    at.pop();
                }
            }
            (None, d) if d.is_null() => {}
            (Some(o), d) if covers(o, d) => {}
            _ => out.push(at.join(".")),
        }
    }
    let mut out = Vec::new();
    walk(Some(observed), desired, &mut Vec::new(), &mut out, max);
    out
}

/// Whether `manager`'s `managedFields` entry for `subresource` owns a field under `top` (e.g.
/// `status`) that `desired` (the value of `top`) does not have: a field the manager set before
/// and has since dropped. Fields inside lists are not looked into (lists are compared whole by
/// [`covers`]).
pub fn owns_fields_beyond(o: &DynamicObject, manager: &str, subresource: &str, desired: &Value) -> bool {
    let Some(entry) = o
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|m| m.manager.as_deref() == Some(manager) && m.subresource.as_deref().unwrap_or("") == subresource)
    else {
        return false;
    };
    let Some(fields) = entry.fields_v1.as_ref().and_then(|f| f.0.get(format!("f:{subresource}"))) else {
        return false;
    };
    owned_beyond(fields, desired)
}

fn owned_beyond(fields: &Value, desired: &Value) -> bool {
    let Some(map) = fields.as_object() else {
        return false;
    };
    map.iter().any(|(k, sub)| match k.strip_prefix("f:") {
        Some(name) => match desired.get(name) {
            None => true,
            Some(d) => owned_beyond(sub, d),
        },
        // ".", list keys ("k:"), values ("v:") and indices ("i:").
        None => false,
    })
}

#[cfg(test)]
mod tests {
    use super::{covers, owns_fields_beyond, uncovered};
    use serde_json::json;

    #[test]
    fn uncovered_names_the_fields_a_write_changes() {
        let desired = json!({"spec": {"replicas": 1, "template": {"x": [1]}}, "metadata": {"labels": {"a": "b"}}});
        let observed = json!({"spec": {"replicas": 5, "template": {"x": [1]}, "extra": 1}, "metadata": {}});
        assert_eq!(uncovered(&observed, &desired, 10), vec!["spec.replicas", "metadata.labels"]);
        assert_eq!(uncovered(&observed, &desired, 1), vec!["spec.replicas"]);
        assert!(uncovered(&desired, &desired, 10).is_empty());
    }

    #[test]
    fn defaults_and_foreign_fields_do_not_count_as_drift() {
        let observed = json!({"spec":{"replicas":2,"strategy":{"type":"RollingUpdate"},
            "template":{"spec":{"containers":[{"name":"nginx","image":"nginx:latest","imagePullPolicy":"Always"}]}}}});
        let desired =
            json!({"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:latest"}]}}}});
        assert!(covers(&observed, &desired));
    }

    #[test]
    fn a_changed_missing_or_extra_element_is_drift() {
        let desired = json!({"spec":{"replicas":2,"list":[{"a":1}]}});
        assert!(!covers(&json!({"spec":{"replicas":3,"list":[{"a":1}]}}), &desired));
        assert!(!covers(&json!({"spec":{"list":[{"a":1}]}}), &desired));
        assert!(!covers(&json!({"spec":{"replicas":2,"list":[{"a":1},{"a":2}]}}), &desired));
        assert!(covers(&json!({"spec":{"replicas":2.0,"list":[{"a":1,"b":0}]}}), &desired));
        assert!(covers(&json!({}), &json!({"gone": null})));
    }

    #[test]
    fn a_status_field_the_manager_set_and_dropped_is_seen() {
        let o: kube::api::DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "X", "metadata": { "name": "x", "managedFields": [
                { "manager": "other", "operation": "Apply", "subresource": "status", "fieldsV1": { "f:status": { "f:theirs": {} } } },
                { "manager": "kwop-p", "operation": "Apply", "subresource": "status", "fieldsV1":
                    { "f:status": { ".": {}, "f:a": {}, "f:b": { "f:c": {} }, "f:list": { "k:{\"n\":1}": {} } } } }
            ] }
        }))
        .expect("object");
        let all = json!({ "a": 1, "b": { "c": 2 }, "list": [] });
        assert!(!owns_fields_beyond(&o, "kwop-p", "status", &all));
        assert!(owns_fields_beyond(&o, "kwop-p", "status", &json!({ "a": 1, "list": [] })), "b dropped");
        assert!(owns_fields_beyond(&o, "kwop-p", "status", &json!({ "a": 1, "b": {}, "list": [] })), "b.c dropped");
        assert!(!owns_fields_beyond(&o, "kwop-q", "status", &json!({})), "another manager's fields are not ours");
    }
}
