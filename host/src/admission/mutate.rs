//! `POST /mutate/<plugin>`: an AdmissionReview answered by the plugin's `mutate` (0.3) — the
//! object as the plugin wants it stored becomes a JSONPatch, after [`super::mutation::check`] made
//! sure it changes only what the plugin declared. A plugin that cannot answer, or answers with a
//! mutation it may not make, is a failure: the failure policy decides (`Fail`: refused, saying
//! why; `Ignore`: stored unchanged, with a warning). Violations refuse, as from `validate`.
//!
//! Registered for CREATE and UPDATE of the primary itself (not `/status` or `/scale`: a count
//! set through `/scale` is checked by `validate`), with `reinvocationPolicy: IfNeeded` — if a
//! later mutating webhook changes the object, the API server asks again, so defaults also cover
//! what others added; a defaulting `mutate` must therefore be idempotent (set only what is unset).

use super::decide::{self, Verdict};
use super::mutation::{self, Checked};
use super::review::{respond, AppState, Received, UNKNOWN};
use super::{Registry, Validating};
use crate::plugin::{AdmissionRequest, CacheView, CallError, Operation};
use crate::telemetry::Metrics;
use crate::watch::view::RecordingCache;
use axum::extract::{Path, Request, State};
use axum::response::Response;
use kube::core::admission::{self, AdmissionResponse};
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

fn mutates(v: &Arc<Validating>) -> bool {
    v.plugin.info.mutates()
}

/// What one mutation request gets.
struct Answer {
    verdict: Verdict,
    patch: Option<json_patch::Patch>,
    /// Dotted paths the patch changes.
    paths: Vec<String>,
}

impl Answer {
    fn plain(verdict: Verdict) -> Self {
        Answer { verdict, patch: None, paths: Vec::new() }
    }

    fn label(&self) -> &'static str {
        match (self.verdict.label(), &self.patch) {
            ("allowed", Some(_)) => "mutated",
            ("allowed", None) => "unchanged",
            (l, _) => l,
        }
    }
}

pub(super) async fn handle(State(s): State<AppState>, Path(name): Path<String>, request: Request) -> Response {
    let started = Instant::now();
    let label = if s.registry.get(&name).is_some_and(|v| mutates(&v)) { name.as_str() } else { UNKNOWN };
    let busy = || {
        s.metrics.mutation.get_or_create(&Metrics::result_labels(label, "busy")).inc();
    };
    let r = match super::review::receive(&s, request, busy).await {
        Ok(r) => r,
        Err(response) => return response,
    };
    let req = &r.req;
    let deadline = tokio::time::Instant::from_std(started) + s.registry.config().call_deadline();
    let object = format!("{}/{}", req.namespace.as_deref().unwrap_or(""), req.name);
    let span = tracing::info_span!("admission", webhook = "mutate", plugin = %name, kind = %req.kind.kind,
        operation = ?req.operation, object = %object, result = tracing::field::Empty);
    let answer = tracing::Instrument::instrument(decide_request(&s.registry, &name, &r, deadline), span.clone()).await;
    span.record("result", answer.label());
    let m = &s.metrics;
    m.mutation.get_or_create(&Metrics::result_labels(label, answer.label())).inc();
    m.mutation_seconds.get_or_create(&Metrics::plugin(label)).observe(started.elapsed().as_secs_f64());
    let v = &answer.verdict;
    match answer.label() {
        "denied" => tracing::info!(plugin = %name, %object, "mutation denied: {}", v.message()),
        "error" | "error_ignored" => tracing::warn!(plugin = %name, %object, "mutation: {}", v.message()),
        "mutated" => tracing::debug!(plugin = %name, %object, paths = ?answer.paths, "mutated"),
        _ => tracing::debug!(plugin = %name, %object, "unchanged"),
    }
    let mut resp = AdmissionResponse::from(req);
    if !v.warnings.is_empty() {
        resp.warnings = Some(v.warnings.clone());
    }
    if !v.allowed {
        return respond(resp.deny(v.message()));
    }
    if let Some(patch) = answer.patch {
        resp = match resp.with_patch(patch) {
            Ok(r) => r,
            Err(e) => AdmissionResponse::from(req).deny(format!("{name}'s mutation could not be encoded: {e}")),
        };
    }
    respond(resp)
}

