//! `POST /convert/<plugin>`: an `apiextensions.k8s.io/v1` ConversionReview answered by the
//! plugin's `convert`, one call per object (each in a fresh instance, so one bad object names
//! itself), each answer checked by [`super::roundtrip::converted`]. Any failure fails the whole
//! review (`result.status: Failure`) with a message naming the object and the plugin's words;
//! the API server then fails the read or write that needed the conversion. Conversion has no
//! failure policy in Kubernetes.
//!
//! Only a plugin that declares `converts` and whose ReconcilerPlugin grants the conversion
//! answers. Bounded as `/validate`: a slot of [`super::server::MAX_IN_FLIGHT`], a body of at most
//! [`MAX_BODY`], the whole review within the webhook's timeout (each call within the plugin's own
//! timeout too); counted in `kwop_conversion_requests_total{plugin,result}` (`converted`, `failed`,
//! `busy`) and `kwop_conversion_duration_seconds`, traced as an `admission` span. After a successful answer, when one of [`ROUND_TRIPS`] permits is free (sampled: under
//! load most reviews are not checked), the objects are converted back off the response path and
//! [`super::roundtrip::check`]ed; a failure is a Warning event `ConversionNotRoundTrip` on the
//! object (as the API server has it: the original) and the counter
//! `kwop_conversion_round_trip_failures_total{plugin}` — the answer given stays what the plugin said.

use super::review::{AppState, MAX_BODY, UNKNOWN};
use super::roundtrip;
use super::{Registry, Validating};
use crate::plugin::{CallError, CallSpec, ConversionRequest};
use crate::telemetry::Metrics;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use kube::core::conversion::{ConversionResponse, ConversionReview};
use kube::core::Status;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Instant, SystemTime};
use tokio::sync::Semaphore;

/// Round trips checked at once (each a review's objects converted back); a review finding none
/// free is not checked.
pub const ROUND_TRIPS: usize = 2;
/// The event reason of a conversion that does not round-trip.
pub const REASON_NOT_ROUND_TRIP: &str = "ConversionNotRoundTrip";
/// The round trips' permits (one set per process: the host serves one webhook).
static PERMITS: std::sync::LazyLock<Arc<Semaphore>> =
    std::sync::LazyLock::new(|| Arc::new(Semaphore::new(ROUND_TRIPS)));

/// The plugin answering `/convert/<name>`, if it converts and is granted the conversion.
pub(super) fn converter(registry: &Registry, name: &str) -> Option<Arc<Validating>> {
    registry.get(name).filter(|v| v.plugin.info.converts() && v.plugin.grants.conversion)
}

pub(super) async fn handle(State(s): State<AppState>, Path(name): Path<String>, request: Request) -> Response {
    let started = Instant::now();
    let timeout = s.registry.config().timeout;
    let label = if converter(&s.registry, &name).is_some() { name.as_str() } else { UNKNOWN };
    let Ok(Ok(_slot)) = tokio::time::timeout(timeout, s.in_flight.clone().acquire_owned()).await else {
        s.metrics.conversion.get_or_create(&Metrics::result_labels(label, "busy")).inc();
        return (StatusCode::SERVICE_UNAVAILABLE, "the webhook is busy").into_response();
    };
    let invalid = |code: StatusCode, msg: String| {
        let status = Status::failure(&msg, "BadRequest").with_code(code.as_u16());
        (code, Json(ConversionResponse::invalid(status).into_review())).into_response()
    };
    let body = match axum::body::to_bytes(request.into_body(), MAX_BODY).await {
        Ok(b) => b,
        Err(e) => {
            return invalid(StatusCode::PAYLOAD_TOO_LARGE, format!("body not read (at most {MAX_BODY} bytes): {e}"))
        }
    };
    let review: ConversionReview = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return invalid(StatusCode::BAD_REQUEST, format!("not a ConversionReview: {e}")),
    };
    let req = match kube::core::conversion::ConversionRequest::try_from(review) {
        Ok(r) => r,
        Err(e) => return invalid(StatusCode::BAD_REQUEST, format!("a ConversionReview without a request: {e}")),
    };
    let deadline = tokio::time::Instant::from_std(started) + s.registry.config().call_deadline();
    let span = tracing::info_span!("admission", webhook = "convert", plugin = %name, desired = %req.desired_api_version,
        objects = req.objects.len(), result = tracing::field::Empty);
    let plugin = converter(&s.registry, &name);
    let (objects, desired) = (req.objects.clone(), req.desired_api_version.clone());
    let answer = match &plugin {
        None => Err(format!(
            "plugin {name} does not convert on this host (not loaded, not declaring converts, or its \
             ReconcilerPlugin does not grant the conversion: spec.grants.conversion)"
        )),
        Some(v) => tracing::Instrument::instrument(convert_all(v, &objects, &desired, deadline), span.clone()).await,
    };
    let result = if answer.is_ok() { "converted" } else { "failed" };
    span.record("result", result);
    s.metrics.conversion.get_or_create(&Metrics::result_labels(label, result)).inc();
    s.metrics.conversion_seconds.get_or_create(&Metrics::plugin(label)).observe(started.elapsed().as_secs_f64());
    let resp = ConversionResponse::for_request(req);
    let resp = match answer {
        Ok(converted) => {
            tracing::debug!(plugin = %name, %desired, objects = converted.len(), "conversion answered");
            if let (Some(v), Ok(permit)) = (plugin, PERMITS.clone().try_acquire_owned()) {
                let (client, metrics) = (s.registry.client.clone(), s.metrics.clone());
                let pairs: Vec<(Value, Value)> = objects.into_iter().zip(converted.iter().cloned()).collect();
                tokio::spawn(async move {
                    let _permit = permit;
                    sample(&v, pairs, &client, &metrics).await;
                });
            }
            resp.success(converted)
        }
        Err(message) => {
            tracing::warn!(plugin = %name, %desired, "conversion refused: {message}");
            resp.failure(Status::failure(&message, "ConversionFailed"))
        }
    };
    Json(resp.into_review()).into_response()
}

