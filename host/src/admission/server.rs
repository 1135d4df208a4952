//! The webhook endpoint: `POST /validate/<plugin>` over HTTPS, an `admission.k8s.io/v1`
//! AdmissionReview in, one out. TLS handshakes run off the accept loop (a slow client delays
//! nobody), with the certificate [`super::certs`] keeps current.

use super::certs::Resolver;
use super::decide::{self, Verdict};
use super::Registry;
use crate::watch::view::RecordingCache;
use crate::plugin::{AdmissionRequest, CacheView, CallSpec, Operation};
use crate::telemetry::Metrics;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use kube::core::admission::{self, AdmissionResponse, AdmissionReview};
use kube::core::DynamicObject;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// How long a client has for its TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// Largest AdmissionReview read (the API server sends at most ~3 MiB: object and old object).
const MAX_BODY: usize = 8 << 20;

#[derive(Clone)]
struct AppState {
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
}

/// The webhook's routes.
pub fn router(registry: Arc<Registry>, metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/validate/{plugin}", post(validate))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(AppState { registry, metrics })
}

/// Serves the webhook on `addr` until `shutdown`, with certificates from `resolver`.
pub async fn serve(
    addr: SocketAddr,
    router: Router,
    resolver: Arc<Resolver>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let tcp = TcpListener::bind(addr).await.map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let listener = TlsListener::start(tcp, TlsAcceptor::from(Arc::new(tls)), addr);
    tracing::info!(%addr, "serving admission webhooks (https, /validate/<plugin>)");
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await?;
    Ok(())
}

/// Accepted TLS connections, handshaken in their own tasks.
struct TlsListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
}

impl TlsListener {
    fn start(tcp: TcpListener, acceptor: TlsAcceptor, addr: SocketAddr) -> Self {
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::debug!("webhook accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if tx.is_closed() {
                    return;
                }
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, "webhook TLS handshake failed: {e}"),
                        Err(_) => tracing::debug!(%peer, "webhook TLS handshake timed out"),
                    }
                });
            }
        });
        TlsListener { rx, addr }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            // The accept loop never ends while this listener exists.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}

fn respond(resp: AdmissionResponse) -> Response {
    Json(resp.into_review()).into_response()
}

async fn validate(State(s): State<AppState>, Path(name): Path<String>, body: Bytes) -> Response {
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            let msg = format!("not an AdmissionReview: {e}");
            return (StatusCode::BAD_REQUEST, Json(AdmissionResponse::invalid(msg).into_review())).into_response();
        }
    };
    let req: admission::AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(r) => r,
        Err(e) => {
            let msg = format!("an AdmissionReview without a request: {e}");
            return (StatusCode::BAD_REQUEST, Json(AdmissionResponse::invalid(msg).into_review())).into_response();
        }
    };
    let started = Instant::now();
    let (verdict, policy_label) = decide_request(&s.registry, &name, &req).await;
    let m = &s.metrics;
    m.admission.get_or_create(&Metrics::result_labels(&name, verdict.label())).inc();
    m.admission_seconds.get_or_create(&Metrics::plugin(&name)).observe(started.elapsed().as_secs_f64());
    let object = format!("{}/{}", req.namespace.as_deref().unwrap_or(""), req.name);
    match verdict.label() {
        "denied" => tracing::info!(plugin = %name, %object, "admission denied: {}", verdict.message()),
        "error" | "error_ignored" => {
            tracing::warn!(plugin = %name, %object, policy = policy_label, "admission: {}", verdict.message())
        }
        _ => tracing::debug!(plugin = %name, %object, "admission allowed"),
    }
    let mut resp = AdmissionResponse::from(&req);
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
) -> (Verdict, &'static str) {
    let default = registry.config().failure_policy;
    let Some(v) = registry.get(name) else {
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
    // A subresource (status, scale) is not the object's spec: not this webhook's business.
    if req.sub_resource.is_some() {
        return (Verdict::allow(), policy.as_str());
    }
    let Some(object) = &req.object else {
        return (Verdict::allow(), policy.as_str());
    };
    // An object being deleted is going away: its finalizers must be able to come off.
    if object.metadata.deletion_timestamp.is_some() {
        return (Verdict::allow(), policy.as_str());
    }
    let ns = req.namespace.clone().filter(|n| !n.is_empty());
    if !v.plugin.grants.namespaces.acts_on(ns.as_deref()) {
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
        object: text(object),
        old_object: req.old_object.as_ref().map(text),
        user: req.user_info.username.clone().unwrap_or_default(),
        dry_run: req.dry_run,
    };
    let spec = CallSpec {
        object: format!("{}/{}", ns.as_deref().unwrap_or(""), req.name),
        uid: object.metadata.uid.clone().unwrap_or_default(),
        resource_version: object.metadata.resource_version.clone().unwrap_or_default(),
        started_at: SystemTime::now(),
        clock_read: None,
    };
    let view = Arc::new(RecordingCache::new(v.caches.clone(), ns, v.plugin.grants.clone()));
    let deadline = Some(registry.config().call_deadline());
    let r = v.plugin.validate(request, spec, view as Arc<dyn CacheView>, deadline).await;
    (decide::verdict(name, r, policy), policy.as_str())
}
