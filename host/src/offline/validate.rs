//! One admission request offline (`kwop plugin validate`, validation fixtures), answered as the
//! host's webhook would answer it (the same verdict, `admission::decide`).

use super::{namespaced, place_in_namespaces};
use crate::admission::decide::{self, Verdict};
use crate::plugin::{AdmissionRequest, CallSpec, LoadedPlugin, Operation, PrimaryScope, StaticCache};
use crate::schema::Schemas;
use crate::vocab::FailurePolicy;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::SystemTime;

/// One `validate` of `object` (an UPDATE when `old` is given) with a cache holding `observed`,
/// at `now` (default: now). Returns the JSON to print and whether the object was allowed.
pub fn validate_offline(
    p: &LoadedPlugin,
    mut object: Value,
    old: Option<Value>,
    mut observed: Vec<Value>,
    schemas: &Schemas,
    now: Option<SystemTime>,
) -> (Value, bool) {
    if !p.info.validates {
        let why =
            format!("{} does not validate (its info() says validates: false): the host never calls it", p.info.name);
        return (json!({ "skipped": why }), true);
    }
    let ns = place_in_namespaces(&mut object, &mut observed, schemas);
    // As the host: an object being deleted is let through without asking.
    if object.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()) {
        return (Verdict::allow().to_json(), true);
    }
    let mut cache = StaticCache::default();
    for g in p.info.readable() {
        cache.set_namespaced(g.clone(), namespaced(schemas, g));
    }
    for o in observed {
        cache.insert(o);
    }
    let view = PrimaryScope::new(Arc::new(cache), ns.clone());
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let mut spec = CallSpec::new(format!("{}/{name}", ns.as_deref().unwrap_or("")), &object.to_string());
    if let Some(at) = now {
        spec.started_at = at;
    }
    let req = AdmissionRequest {
        operation: if old.is_some() { Operation::Update } else { Operation::Create },
        object: object.to_string(),
        old_object: old.map(|o| o.to_string()),
        user: "kwop-plugin-validate".into(),
        dry_run: false,
        subresource: None,
    };
    let verdict = decide::verdict(&p.info.name, p.validate_with(&req, spec, Arc::new(view)), FailurePolicy::Fail);
    (verdict.to_json(), verdict.allowed)
}