/// The answer to one request.
async fn decide_request(registry: &Registry, name: &str, r: &Received, deadline: tokio::time::Instant) -> Answer {
    let default = registry.config().failure_policy;
    let Some(v) = registry.get(name) else {
        // Listed in the webhook configuration but not (or no longer) loaded here.
        let error = format!("plugin {name} is not loaded on this host");
        return Answer::plain(decide::failure(error, default));
    };
    // A version that no longer mutates (a hot swap, before the configuration catches up): the
    // object goes on as it is, as it will once its webhook is gone.
    if !mutates(&v) {
        return Answer::plain(Verdict::allow());
    }
    let policy = v.failure_policy;
    let req = &r.req;
    let operation = match req.operation {
        admission::Operation::Create => Operation::Create,
        admission::Operation::Update => Operation::Update,
        _ => return Answer::plain(Verdict::allow()),
    };
    let (Some(object), Some(raw), None) = (&req.object, &r.raw_object, &req.sub_resource) else {
        return Answer::plain(Verdict::allow());
    };
    // An object being deleted is going away: its finalizers must be able to come off.
    if object.metadata.deletion_timestamp.is_some() {
        return Answer::plain(Verdict::allow());
    }
    let ns = req.namespace.clone().filter(|n| !n.is_empty());
    if !v.plugin.grants.namespaces.acts_on(ns.as_deref()) {
        return Answer::plain(Verdict::allow());
    }
    // What the plugin sees, and what its answer is compared with: the object as sent, with its
    // namespace (a CREATE may leave it to the request's).
    let mut sent = raw.clone();
    if let (Some(ns), Some(meta)) = (&ns, sent.get_mut("metadata").and_then(Value::as_object_mut)) {
        meta.entry("namespace").or_insert_with(|| Value::from(ns.as_str()));
    }
    let old = req.old_object.as_ref().and_then(|o| serde_json::to_string(o).ok());
    let request = AdmissionRequest {
        operation,
        object: sent.to_string(),
        old_object: old,
        user: req.user_info.username.clone().unwrap_or_default(),
        dry_run: req.dry_run,
        subresource: None,
    };
    let spec = super::review::call_spec(ns.as_deref(), &req.name, object);
    let view = Arc::new(RecordingCache::new(v.caches.clone(), ns, v.plugin.grants.clone()));
    let call = v.plugin.mutate(request, spec, view as Arc<dyn CacheView>, Some(registry.config().call_deadline()));
    let call = tracing::Instrument::instrument(
        call,
        tracing::debug_span!("plugin.call", export = "mutate", world = %v.plugin.world(), digest = %v.plugin.sha256,
            duration_ms = tracing::field::Empty, memory_peak_bytes = tracing::field::Empty),
    );
    let result = tokio::time::timeout_at(deadline, call)
        .await
        .unwrap_or_else(|_| Err(CallError::Instantiate("no instance free within the webhook's timeout".into())));
    let failed = |why: String| Answer::plain(decide::failure(why, policy));
    match result {
        Err(e) => failed(format!("{name} could not mutate the object: {e}")),
        Ok(Err(violations)) => Answer::plain(decide::verdict(name, Ok(Err(violations)), policy)),
        Ok(Ok(m)) => {
            let mutated: Value = match serde_json::from_str(&m.object) {
                Ok(o) => o,
                Err(e) => return failed(format!("{name}'s mutation is not JSON: {e}")),
            };
            let allowed = decide::verdict(name, Ok(Ok(m.warnings)), policy);
            match mutation::check(name, &sent, &mutated, &v.plugin.info.mutates) {
                Err(why) => failed(why),
                Ok(Checked::Unchanged) => Answer::plain(allowed),
                Ok(Checked::Patch(patch, paths)) => Answer { verdict: allowed, patch: Some(patch), paths },
            }
        }
    }
}
