//! Each replica's watches carry only its slice, when the API server can (KEP-5866's
//! `shardSelector` on list and watch, behind the `ShardedListAndWatch` feature gate): a client
//! layer adds the selector of what this replica holds to every list and watch request. Only the
//! watch pool's client for sliced kinds has it (`watch::pool`): the host's other requests (plugin
//! sources, Leases, admission) never do. Whether the API server honours it is learnt once, from a list's
//! `metadata.shardInfo`; without it the same hash filters on this side (`watch::caches`), and
//! the log says which.

use super::Shard;
use http::{Method, Request, Uri};
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::{Layer, Service};

/// Whether the API server applies a shard selector: a one-item list of the host's own Leases
/// with a selector of the whole hash space comes back with `shardInfo` only if it does.
pub async fn detect(client: &kube::Client, namespace: &str) -> bool {
    let selector = "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')";
    let mut uri = format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases?limit=1&shardSelector=");
    uri.push_str(&encode(selector));
    let Ok(req) = Request::get(uri).body(Vec::new()) else { return false };
    match client.request_text(req).await {
        Ok(text) => serde_json::from_str::<serde_json::Value>(&text)
            .is_ok_and(|v| v.pointer("/metadata/shardInfo/selector").is_some()),
        Err(e) => {
            tracing::warn!("cannot ask the API server about sharded lists ({e}); filtering here");
            false
        }
    }
}

/// RFC 3986's reserved and other characters, encoded in a query value.
const QUERY_VALUE: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// Percent-encodes a query value (RFC 3986 unreserved characters stay).
fn encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, QUERY_VALUE).to_string()
}

/// The (group, plural) of a collection path: `/api/v1[/namespaces/NS]/PLURAL` or
/// `/apis/GROUP/VERSION[/namespaces/NS]/PLURAL` (no object name: a list or a watch).
fn collection(path: &str) -> Option<(String, String)> {
    let seg: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match seg.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    match rest {
        [plural] => Some((group.to_string(), plural.to_string())),
        ["namespaces", _ns, plural] => Some((group.to_string(), plural.to_string())),
        _ => None,
    }
}

/// The layer adding the selector.
#[derive(Clone)]
pub struct ShardSelector {
    shard: Arc<Shard>,
}

impl ShardSelector {
    /// Adds `shard`'s selector to every list and watch.
    pub fn new(shard: Arc<Shard>) -> Self {
        ShardSelector { shard }
    }
}

impl<S> Layer<S> for ShardSelector {
    type Service = Selecting<S>;
    fn layer(&self, inner: S) -> Selecting<S> {
        Selecting { inner, layer: self.clone() }
    }
}

/// The service of [`ShardSelector`].
#[derive(Clone)]
pub struct Selecting<S> {
    inner: S,
    layer: ShardSelector,
}

impl<S, B> Service<Request<B>> for Selecting<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        if req.method() == Method::GET {
            if let Some(sel) = self.layer.shard.selector() {
                let path = req.uri().path().to_string();
                if collection(&path).is_some() {
                    let q = req.uri().query().map(|q| format!("{q}&")).unwrap_or_default();
                    if let Ok(uri) = format!("{path}?{q}shardSelector={}", encode(&sel)).parse::<Uri>() {
                        *req.uri_mut() = uri;
                    }
                }
            }
        }
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collections_are_recognised_and_objects_are_not() {
        assert_eq!(collection("/api/v1/configmaps"), Some(("".into(), "configmaps".into())));
        assert_eq!(collection("/apis/apps/v1/namespaces/a/deployments"), Some(("apps".into(), "deployments".into())));
        assert_eq!(collection("/api/v1/namespaces"), Some(("".into(), "namespaces".into())));
        assert_eq!(collection("/apis/apps/v1/namespaces/a/deployments/web"), None);
        assert_eq!(collection("/version"), None);
        assert_eq!(encode("a b'(x)"), "a%20b%27%28x%29");
    }
}
