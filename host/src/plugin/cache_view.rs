//! What a plugin can read: a view of cached objects, live (reflector stores) or static (offline).

use crate::vocab::Gvk;
use crate::vocab::selector::Selector;
use serde_json::Value;
use std::collections::HashMap;

/// Read access to cached objects by kind. Implementations answer from memory only: a plugin never
/// causes an API request.
pub trait CacheView: Send + Sync {
    /// One object as JSON text.
    fn get(&self, kind: &Gvk, namespace: Option<&str>, name: &str) -> Option<String>;
    /// Objects of a kind, optionally in one namespace, matching a selector, as at most
    /// `max_bytes` of JSON in all: past that, an error (serialising stops at the bound, so a
    /// query over a large cache costs the host no more than the bound).
    fn query(
        &self,
        kind: &Gvk,
        namespace: Option<&str>,
        selector: &Selector,
        max_bytes: usize,
    ) -> Result<Vec<String>, QueryTooLarge>;
    /// Whether a kind is namespaced, if this view knows the kind.
    fn namespaced(&self, _kind: &Gvk) -> Option<bool> {
        None
    }
}

/// The namespace a `cache.get` reads: the one given, else the primary's for a namespaced kind (as
/// `object-ref` documents `none`), else none (a cluster-scoped kind). A kind whose scope the view
/// does not know counts as namespaced. The host's recording view and the offline CLI's
/// [`PrimaryScope`] both use this rule, so both resolve namespaces the same way.
pub fn read_namespace<'a>(
    namespaced: Option<bool>,
    given: Option<&'a str>,
    primary: Option<&'a str>,
) -> Option<&'a str> {
    match given.filter(|n| !n.is_empty()) {
        None if namespaced.unwrap_or(true) => primary,
        other => other,
    }
}

/// The view one reconcile gets offline: `get` without a namespace resolves by [`read_namespace`].
pub struct PrimaryScope {
    inner: std::sync::Arc<dyn CacheView>,
    namespace: Option<String>,
}

impl PrimaryScope {
    /// `inner` seen from a primary in `namespace` (`None`: a cluster-scoped primary).
    pub fn new(inner: std::sync::Arc<dyn CacheView>, namespace: Option<String>) -> Self {
        PrimaryScope { inner, namespace }
    }
}

impl CacheView for PrimaryScope {
    fn get(&self, kind: &Gvk, namespace: Option<&str>, name: &str) -> Option<String> {
        self.inner.get(kind, read_namespace(self.inner.namespaced(kind), namespace, self.namespace.as_deref()), name)
    }
    fn query(
        &self,
        kind: &Gvk,
        namespace: Option<&str>,
        selector: &Selector,
        max_bytes: usize,
    ) -> Result<Vec<String>, QueryTooLarge> {
        self.inner.query(kind, namespace, selector, max_bytes)
    }
    fn namespaced(&self, kind: &Gvk) -> Option<bool> {
        self.inner.namespaced(kind)
    }
}

/// A `cache.query` whose results are over the bound.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error(
    "cache.query of {kind} matched more than {limit} bytes of JSON; narrow it with a namespace or a label selector"
)]
pub struct QueryTooLarge {
    /// The kind queried.
    pub kind: String,
    /// The bound.
    pub limit: usize,
}

/// Collects JSON texts until they add up to more than `max_bytes`.
pub fn bounded<I: Iterator<Item = String>>(
    kind: &Gvk,
    items: I,
    max_bytes: usize,
) -> Result<Vec<String>, QueryTooLarge> {
    let mut total = 0usize;
    let mut out = Vec::new();
    for s in items {
        total = total.saturating_add(s.len());
        if total > max_bytes {
            return Err(QueryTooLarge { kind: kind.to_string(), limit: max_bytes });
        }
        out.push(s);
    }
    Ok(out)
}

/// A cache holding exactly the objects given (for `kwop plugin reconcile`, fixtures and tests).
#[derive(Default, Clone)]
pub struct StaticCache {
    objects: HashMap<Gvk, Vec<Value>>,
    scopes: HashMap<Gvk, bool>,
}

impl StaticCache {
    /// Adds an object; its kind comes from its `apiVersion` and `kind`.
    pub fn insert(&mut self, obj: Value) {
        let gvk = Gvk::from_api_version(
            obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default(),
            obj.get("kind").and_then(Value::as_str).unwrap_or_default(),
        );
        self.objects.entry(gvk).or_default().push(obj);
    }

    /// Records whether a kind is namespaced (unrecorded kinds: unknown).
    pub fn set_namespaced(&mut self, kind: Gvk, namespaced: bool) {
        self.scopes.insert(kind, namespaced);
    }

    /// All objects of a kind.
    pub fn all(&self, kind: &Gvk) -> impl Iterator<Item = &Value> {
        self.objects.get(kind).into_iter().flatten()
    }
}

fn meta<'a>(o: &'a Value, field: &str) -> Option<&'a str> {
    o.get("metadata")?.get(field)?.as_str().filter(|s| !s.is_empty())
}

impl CacheView for StaticCache {
    fn get(&self, kind: &Gvk, namespace: Option<&str>, name: &str) -> Option<String> {
        let namespace = namespace.filter(|s| !s.is_empty());
        self.all(kind)
            .find(|o| meta(o, "name") == Some(name) && meta(o, "namespace") == namespace)
            .map(Value::to_string)
    }

    fn query(
        &self,
        kind: &Gvk,
        namespace: Option<&str>,
        selector: &Selector,
        max_bytes: usize,
    ) -> Result<Vec<String>, QueryTooLarge> {
        let namespace = namespace.filter(|s| !s.is_empty());
        let items = self
            .all(kind)
            .filter(|o| namespace.is_none() || meta(o, "namespace") == namespace)
            .filter(|o| selector.matches_json(o.pointer("/metadata/labels")))
            .map(Value::to_string);
        bounded(kind, items, max_bytes)
    }

    fn namespaced(&self, kind: &Gvk) -> Option<bool> {
        self.scopes.get(kind).copied()
    }
}
