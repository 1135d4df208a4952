//! "Does the observed object already satisfy the intent?"

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

#[cfg(test)]
mod tests {
    use super::covers;
    use serde_json::json;

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
}
