//! What every webhook route shares: the state the router hands it, reading one AdmissionReview
//! within the webhook's bounds (a slot of [`super::server::MAX_IN_FLIGHT`], a body of at most
//! [`MAX_BODY`], within the webhook's timeout), and answering one. The routes (`validate`,
//! `mutate`, `convert`) use this; the server (`server`) only routes to them.

use super::Registry;
use crate::telemetry::Metrics;
use axum::response::{IntoResponse, Response};
use axum::Json;
use kube::core::admission::AdmissionResponse;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Largest AdmissionReview read: an object and its old version, each at most etcd's 1.5 MiB.
pub const MAX_BODY: usize = 4 << 20;
/// The metric label of requests for a plugin that does not validate here.
pub const UNKNOWN: &str = "(unknown)";

/// What the router hands every route.
#[derive(Clone)]
pub(super) struct AppState {
    pub(super) registry: Arc<Registry>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) in_flight: Arc<Semaphore>,
}

pub(super) fn respond(resp: AdmissionResponse) -> Response {
    Json(resp.into_review()).into_response()
}

/// An admission request read within the webhook's bounds: the slot it holds while it is decided,
/// the parsed request, and the raw object as the API server sent it (a patch must apply to it).
pub(super) struct Received {
    pub(super) _slot: OwnedSemaphorePermit,
    pub(super) req: kube::core::admission::AdmissionRequest<kube::core::DynamicObject>,
    pub(super) raw_object: Option<serde_json::Value>,
}

/// Waits for a slot (within the webhook's timeout) and reads one AdmissionReview; on failure, the
/// response to send (busy, too large, not a review). `busy` counts a request turned away.
pub(super) async fn receive(
    s: &AppState,
    request: axum::extract::Request,
    busy: impl FnOnce(),
) -> Result<Received, Response> {
    use axum::http::StatusCode;
    use kube::core::admission::AdmissionReview;
    let timeout = s.registry.config().timeout;
    let Ok(Ok(slot)) = tokio::time::timeout(timeout, s.in_flight.clone().acquire_owned()).await else {
        busy();
        return Err((StatusCode::SERVICE_UNAVAILABLE, "the webhook is busy").into_response());
    };
    let body = axum::body::to_bytes(request.into_body(), MAX_BODY).await.map_err(|e| {
        (StatusCode::PAYLOAD_TOO_LARGE, format!("body not read (at most {MAX_BODY} bytes): {e}")).into_response()
    })?;
    let bad =
        |msg: String| (StatusCode::BAD_REQUEST, Json(AdmissionResponse::invalid(msg).into_review())).into_response();
    let review: AdmissionReview<kube::core::DynamicObject> =
        serde_json::from_slice(&body).map_err(|e| bad(format!("not an AdmissionReview: {e}")))?;
    let req: kube::core::admission::AdmissionRequest<_> =
        review.try_into().map_err(|e| bad(format!("an AdmissionReview without a request: {e}")))?;
    let raw_object = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|mut v| v.pointer_mut("/request/object").map(serde_json::Value::take))
        .filter(serde_json::Value::is_object);
    Ok(Received { _slot: slot, req, raw_object })
}

/// What a plugin call about an admitted `object` (`name` in `ns`) is about: the object for logs,
/// and its uid and resourceVersion for the call's deterministic random bytes, starting now.
pub(super) fn call_spec(ns: Option<&str>, name: &str, object: &kube::core::DynamicObject) -> crate::plugin::CallSpec {
    crate::plugin::CallSpec {
        object: format!("{}/{name}", ns.unwrap_or("")),
        uid: object.metadata.uid.clone().unwrap_or_default(),
        resource_version: object.metadata.resource_version.clone().unwrap_or_default(),
        started_at: std::time::SystemTime::now(),
        clock_read: None,
    }
}
