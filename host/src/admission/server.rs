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
use super::review::AppState;
use super::Registry;
use crate::telemetry::Metrics;
use axum::routing::post;
use axum::Router;
use rustls::pki_types::CertificateDer;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// How long a client has for its TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 128;
/// Requests read, parsed and decided at once; more wait (within the webhook's timeout).
pub const MAX_IN_FLIGHT: usize = 16;
pub use super::review::{MAX_BODY, UNKNOWN};

/// The webhook's routes.
pub fn router(registry: Arc<Registry>, metrics: Arc<Metrics>) -> Router {
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    Router::new()
        .route("/validate/{plugin}", post(super::validate::handle))
        .route("/mutate/{plugin}", post(super::mutate::handle))
        .route("/convert/{plugin}", post(super::convert::handle))
        .with_state(AppState { registry, metrics, in_flight })
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
