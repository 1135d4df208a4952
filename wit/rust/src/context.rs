//! What a reconcile can see besides its primary: the objects it owns, the host's caches
//! (read-only), and the reconcile's instant.

use crate::{cache, log, testing, Gvk, Time};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The host's caches, read-only, for the kinds the plugin declared.
///
/// In a plugin the host builds it; in native unit tests build one with [`Context::fake`] (a
/// [`testing::FakeCache`] stands in for the host's cache).
pub struct Context {
    owned: Vec<String>,
    now: Time,
    source: Source,
}

enum Source {
    Host,
    Fake { cache: testing::FakeCache, namespace: Option<String> },
}

impl Context {
    /// A context for native unit tests: reads answer from `cache`, `namespace` is the primary's
    /// (what `None` means for namespaced kinds, as in the host), and the objects the primary
    /// controls are those of `cache` whose controller owner reference has the primary's `uid`.
    /// Objects carrying the host's tracking label for `uid` (kinds owned across namespaces) are
    /// owned too, wherever they are. The reconcile's instant is [`Time::EXAMPLE`]; see
    /// [`Context::at`].
    pub fn fake(cache: testing::FakeCache, namespace: Option<&str>, uid: &str) -> Self {
        let owned = cache.belonging_to(uid, namespace);
        Context { owned, now: Time::EXAMPLE, source: Source::Fake { cache, namespace: namespace.map(str::to_string) } }
    }

    /// The same context at another instant (what [`Context::now`] says).
    pub fn at(mut self, now: Time) -> Self {
        self.now = now;
        self
    }

    pub(crate) fn host(owned: Vec<String>, now: Time) -> Self {
        Context { owned, now, source: Source::Host }
    }

    /// The reconcile's instant (`request.now`): what the wall clock reads during this call and
    /// what a condition's `lastTransitionTime` says when its status changes. If the decision
    /// depends on it, also say when to look again (`requeue_after_ms`).
    pub fn now(&self) -> Time {
        self.now
    }

    fn cache_get(&self, gvk: &Gvk, namespace: Option<&str>, name: &str) -> Option<String> {
        match &self.source {
            Source::Host => cache::get(&gvk.wit(), None, namespace, name).unwrap_or_else(|e| {
                refused(gvk, &e);
                None
            }),
            Source::Fake { cache, namespace: primary } => cache.get(gvk, namespace.or(primary.as_deref()), name),
        }
    }

    fn cache_query(&self, gvk: &Gvk, namespace: Option<&str>, selector: Option<&str>) -> Vec<String> {
        match &self.source {
            Source::Host => cache::query(&gvk.wit(), None, namespace, selector).unwrap_or_else(|e| {
                refused(gvk, &e);
                Vec::new()
            }),
            Source::Fake { cache, .. } => cache.query(gvk, namespace, selector),
        }
    }

    /// One object of a k8s-openapi type, e.g. `ctx.get::<Deployment>(Some("ns"), "name")`.
    /// `None` as the namespace means the primary's (for namespaced kinds). An object that does
    /// not parse as `K` reads as absent (and is logged).
    #[cfg(feature = "k8s-openapi")]
    pub fn get<K: k8s_openapi::Resource + DeserializeOwned>(&self, namespace: Option<&str>, name: &str) -> Option<K> {
        self.get_as(&Gvk::of::<K>(), namespace, name)
    }

    /// One object of any kind, as any deserialisable type (`serde_json::Value` for untyped).
    pub fn get_as<T: DeserializeOwned>(&self, gvk: &Gvk, namespace: Option<&str>, name: &str) -> Option<T> {
        let text = self.cache_get(gvk, namespace, name)?;
        parse(&text, gvk)
    }

    /// Objects of a kind, in a namespace (or all), matching a label selector (or all).
    pub fn query_as<T: DeserializeOwned>(&self, gvk: &Gvk, namespace: Option<&str>, selector: Option<&str>) -> Vec<T> {
        self.cache_query(gvk, namespace, selector).iter().filter_map(|t| parse(t, gvk)).collect()
    }

    /// The objects of a kind the primary controls (from the request, no cache call).
    #[cfg(feature = "k8s-openapi")]
    pub fn owned<K: k8s_openapi::Resource + DeserializeOwned>(&self) -> Vec<K> {
        self.owned
            .iter()
            .filter_map(|t| serde_json::from_str::<Value>(t).ok())
            .filter(|v| {
                v.get("kind").and_then(Value::as_str) == Some(K::KIND)
                    && v.get("apiVersion").and_then(Value::as_str) == Some(K::API_VERSION)
            })
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect()
    }

    /// Every owned object, untyped.
    pub fn owned_json(&self) -> Vec<Value> {
        self.owned.iter().filter_map(|t| serde_json::from_str(t).ok()).collect()
    }
}

/// A read the host refused: it answers nothing, and the host's reason goes to the log (where a
/// plugin's author looks when a read comes back empty).
fn refused(gvk: &Gvk, e: &cache::ReadError) {
    let why = match e {
        cache::ReadError::Forbidden(m) => format!("forbidden: {m}"),
        cache::ReadError::Unavailable(m) => format!("unavailable: {m}"),
        cache::ReadError::Invalid(m) => format!("invalid: {m}"),
    };
    log::warn(&format!("read of {}/{} answered nothing: {why}", gvk.group, gvk.kind));
}

pub(crate) fn parse<T: DeserializeOwned>(text: &str, gvk: &Gvk) -> Option<T> {
    match serde_json::from_str(text) {
        Ok(v) => Some(v),
        Err(e) => {
            log::error(&format!("cached {}/{} does not parse as the requested type: {e}", gvk.group, gvk.kind));
            None
        }
    }
}
