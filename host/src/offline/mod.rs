//! The offline engine under `kwop plugin reconcile | validate | test | replay`: one reconcile, or
//! one admission request (or conversion round trip), run as the host would run it but against a static cache built from
//! files — namespaces filled in as on a cluster, the owned objects found as the host finds them,
//! the write fence and the API server's schemas applied — and the files themselves (objects,
//! CRDs, fixture folders).
//!
//! Floor 14 of 0–15 (`docs/ARCHITECTURE.md`). May use: `admission`, `outcome`, `plugin`, `schema`,
//! `vocab`. Used by: `cli`.

mod convert;
mod files;
mod validate;

pub use convert::{convert_offline, round_trips};
pub use files::{collect, load_crds, read_objects};
pub use validate::{mutate_offline, validate_offline};

use crate::outcome::{self, FenceContext, OutcomeLimits};
use crate::plugin::{LoadedPlugin, PrimaryScope, Request, StaticCache};
use crate::schema::Schemas;
use crate::vocab::{tracking, Gvk};
use serde_json::{json, Value};
use std::sync::Arc;

fn meta_str<'a>(v: &'a Value, f: &str) -> Option<&'a str> {
    v.get("metadata")?.get(f)?.as_str().filter(|s| !s.is_empty())
}

/// What an offline reconcile checks besides running the plugin.
pub struct Checks<'a> {
    /// Apply the host's write fence.
    pub fence: bool,
    /// Check objects and status against these schemas (and built-in kinds' types).
    pub schemas: &'a Schemas,
}

/// Whether a kind is namespaced, offline: a CRD says, else the well-known cluster-scoped kinds
/// are not and everything else is.
pub fn namespaced(schemas: &Schemas, g: &Gvk) -> bool {
    schemas.namespaced(g).unwrap_or_else(|| !outcome::fence::well_known_cluster_scoped(g))
}

fn kind_of(o: &Value) -> Gvk {
    Gvk::from_api_version(
        o.get("apiVersion").and_then(Value::as_str).unwrap_or_default(),
        o.get("kind").and_then(Value::as_str).unwrap_or_default(),
    )
}

/// Fills in namespaces as they would be on a cluster: a namespaced primary without one is in
/// `default` (as kubectl does), and observed objects without one are in the primary's.
pub fn place_in_namespaces(primary: &mut Value, observed: &mut [Value], schemas: &Schemas) -> Option<String> {
    let set_ns = |o: &mut Value, ns: &str| {
        if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("namespace".into(), ns.into());
        }
    };
    let ns = match meta_str(primary, "namespace") {
        Some(ns) => Some(ns.to_string()),
        None if namespaced(schemas, &kind_of(primary)) => {
            set_ns(primary, "default");
            Some("default".to_string())
        }
        None => None,
    };
    if let Some(ns) = &ns {
        for o in observed.iter_mut() {
            if meta_str(o, "namespace").is_none() && namespaced(schemas, &kind_of(o)) {
                set_ns(o, ns);
            }
        }
    }
    ns
}

