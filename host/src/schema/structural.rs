//! Checks a JSON value against a CRD's structural openAPIV3Schema, as the API server does for a
//! server-side apply: types, `nullable`, `enum`, bounds, `required`, and fields the schema does
//! not declare (refused unless `x-kubernetes-preserve-unknown-fields`).
//!
//! Not the `jsonschema` crate: a CRD schema is not plain JSON Schema. Undeclared fields are an
//! error only for apply (JSON Schema allows them unless `additionalProperties: false`), and
//! `x-kubernetes-int-or-string`, `x-kubernetes-preserve-unknown-fields` and
//! `x-kubernetes-embedded-resource` change what a node accepts; the paths must also read as the
//! API server writes them (`.status.status`). The subset a structural schema may use is small.

use serde_json::{Map, Value};

/// One thing the API server would refuse, at a field path like `.spec.replicas`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// `.spec.ports[0].name`; empty for the value itself.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// How `required` is treated: a server-side apply intent is merged into the live object, so a
/// required field it leaves out may already be there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Required {
    /// Check `required` (the value is the whole object, e.g. a status written whole).
    Check,
    /// Skip it (the value is a partial intent).
    Skip,
}

/// Checks `value` at `path` against `schema`; violations are appended to `out`.
pub fn check(schema: &Value, value: &Value, path: &str, required: Required, out: &mut Vec<Violation>) {
    let s = |k: &str| schema.get(k);
    let flag = |k: &str| s(k).and_then(Value::as_bool).unwrap_or(false);
    let mut fail = |message: String| out.push(Violation { path: path.to_string(), message });
    if value.is_null() {
        if !flag("nullable") && (s("type").is_some() || flag("x-kubernetes-int-or-string")) {
            fail("must not be null (the schema does not say nullable: true)".into());
        }
        return;
    }
    if flag("x-kubernetes-int-or-string") {
        if !(value.is_i64() || value.is_u64() || value.is_string()) {
            fail(format!("expected an integer or a string, got {}", describe(value)));
        }
        return;
    }
    let ty = s("type").and_then(Value::as_str);
    let type_ok = match ty {
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("string") => value.is_string(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        _ => true,
    };
    if !type_ok {
        let hint = match (ty, value) {
            (Some("string"), Value::Number(_) | Value::Bool(_)) => " (quote it)",
            (Some("integer"), Value::String(_)) => " (write it without quotes)",
            (Some("object"), Value::String(_)) => " (a JSON object, not JSON text)",
            _ => "",
        };
        fail(format!("expected {}, got {}{hint}", article(ty.unwrap_or("?")), describe(value)));
        return;
    }
    if let Some(allowed) = s("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            fail(format!("unsupported value {value}: supported values: {}", list.join(", ")));
        }
    }
    bounds(schema, value, &mut fail);
    match value {
        Value::Object(map) => object(schema, map, path, required, out),
        Value::Array(items) => {
            if let Some(item_schema) = s("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}[{i}]"), required, out);
                }
            }
        }
        _ => {}
    }
}

fn object(schema: &Value, map: &Map<String, Value>, path: &str, required: Required, out: &mut Vec<Violation>) {
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    let preserve = schema.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true);
    let embedded = schema.get("x-kubernetes-embedded-resource").and_then(Value::as_bool) == Some(true);
    if required == Required::Check {
        for r in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if !map.contains_key(r) {
                out.push(Violation { path: format!("{path}.{r}"), message: "Required value".into() });
            }
        }
    }
    for (key, v) in map {
        let child = format!("{path}.{key}");
        if let Some(p) = props.and_then(|p| p.get(key)) {
            check(p, v, &child, required, out);
        } else if let Some(a) = additional.filter(|a| a.is_object()) {
            check(a, v, &child, required, out);
        } else if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            // an embedded object's own type and metadata, checked by the API server as such
        } else if !preserve && additional != Some(&Value::Bool(true)) {
            out.push(Violation { path: child, message: "field not declared in schema".into() });
        }
    }
}

fn bounds(schema: &Value, value: &Value, fail: &mut impl FnMut(String)) {
    let num = |k: &str| schema.get(k).and_then(Value::as_f64);
    let excl = |k: &str| schema.get(k).and_then(Value::as_bool) == Some(true);
    if let Some(x) = value.as_f64().filter(|_| value.is_number()) {
        if let Some(min) = num("minimum") {
            if x < min || (excl("exclusiveMinimum") && x == min) {
                fail(format!("should be greater than or equal to {min}, got {value}"));
            }
        }
        if let Some(max) = num("maximum") {
            if x > max || (excl("exclusiveMaximum") && x == max) {
                fail(format!("should be less than or equal to {max}, got {value}"));
            }
        }
    }
    let len = match value {
        Value::String(s) => Some((s.chars().count(), "minLength", "maxLength", "characters")),
        Value::Array(a) => Some((a.len(), "minItems", "maxItems", "items")),
        Value::Object(o) => Some((o.len(), "minProperties", "maxProperties", "properties")),
        _ => None,
    };
    if let Some((n, min_key, max_key, unit)) = len {
        if let Some(min) = schema.get(min_key).and_then(Value::as_u64).filter(|m| (n as u64) < *m) {
            fail(format!("should have at least {min} {unit}, has {n}"));
        }
        if let Some(max) = schema.get(max_key).and_then(Value::as_u64).filter(|m| (n as u64) > *m) {
            fail(format!("may have at most {max} {unit}, has {n}"));
        }
    }
}

fn article(ty: &str) -> String {
    match ty {
        "object" | "array" | "integer" => format!("an {ty}"),
        other => format!("a {other}"),
    }
}

/// `string "3"`, `number 1`, `object {...}`: what a value is, briefly.
pub fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) if s.chars().count() > 40 => format!("string {:?}...", s.chars().take(40).collect::<String>()),
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}