/// `namespace/name` of an object (`name` when cluster-scoped).
fn object_name(o: &Value) -> String {
    let m = |f: &str| o.pointer(&format!("/metadata/{f}")).and_then(Value::as_str).unwrap_or_default().to_string();
    match m("namespace") {
        ns if ns.is_empty() => m("name"),
        ns => format!("{ns}/{}", m("name")),
    }
}

/// One object converted to `desired` by the plugin and checked, or the sentence saying why not.
pub(super) async fn convert_one(
    v: &Validating,
    object: &Value,
    desired: &str,
    deadline: tokio::time::Instant,
) -> Result<Value, String> {
    let name = &v.plugin.info.name;
    let fail = |why: String| format!("{name} cannot convert {} to {desired}: {why}", object_name(object));
    let spec = CallSpec::new(object_name(object), &object.to_string());
    let spec = CallSpec { started_at: SystemTime::now(), ..spec };
    let req = ConversionRequest { object: object.to_string(), desired_api_version: desired.to_string() };
    // Each call within the plugin's own timeout and never past the review's budget.
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    let call = tracing::Instrument::instrument(
        v.plugin.convert(req, spec, Some(left)),
        tracing::debug_span!("plugin.call", export = "convert", world = %v.plugin.world(), digest = %v.plugin.sha256,
            duration_ms = tracing::field::Empty, memory_peak_bytes = tracing::field::Empty),
    );
    let r = tokio::time::timeout_at(deadline, call)
        .await
        .unwrap_or_else(|_| Err(CallError::Instantiate("no instance free within the webhook's timeout".into())));
    match r {
        Ok(Ok(text)) => roundtrip::converted(object, &text, desired).map_err(fail),
        Ok(Err(plugin_says)) => Err(fail(plugin_says)),
        Err(e) => Err(fail(e.to_string())),
    }
}

/// Every object of a review converted, in order; the first failure fails the review.
async fn convert_all(
    v: &Validating,
    objects: &[Value],
    desired: &str,
    deadline: tokio::time::Instant,
) -> Result<Vec<Value>, String> {
    let mut out = Vec::with_capacity(objects.len());
    for o in objects {
        out.push(convert_one(v, o, desired, deadline).await?);
    }
    Ok(out)
}

/// Converts each `(original, converted)` back and checks the round trip; reports failures.
async fn sample(v: &Validating, pairs: Vec<(Value, Value)>, client: &kube::Client, metrics: &Metrics) {
    let name = v.plugin.info.name.clone();
    for (original, converted) in pairs {
        let from = original.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
        if converted.get("apiVersion").and_then(Value::as_str) == Some(from.as_str()) {
            continue;
        }
        let deadline = tokio::time::Instant::now() + v.plugin.limits.deadline;
        let verdict = match convert_one(v, &converted, &from, deadline).await {
            Ok(back) => roundtrip::check(&original, &converted, &back),
            Err(e) => Err(format!("converting it back failed: {e}")),
        };
        let Err(why) = verdict else { continue };
        let msg = format!("{name}'s conversion of {} does not round-trip: {why}", object_name(&original));
        tracing::warn!(plugin = %name, "{msg}");
        metrics.conversion_round_trip_failures.get_or_create(&Metrics::plugin(&name)).inc();
        warn_on(client, &original, &msg).await;
    }
}

/// A Warning event about `object` (as the API server stores it), as `kwop`.
async fn warn_on(client: &kube::Client, object: &Value, note: &str) {
    use kube::runtime::events::{Event, EventType, Recorder};
    let m = |f: &str| object.pointer(&format!("/metadata/{f}")).and_then(Value::as_str).map(str::to_string);
    let reference = k8s_openapi::api::core::v1::ObjectReference {
        api_version: object.get("apiVersion").and_then(Value::as_str).map(str::to_string),
        kind: object.get("kind").and_then(Value::as_str).map(str::to_string),
        namespace: m("namespace"),
        name: m("name"),
        uid: m("uid"),
        ..Default::default()
    };
    let note: String = note.chars().take(1000).collect();
    let ev = Event {
        type_: EventType::Warning,
        reason: REASON_NOT_ROUND_TRIP.into(),
        note: Some(note),
        action: "Convert".into(),
        secondary: None,
    };
    if let Err(e) = Recorder::new(client.clone(), "kwop".into()).publish(&ev, &reference).await {
        tracing::debug!(reason = REASON_NOT_ROUND_TRIP, "event not recorded: {e}");
    }
}
