//! The webhook endpoint: `POST /validate/<plugin>` over HTTPS, an `admission.k8s.io/v1`
//! AdmissionReview in, one out. TLS handshakes run off the accept loop (a slow client delays
//! nobody), with the certificate [`super::certs`] keeps current.
//!
//! Callers are authenticated when the host is given a client CA (`--webhook-client-ca`): a
//! connection without a certificate chaining to it is refused in the TLS handshake, before a byte
//! of a request is read. Without one the port answers whoever reaches it (keep it reachable from
//! the API server only, e.g. with a NetworkPolicy). Either way what one caller can cost is bounded: [`MAX_CONNECTIONS`] connections (more
//! wait in the listen backlog), [`MAX_IN_FLIGHT`] requests read and decided at once, bodies of at
//! most [`MAX_BODY`], and a whole request — waiting for a slot, an instance, the memory budget —
//! within the webhook's timeout. A path naming no validating plugin is counted under one metric
//! label, [`UNKNOWN`]. The namespace a request names is where `validate`'s reads answer (as
//! for the object's reconcile): a caller other than the API server could choose it, unless callers are authenticated.

use super::certs::Resolver;
use super::decide::{self, Verdict};
use super::Registry;
use crate::plugin::{AdmissionRequest, CacheView, CallSpec, Operation};
use crate::telemetry::Metrics;
use crate::watch::view::RecordingCache;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use kube::core::admission::{self, AdmissionResponse, AdmissionReview};
use kube::core::DynamicObject;
use rustls::pki_types::CertificateDer;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// How long a client has for its TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// Largest AdmissionReview read: an object and its old version, each at most etcd's 1.5 MiB.
pub const MAX_BODY: usize = 4 << 20;
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 128;
/// Requests read, parsed and decided at once; more wait (within the webhook's timeout).
pub const MAX_IN_FLIGHT: usize = 16;
/// The metric label of requests for a plugin that does not validate here.
pub const UNKNOWN: &str = "(unknown)";

#[derive(Clone)]
struct AppState {
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
    in_flight: Arc<Semaphore>,
}

/// The webhook's routes.
pub fn router(registry: Arc<Registry>, metrics: Arc<Metrics>) -> Router {
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    Router::new().route("/validate/{plugin}", post(validate)).with_state(AppState { registry, metrics, in_flight })
}

/// Serves the webhook on `addr` until `shutdown`, with certificates from `resolver`.
pub async fn serve(
    addr: SocketAddr,
    router: Router,
    resolver: Arc<Resolver>,
    client_ca: Option<Vec<CertificateDer<'static>>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let tcp = TcpListener::bind(addr).await.map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder =
        rustls::ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions()?;
    let authenticated = client_ca.is_some();
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(cas) => builder.with_client_cert_verifier(client_verifier(cas, provider)?),
    };
    let mut tls = builder.with_cert_resolver(resolver);
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let listener = TlsListener::start(tcp, TlsAcceptor::from(Arc::new(tls)), addr);
    tracing::info!(%addr, authenticated, "serving admission webhooks (https, /validate/<plugin>)");
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await?;
    Ok(())
}

/// Accepts a client certificate only if it chains to one of `cas` (and is valid for client
/// authentication, by its extended key usage if it has one).
pub fn client_verifier(
    cas: Vec<CertificateDer<'static>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> anyhow::Result<Arc<dyn rustls::server::danger::ClientCertVerifier>> {
    let mut roots = rustls::RootCertStore::empty();
    for (i, ca) in cas.into_iter().enumerate() {
        roots.add(ca).map_err(|e| anyhow::anyhow!("client CA certificate {}: {e}", i + 1))?;
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| anyhow::anyhow!("client CA: {e}"))
}

/// A connection holding one of the [`MAX_CONNECTIONS`] permits while it is open.
struct Limited {
    io: TlsStream<TcpStream>,
    _permit: OwnedSemaphorePermit,
}

impl tokio::io::AsyncRead for Limited {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Limited {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Accepted TLS connections, handshaken in their own tasks.
struct TlsListener {
    rx: mpsc::Receiver<(Limited, SocketAddr)>,
    addr: SocketAddr,
}

impl TlsListener {
    fn start(tcp: TcpListener, acceptor: TlsAcceptor, addr: SocketAddr) -> Self {
        let (tx, rx) = mpsc::channel(64);
        let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        tokio::spawn(async move {
            loop {
                // At the limit, new connections wait in the listen backlog.
                let Ok(permit) = connections.clone().acquire_owned().await else { return };
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
                        Ok(Ok(io)) => {
                            let _ = tx.send((Limited { io, _permit: permit }, peer)).await;
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
    type Io = Limited;
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

async fn validate(State(s): State<AppState>, Path(name): Path<String>, request: Request) -> Response {
    let started = Instant::now();
    let timeout = s.registry.config().timeout;
    // The path is the caller's: a metric label only once it names a plugin that validates here.
    let label = if s.registry.get(&name).is_some() { name.as_str() } else { UNKNOWN };
    let Ok(Ok(_slot)) = tokio::time::timeout(timeout, s.in_flight.clone().acquire_owned()).await else {
        s.metrics.admission.get_or_create(&Metrics::result_labels(label, "busy")).inc();
        return (StatusCode::SERVICE_UNAVAILABLE, "the webhook is busy").into_response();
    };
    let body = match axum::body::to_bytes(request.into_body(), MAX_BODY).await {
        Ok(b) => b,
        Err(e) => {
            return (StatusCode::PAYLOAD_TOO_LARGE, format!("body not read (at most {MAX_BODY} bytes): {e}"))
                .into_response()
        }
    };
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
    let deadline = tokio::time::Instant::from_std(started) + s.registry.config().call_deadline();
    // One trace per admission call (when traces are exported): the plugin's call nests in it.
    let span = tracing::info_span!("admission", plugin = %name, kind = %req.kind.kind, operation = ?req.operation,
        object = %format!("{}/{}", req.namespace.as_deref().unwrap_or(""), req.name),
        subresource = req.sub_resource.as_deref().unwrap_or(""), result = tracing::field::Empty);
    let (verdict, policy_label) =
        tracing::Instrument::instrument(decide_request(&s.registry, &name, &req, deadline), span.clone()).await;
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
    deadline: tokio::time::Instant,
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
    let spec = CallSpec {
        object: format!("{}/{}", ns.as_deref().unwrap_or(""), req.name),
        uid: object.metadata.uid.clone().unwrap_or_default(),
        resource_version: object.metadata.resource_version.clone().unwrap_or_default(),
        started_at: SystemTime::now(),
        clock_read: None,
    };
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
