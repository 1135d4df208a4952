//! The write gate: a layer of the Kubernetes client every controller, applier and event sink
//! uses. A request that writes (POST, PUT, PATCH, DELETE) is refused, before it leaves the
//! process, unless this replica surely leads ([`Leadership::may_write`]). Checking at the client
//! rather than in each writer covers every write — applies, status, deletes, events — and checks
//! as late as possible, right before the request goes out. The election itself uses a client
//! without the gate.

use super::Leadership;
use futures::future::BoxFuture;
use http::{Method, Request};
use prometheus_client::metrics::counter::Counter;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::{BoxError, Layer, Service};

/// The error a refused write fails with (inside `kube::Error::Service`).
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
#[error("not writing: this replica is not (or no longer surely) the leader, or the holder of its shard")]
pub struct NotLeader;

impl NotLeader {
    /// Whether a client error is a refused write.
    pub fn is(e: &kube::Error) -> bool {
        matches!(e, kube::Error::Service(s) if s.downcast_ref::<NotLeader>().is_some())
    }
}

/// Who says whether this replica may write now.
pub trait Authority: Send + Sync {
    /// True while writes may go out.
    fn may_write(&self) -> bool;
}

impl Authority for Leadership {
    fn may_write(&self) -> bool {
        Leadership::may_write(self)
    }
}

/// The layer.
#[derive(Clone)]
pub struct WriteGate {
    authority: Arc<dyn Authority>,
    refused: Counter,
}

impl WriteGate {
    /// Gates writes on `authority` (the leader's lease, or a shard's), counting refusals in
    /// `refused`.
    pub fn new(authority: Arc<dyn Authority>, refused: Counter) -> Self {
        WriteGate { authority, refused }
    }
}

impl<S> Layer<S> for WriteGate {
    type Service = Gated<S>;
    fn layer(&self, inner: S) -> Gated<S> {
        Gated { inner, gate: self.clone() }
    }
}

/// The gated service.
#[derive(Clone)]
pub struct Gated<S> {
    inner: S,
    gate: WriteGate,
}

fn writes(m: &Method) -> bool {
    matches!(*m, Method::POST | Method::PUT | Method::PATCH | Method::DELETE)
}

impl<S, B> Service<Request<B>> for Gated<S>
where
    S: Service<Request<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if writes(req.method()) && !self.gate.authority.may_write() {
            self.gate.refused.inc();
            return Box::pin(async { Err(Box::new(NotLeader) as BoxError) });
        }
        let f = self.inner.call(req);
        Box::pin(async move { f.await.map_err(Into::into) })
    }
}
