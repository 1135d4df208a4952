//! One admission request offline (`kwop plugin validate`, `kwop plugin mutate`, validation
//! fixtures), answered as the host's webhooks would answer it (the same verdict,
//! `admission::decide`; the same check of a mutation, `admission::mutation`).

use super::{namespaced, place_in_namespaces};
use crate::admission::decide::{self, Verdict};
use crate::admission::mutation::{self, Checked};
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
    let (view, spec, req) = prepare(p, &object, old, observed, schemas, ns, now, "kwop-plugin-validate");
    let verdict = decide::verdict(&p.info.name, p.validate_with(&req, spec, Arc::new(view)), FailurePolicy::Fail);
    (verdict.to_json(), verdict.allowed)
}

/// One `mutate` of `object` (an UPDATE when `old` is given), checked as the host checks it (only
/// declared paths, never the object's identity or status). Returns the JSON to print — the verdict,
/// and when allowed the JSONPatch and the object as it would be stored — and whether it was
/// allowed (a mutation the host would refuse is not).
pub fn mutate_offline(
    p: &LoadedPlugin,
    mut object: Value,
    old: Option<Value>,
    mut observed: Vec<Value>,
    schemas: &Schemas,
    now: Option<SystemTime>,
) -> (Value, bool) {
    if !p.info.mutates() {
        let why =
            format!("{} does not mutate (its info() declares no mutates paths): the host never calls it", p.info.name);
        return (json!({ "skipped": why }), true);
    }
    let ns = place_in_namespaces(&mut object, &mut observed, schemas);
    let (view, spec, req) = prepare(p, &object, old, observed, schemas, ns, now, "kwop-plugin-mutate");
    let name = &p.info.name;
    let failed = |why: String| {
        let v = decide::failure(why, FailurePolicy::Fail);
        (v.to_json(), false)
    };
    match p.mutate_with(&req, spec, Arc::new(view)) {
        Err(e) => failed(format!("{name} could not mutate the object: {e}")),
        Ok(Err(violations)) => {
            let v = decide::verdict(name, Ok(Err(violations)), FailurePolicy::Fail);
            (v.to_json(), false)
        }
        Ok(Ok(m)) => {
            let mutated: Value = match serde_json::from_str(&m.object) {
                Ok(o) => o,
                Err(e) => return failed(format!("{name}'s mutation is not JSON: {e}")),
            };
            match mutation::check(name, &object, &mutated, &p.info.mutates) {
                Err(why) => failed(why),
                Ok(checked) => {
                    let mut out = decide::verdict(name, Ok(Ok(m.warnings)), FailurePolicy::Fail).to_json();
                    let patch = match checked {
                        Checked::Unchanged => json!([]),
                        Checked::Patch(patch, _) => serde_json::to_value(patch).unwrap_or_default(),
                    };
                    out["patch"] = patch;
                    out["object"] = mutated;
                    (out, true)
                }
            }
        }
    }
}

/// The cache, call and request of one admission call about `object`, in namespace `ns`.
#[allow(clippy::too_many_arguments)]
fn prepare(
    p: &LoadedPlugin,
    object: &Value,
    old: Option<Value>,
    observed: Vec<Value>,
    schemas: &Schemas,
    ns: Option<String>,
    now: Option<SystemTime>,
    user: &str,
) -> (PrimaryScope, CallSpec, AdmissionRequest) {
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
        user: user.into(),
        dry_run: false,
        subresource: None,
    };
    (view, spec, req)
}
