//! `POST /validate/<plugin>`: an AdmissionReview answered by the plugin's `validate` — allowed
//! with warnings, refused with its violations, or, when it cannot answer, what the failure policy
//! says. Requests through a subresource (`status`, `scale`) are not the object's spec and are
//! allowed.

use super::decide::{self, Verdict};
use super::review::{respond, AppState, UNKNOWN};
use super::Registry;
use crate::plugin::{AdmissionRequest, CacheView, Operation};
use crate::telemetry::Metrics;
use crate::watch::view::RecordingCache;
use axum::extract::{Path, Request, State};
use axum::response::Response;
use kube::core::admission::{self, AdmissionResponse};
use kube::core::DynamicObject;
use std::sync::Arc;
use std::time::Instant;

pub(super) async fn handle(State(s): State<AppState>, Path(name): Path<String>, request: Request) -> Response {
    let started = Instant::now();
    // The path is the caller's: a metric label only once it names a plugin that validates here.
    let label = if s.registry.get(&name).is_some_and(|v| v.plugin.info.validates) { name.as_str() } else { UNKNOWN };
    let busy = || {
        s.metrics.admission.get_or_create(&Metrics::result_labels(label, "busy")).inc();
    };
    let received = match super::review::receive(&s, request, busy).await {
        Ok(r) => r,
        Err(response) => return response,
    };
    let req = &received.req;
    let deadline = tokio::time::Instant::from_std(started) + s.registry.config().call_deadline();
    // One trace per admission call (when traces are exported): the plugin's call nests in it.
    let span = tracing::info_span!("admission", plugin = %name, kind = %req.kind.kind, operation = ?req.operation,
        object = %format!("{}/{}", req.namespace.as_deref().unwrap_or(""), req.name),
        subresource = req.sub_resource.as_deref().unwrap_or(""), result = tracing::field::Empty);
    let (verdict, policy_label) =
        tracing::Instrument::instrument(decide_request(&s.registry, &name, req, deadline), span.clone()).await;
    span.record("result", verdict.label());
    let m = &s.metrics;
    m.admission.get_or_create(&Metrics::result_labels(label, verdict.label())).inc();
    m.admission_seconds.get_or_create(&Metrics::plugin(label)).observe(started.elapsed().as_secs_f64());
    let object = format!("{}/{}", req.namespace.as_deref().unwrap_or(""), req.name);
    match verdict.label() {
        "denied" => tracing::info!(plugin = %name, %object, "admission denied: {}", verdict.message()),
        "error" | "error_ignored" => {
            tracing::warn!(plugin = %name, %object, policy = policy_label, "admission: {}", verdict.message())
        }
        _ => tracing::debug!(plugin = %name, %object, "admission allowed"),
    }
    let mut resp = AdmissionResponse::from(req);
    if !verdict.warnings.is_empty() {
        resp.warnings = Some(verdict.warnings.clone());
    }
    if !verdict.allowed {
        resp = resp.deny(verdict.message());
    }
    respond(resp)
}

/// The verdict on one request, and the failure policy it was taken under (for the log).
async fn decide_request(
    registry: &Registry,
    name: &str,
    req: &admission::AdmissionRequest<DynamicObject>,
    deadline: tokio::time::Instant,
) -> (Verdict, &'static str) {
    let default = registry.config().failure_policy;
    let Some(v) = registry.get(name).filter(|v| v.plugin.info.validates) else {
        // Listed in the webhook configuration but not (or no longer) loaded here.
        let error = format!("plugin {name} does not validate on this host (not loaded, or no longer validating)");
        return (decide::verdict(name, Err(crate::plugin::CallError::Instantiate(error)), default), default.as_str());
    };
    let policy = v.failure_policy;
    let operation = match req.operation {
        admission::Operation::Create => Operation::Create,
        admission::Operation::Update => Operation::Update,
        // The webhook is registered for CREATE and UPDATE only.
        _ => return (Verdict::allow(), policy.as_str()),
    };
    // `/scale` changes the object's replicas: the plugin sees the primary as it would be. Other
    // subresources (`status`, which the host writes itself) are not registered for (webhooks.rs).
    let scale = match req.sub_resource.as_deref() {
        None => false,
        Some("scale") => true,
        Some(_) => return (Verdict::allow(), policy.as_str()),
    };
    let Some(object) = &req.object else {
        return (Verdict::allow(), policy.as_str());
    };
    let ns = req.namespace.clone().filter(|n| !n.is_empty());
    if !v.plugin.grants.namespaces.acts_on(ns.as_deref()) {
        return (Verdict::allow(), policy.as_str());
    }
    let (object, old_object) = if scale {
        let what = format!("{name} could not validate the scale of {}/{}", ns.as_deref().unwrap_or(""), req.name);
        let composed = tokio::time::timeout_at(deadline, scaled(registry, &v, ns.as_deref(), &req.name, object)).await;
        match composed {
            Ok(Ok((object, stored))) => (object, Some(stored)),
            Ok(Err(e)) => {
                return (decide::failure(format!("{what}: {e}"), policy), policy.as_str());
            }
            Err(_) => {
                let error = format!("{what}: the stored object was not read within the webhook's timeout");
                return (decide::failure(error, policy), policy.as_str());
            }
        }
    } else {
        (object.clone(), req.old_object.clone())
    };
    // An object being deleted is going away: its finalizers must be able to come off.
    if object.metadata.deletion_timestamp.is_some() {
        return (Verdict::allow(), policy.as_str());
    }
    let text = |o: &DynamicObject| {
        let mut o = o.clone();
        if o.metadata.namespace.is_none() {
            o.metadata.namespace = ns.clone();
        }
        serde_json::to_string(&o).unwrap_or_default()
    };
    let request = AdmissionRequest {
        operation,
        object: text(&object),
        old_object: old_object.as_ref().map(text),
        user: req.user_info.username.clone().unwrap_or_default(),
        dry_run: req.dry_run,
        subresource: scale.then(|| "scale".to_string()),
    };
    let spec = super::review::call_spec(ns.as_deref(), &req.name, &object);
    let view = Arc::new(RecordingCache::new(v.caches.clone(), ns, v.plugin.grants.clone()));
    // The webhook's timeout bounds the whole request: waiting for an instance and the memory
    // budget included, not only the call.
    let call = v.plugin.validate(request, spec, view as Arc<dyn CacheView>, Some(registry.config().call_deadline()));
    let call = tracing::Instrument::instrument(
        call,
        tracing::debug_span!("plugin.call", export = "validate", world = %v.plugin.world(), digest = %v.plugin.sha256,
            duration_ms = tracing::field::Empty, memory_peak_bytes = tracing::field::Empty),
    );
    let r = tokio::time::timeout_at(deadline, call).await.unwrap_or_else(|_| {
        Err(crate::plugin::CallError::Instantiate("no instance free within the webhook's timeout".into()))
    });
    (decide::verdict(name, r, policy), policy.as_str())
}

/// A `/scale` request's primary as it would be, and as it is stored (module [`super::scale`]).
async fn scaled(
    registry: &Registry,
    v: &super::Validating,
    ns: Option<&str>,
    name: &str,
    scale: &DynamicObject,
) -> Result<(DynamicObject, DynamicObject), super::scale::ScaleError> {
    let replicas = super::scale::replicas_of(scale)?;
    let path = registry.replicas_paths().get(registry.client(), &v.primary).await?;
    let stored = super::scale::stored(registry.client(), &v.primary, ns, name).await?;
    let object = super::scale::compose(&stored, &path, replicas)?;
    Ok((object, stored))
}
