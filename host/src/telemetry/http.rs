//! `/metrics`, `/healthz`, `/readyz`, `/plugins` and `/explain` (the flight recorder).

use super::flight::{FlightRecorder, Obj};
use super::{Health, Metrics};
use axum::extract::Query;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use std::net::SocketAddr;
use std::sync::Arc;

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    flight: Arc<FlightRecorder>,
}

/// The router serving every endpoint (metrics and probes can share a port or not).
pub fn router(metrics: Arc<Metrics>, health: Arc<Health>, flight: Arc<FlightRecorder>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(livez))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/plugins", get(plugins))
        .route("/explain", get(explain))
        .with_state(AppState { metrics, health, flight })
}

async fn metrics_handler(State(s): State<AppState>) -> impl IntoResponse {
    s.metrics.refresh_calls(&s.health);
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], s.metrics.encode())
}

/// `ok`, or 503 with the reason (a call stuck past its deadline and grace, a silent supervisor).
async fn livez(State(s): State<AppState>) -> impl IntoResponse {
    match s.health.live() {
        Ok(()) => (StatusCode::OK, "ok".to_string()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

async fn readyz(State(s): State<AppState>) -> impl IntoResponse {
    let code = if s.health.ready() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (code, axum::Json(s.health.snapshot_json()))
}

async fn plugins(State(s): State<AppState>) -> impl IntoResponse {
    axum::Json(s.health.snapshot_json())
}

/// `/explain?kind=Foo&namespace=ns&name=x`: what the flight recorder kept about one object, as
/// JSON (`telemetry::flight::Explanation`); `kwop explain` puts it in words.
async fn explain(State(s): State<AppState>, Query(mut q): Query<Obj>) -> impl IntoResponse {
    q.namespace = q.namespace.filter(|n| !n.is_empty());
    axum::Json(s.flight.explain(&q))
}

/// Binds and serves until `shutdown` resolves.
pub async fn serve(
    addr: SocketAddr,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let listener =
        tokio::net::TcpListener::bind(addr).await.map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    tracing::info!(%addr, "serving /metrics /healthz /readyz /plugins /explain");
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await?;
    Ok(())
}
