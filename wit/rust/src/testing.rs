//! Native unit tests of a plugin without a host: a fake cache, captured log lines, and one call
//! that parses the primary as the host would.
//!
//! ```ignore
//! use kwop_guest::testing::{self, FakeCache};
//! let cache = FakeCache::new().with(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}}));
//! let out = testing::reconcile::<MyPlugin>(&foo_json, cache).expect("an outcome");
//! assert_eq!(out.applied_as::<serde_json::Value>(0).unwrap()["data"]["k"], "v");
//! assert_eq!(testing::logs(), vec![(testing::Level::Debug, "creating x".to_string())]);
//! ```

use crate::{Context, Failure, Gvk, Outcome, Reconciler};
use serde::Serialize;
use serde_json::Value;
use std::cell::RefCell;

/// A log level, as the plugin's `log` calls name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `log::debug`.
    Debug,
    /// `log::info`.
    Info,
    /// `log::warn`.
    Warn,
    /// `log::error`.
    Error,
}

thread_local! {
    static LOGS: RefCell<Vec<(Level, String)>> = const { RefCell::new(Vec::new()) };
}

#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
pub(crate) fn record_log(level: Level, message: &str) {
    LOGS.with(|l| l.borrow_mut().push((level, message.to_string())));
}

/// The lines logged on this thread since the last call (native code only), oldest first.
pub fn logs() -> Vec<(Level, String)> {
    LOGS.with(|l| std::mem::take(&mut *l.borrow_mut()))
}

/// Objects standing in for the host's cache, matched by apiVersion, kind, namespace and name.
#[derive(Debug, Clone, Default)]
pub struct FakeCache {
    objects: Vec<Value>,
}

fn meta<'a>(o: &'a Value, field: &str) -> Option<&'a str> {
    o.get("metadata")?.get(field)?.as_str().filter(|s| !s.is_empty())
}

impl FakeCache {
    /// An empty cache.
    pub fn new() -> Self {
        FakeCache::default()
    }

    /// Adds an object given as JSON (it needs `apiVersion`, `kind` and `metadata.name`).
    pub fn with(mut self, object: Value) -> Self {
        self.objects.push(object);
        self
    }

    /// Adds any serialisable object, e.g. a k8s-openapi `ConfigMap` (whose `apiVersion` and
    /// `kind` k8s-openapi writes itself).
    pub fn with_object<T: Serialize>(self, object: &T) -> Self {
        self.with(serde_json::to_value(object).unwrap_or(Value::Null))
    }

    fn of<'a>(&'a self, gvk: &'a Gvk) -> impl Iterator<Item = &'a Value> + 'a {
        let api_version =
            if gvk.group.is_empty() { gvk.version.clone() } else { format!("{}/{}", gvk.group, gvk.version) };
        self.objects.iter().filter(move |o| {
            o.get("apiVersion").and_then(Value::as_str) == Some(api_version.as_str())
                && o.get("kind").and_then(Value::as_str) == Some(gvk.kind.as_str())
        })
    }

    pub(crate) fn get(&self, gvk: &Gvk, namespace: Option<&str>, name: &str) -> Option<String> {
        self.of(gvk).find(|o| meta(o, "name") == Some(name) && meta(o, "namespace") == namespace).map(Value::to_string)
    }

    pub(crate) fn query(&self, gvk: &Gvk, namespace: Option<&str>, selector: Option<&str>) -> Vec<String> {
        self.of(gvk)
            .filter(|o| namespace.is_none() || meta(o, "namespace") == namespace)
            .filter(|o| selector.is_none_or(|s| matches_equality_selector(o, s)))
            .map(Value::to_string)
            .collect()
    }

    pub(crate) fn controlled_by(&self, uid: &str, namespace: Option<&str>) -> Vec<String> {
        self.objects
            .iter()
            .filter(|o| !uid.is_empty() && meta(o, "namespace") == namespace)
            .filter(|o| {
                o.pointer("/metadata/ownerReferences").and_then(Value::as_array).is_some_and(|refs| {
                    refs.iter().any(|r| {
                        r.get("controller").and_then(Value::as_bool) == Some(true)
                            && r.get("uid").and_then(Value::as_str) == Some(uid)
                    })
                })
            })
            .map(Value::to_string)
            .collect()
    }
}

/// `k=v,k2=v2` and `k` (exists) selectors; the host understands the full syntax.
fn matches_equality_selector(o: &Value, selector: &str) -> bool {
    let labels = o.pointer("/metadata/labels");
    selector.split(',').map(str::trim).filter(|t| !t.is_empty()).all(|term| {
        let (key, want) = match term.split_once("==").or_else(|| term.split_once('=')) {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (term, None),
        };
        let got = labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        match want {
            Some(v) => got == Some(v),
            None => got.is_some(),
        }
    })
}

/// One reconcile as the host would run it: `primary` (the whole object, JSON) is parsed as the
/// plugin's primary type, the cache is `cache`, and the primary's namespace and uid decide what
/// `None` namespaces mean and which cached objects are its own.
pub fn reconcile<R: Reconciler>(primary: &Value, cache: FakeCache) -> Result<Outcome, Failure> {
    let parsed: R::Primary = serde_json::from_value(primary.clone())
        .map_err(|e| Failure::permanent(format!("the primary object does not parse: {e}")))?;
    let ctx = Context::fake(cache, meta(primary, "namespace"), meta(primary, "uid").unwrap_or_default());
    R::reconcile(parsed, &ctx)
}