/// One reconcile (or, for a primary being deleted, `finalize`) with a static cache, the plugin's
/// clock at `started_at` (a fixture's or a recording's; now when `None`); returns the JSON to
/// print and whether it succeeded.
pub fn reconcile_offline_at(
    p: &LoadedPlugin,
    mut primary: Value,
    mut observed: Vec<Value>,
    checks: &Checks<'_>,
    started_at: Option<std::time::SystemTime>,
) -> (Value, bool) {
    let ns = place_in_namespaces(&mut primary, &mut observed, checks.schemas);
    let mut cache = StaticCache::default();
    for g in p.info.readable() {
        cache.set_namespaced(g.clone(), namespaced(checks.schemas, g));
    }
    for o in observed {
        cache.insert(o);
    }
    let uid = meta_str(&primary, "uid").unwrap_or_default().to_string();
    // As the host: by controller reference (in the primary's namespace when it has one), and for
    // kinds owned across namespaces by the tracking labels, anywhere; each kind sorted.
    let owned = p
        .info
        .owns
        .iter()
        .flat_map(|g| {
            let mut of_kind: Vec<&Value> = cache
                .all(g)
                .filter(|o| {
                    let by_reference = tracking::controller_uid(o) == Some(uid.as_str())
                        && (ns.is_none() || meta_str(o, "namespace") == ns.as_deref());
                    !uid.is_empty()
                        && (by_reference || (p.info.owns_across(g) && tracking::belongs(o, &uid, &p.info.name)))
                })
                .collect();
            of_kind.sort_by_key(|o| (meta_str(o, "namespace"), meta_str(o, "name")));
            of_kind
        })
        .map(Value::to_string)
        .collect();
    let object = format!("{}/{}", ns.as_deref().unwrap_or(""), meta_str(&primary, "name").unwrap_or(""));
    let deleting = primary.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
    let finalizing = deleting
        && p.info.finalizes
        && primary
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|l| l.iter().any(|f| f.as_str() == Some(&p.info.finalizer())));
    if deleting && !finalizing {
        let why = format!(
            "the primary is being deleted and {} is not finalizing it (it needs finalizes and the finalizer {} on the primary): the host calls nothing",
            p.info.name,
            p.info.finalizer()
        );
        return (json!({ "skipped": why }), true);
    }
    let req = Request { primary: primary.to_string(), owned };
    let cache = Arc::new(cache);
    let view = PrimaryScope::new(cache.clone(), ns.clone());
    let limits = OutcomeLimits::default();
    let error = |message: String, retry: bool| {
        (json!({ "error": { "message": message, "retry": retry, "events": [] } }), false)
    };
    let mut spec = crate::plugin::CallSpec::new(object, &req.primary);
    if let Some(at) = started_at {
        spec.started_at = at;
    }
    let fence_ok = |o: &outcome::Outcome| -> Result<(), outcome::Rejection> {
        if !checks.fence {
            return Ok(());
        }
        let is_namespaced = |g: &Gvk| namespaced(checks.schemas, g);
        let observed = |g: &Gvk, ns: Option<&str>, n: &str| {
            cache.all(g).find(|o| meta_str(o, "name") == Some(n) && meta_str(o, "namespace") == ns).cloned()
        };
        let ctx = FenceContext {
            info: &p.info,
            primary_namespace: ns.as_deref(),
            primary_uid: &uid,
            granted: &p.grants.namespaces,
            namespaced: &is_namespaced,
            observed: &observed,
        };
        outcome::fence(o, &ctx).map(|_| ())
    };
    if finalizing {
        return match p.finalize_with(&req, spec, Arc::new(view)) {
            Err(e) => error(e.to_string(), true),
            Ok(Err(f)) => (outcome::decode_failure(f, &limits).to_json(), false),
            Ok(Ok(raw)) => match outcome::decode_finalize(raw, &limits) {
                Err(r) => error(format!("outcome rejected by the host: {r}"), false),
                Ok(o) => match fence_ok(&o.as_outcome()) {
                    Err(r) => error(format!("outcome rejected by the host: {r}"), false),
                    Ok(()) => (o.to_json(), true),
                },
            },
        };
    }
    match p.reconcile_with(&req, spec, Arc::new(view)) {
        Err(e) => error(e.to_string(), true),
        Ok(Err(f)) => (outcome::decode_failure(f, &limits).to_json(), false),
        Ok(Ok(raw)) => match outcome::decode(raw, &limits) {
            Err(r) => error(format!("outcome rejected by the host: {r}"), false),
            Ok(o) => {
                if let Err(r) = fence_ok(&o) {
                    return error(format!("outcome rejected by the host: {r}"), false);
                }
                let refused = schema_violations(&o, &p.info.primary, checks.schemas);
                if !refused.is_empty() {
                    return error(format!("the API server would refuse this outcome: {}", refused.join("; ")), false);
                }
                (o.to_json(), true)
            }
        },
    }
}

/// Every schema violation of an outcome, each naming the object (or status) and the field path.
fn schema_violations(o: &outcome::Outcome, primary: &Gvk, schemas: &Schemas) -> Vec<String> {
    let mut out = Vec::new();
    for intent in &o.apply {
        for v in schemas.check_object(&intent.body) {
            out.push(format!("{} {:?}: {v}", intent.gvk.kind, intent.name));
        }
    }
    if let Some(status) = &o.status {
        for v in schemas.check_status(primary, status) {
            out.push(format!("status of the {}: {v}", primary.kind));
        }
    }
    out
}
