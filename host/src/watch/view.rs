//! The caches as one call into a plugin sees them: answers only within what the plugin is
//! granted, and a record of every read.
//!
//! A reconcile's cache view records every `cache.get` (kind, namespace, name — also when nothing
//! was found, so a later creation wakes the reader) and every `cache.query` (kind, namespace,
//! selector, and the objects it returned). The controller keeps the record to know which
//! primaries a change must wake (`controller::reads`) and whether anything a memoized reconcile
//! depended on changed (`controller::memo`); admission answers `validate` through the same view.

use super::{Cached, Caches, ObjectKey};
use crate::plugin::{read_namespace, CacheView, QueryTooLarge};
use crate::vocab::grants::Grants;
use crate::vocab::selector::Selector;
use crate::vocab::Gvk;
use std::sync::{Arc, Mutex};

/// Reads kept per primary; beyond these a reconcile's further reads do not trigger it (the
/// resync still does). Bounds the index's memory against a plugin that reads everything.
pub const MAX_GETS: usize = 1024;
/// Queries kept per primary.
pub const MAX_QUERIES: usize = 64;

/// One object read by name.
pub type ReadKey = (Gvk, Option<String>, String);

/// What one reconcile read.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reads {
    /// Objects read by name, found or not.
    pub gets: Vec<ReadKey>,
    /// Queries: kind, namespace (`None` = all), selector, and the objects returned.
    pub queries: Vec<(Gvk, Option<String>, Selector, Vec<ObjectKey>)>,
    /// The resourceVersions the plugin was shown, when it was shown them (for memoized reconciles).
    pub versions: Versions,
}

/// The resourceVersions behind [`Reads`], in the same order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Versions {
    /// One per get: the version found, `None` when nothing was.
    pub gets: Vec<Option<String>>,
    /// One per query: the version of each object returned.
    pub queries: Vec<Vec<String>>,
    /// More was read than is kept ([`MAX_GETS`], [`MAX_QUERIES`]): the record is incomplete.
    pub truncated: bool,
}

/// The core `Namespace` kind: its objects are filtered by the namespaces they are.
fn is_namespace(kind: &Gvk) -> bool {
    kind.group.is_empty() && kind.kind == "Namespace"
}

fn version(o: &Cached) -> String {
    o.resource_version().to_string()
}

/// The cache as one reconcile sees it: answers from the shared caches and records each read.
/// A namespaced kind read by name without a namespace means the primary's namespace (as
/// `object-ref` documents).
/// Reads outside the namespaces the plugin is granted find nothing.
pub struct RecordingCache {
    inner: Arc<Caches>,
    primary_namespace: Option<String>,
    grants: Arc<Grants>,
    reads: Mutex<Reads>,
    /// Every object returned, as JSON (only while recording reconciles: `--record`).
    answers: Option<Mutex<Vec<String>>>,
}

impl RecordingCache {
    /// A view for a reconcile of a primary in `primary_namespace`, within `grants`.
    pub fn new(inner: Arc<Caches>, primary_namespace: Option<String>, grants: Arc<Grants>) -> Self {
        RecordingCache { inner, primary_namespace, grants, reads: Mutex::new(Reads::default()), answers: None }
    }

    /// Also keeps every object returned (see [`RecordingCache::take_answers`]).
    pub fn keeping_answers(mut self) -> Self {
        self.answers = Some(Mutex::new(Vec::new()));
        self
    }

    /// The objects returned so far, as JSON (empty unless [`RecordingCache::keeping_answers`]).
    pub fn take_answers(&self) -> Vec<String> {
        match &self.answers {
            Some(a) => std::mem::take(&mut *a.lock().unwrap_or_else(|p| p.into_inner())),
            None => Vec::new(),
        }
    }

    fn keep(&self, found: &[String]) {
        if let Some(a) = &self.answers {
            a.lock().unwrap_or_else(|p| p.into_inner()).extend(found.iter().cloned());
        }
    }

    /// Whether `kind` may be read in `ns`: where the grants let the plugin read, for every kind.
    /// Owning a kind across namespaces lets a plugin write it elsewhere, not read it there (issue
    /// 35: one owning Secrets across namespaces read kube-system's): its own copies come in the
    /// request's owned objects, and the write fence checks what is there before any write.
    fn may_read(&self, ns: Option<&str>) -> bool {
        self.grants.namespaces.reads_in(self.primary_namespace.as_deref(), ns)
    }

    /// What was read so far.
    pub fn take(&self) -> Reads {
        std::mem::take(&mut *self.reads.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn namespace_for(&self, kind: &Gvk, given: Option<&str>) -> Option<String> {
        read_namespace(self.inner.namespaced(kind), given, self.primary_namespace.as_deref()).map(str::to_string)
    }

    /// The object a get answers with (nothing outside the granted namespaces; a Namespace
    /// object counts as in itself, so one the plugin is not granted is not there either).
    fn object(&self, kind: &Gvk, ns: Option<&str>, name: &str) -> Option<Arc<Cached>> {
        let within = if is_namespace(kind) { Some(name) } else { ns };
        if !self.may_read(within) {
            return None;
        }
        self.inner.kind(kind)?.get(ns, name)
    }

    /// The objects a query answers with (nothing outside the granted namespaces).
    fn query_readable(&self, kind: &Gvk, namespace: Option<&str>, selector: &Selector) -> Vec<Arc<Cached>> {
        let mut found = if namespace.is_none() || self.may_read(namespace) {
            self.inner.query_objects(kind, namespace, selector)
        } else {
            Vec::new()
        };
        if is_namespace(kind) {
            found.retain(|o| self.may_read(Some(o.name())));
        } else {
            found.retain(|o| self.may_read(o.namespace()));
        }
        found
    }

    /// Whether every read in `reads` would be answered now exactly as it was then: the same
    /// objects at the same resourceVersions (false when the record is incomplete).
    pub fn answers_unchanged(&self, reads: &Reads) -> bool {
        let v = &reads.versions;
        if v.truncated || v.gets.len() != reads.gets.len() || v.queries.len() != reads.queries.len() {
            return false;
        }
        let gets = reads.gets.iter().zip(&v.gets).all(|((kind, ns, name), was)| {
            self.object(kind, ns.as_deref(), name).map(|o| version(&o)).as_ref() == was.as_ref()
        });
        gets && reads.queries.iter().zip(&v.queries).all(|((kind, ns, sel, keys), was)| {
            let now = self.query_readable(kind, ns.as_deref(), sel);
            now.len() == keys.len()
                && now.iter().zip(keys).zip(was).all(|((o, k), rv)| o.key() == k && version(o) == *rv)
        })
    }
}

impl CacheView for RecordingCache {
    fn get(&self, kind: &Gvk, namespace: Option<&str>, name: &str) -> Option<String> {
        let ns = self.namespace_for(kind, namespace);
        let object = self.object(kind, ns.as_deref(), name);
        let span = tracing::debug_span!("cache.get", kind = %kind.kind, namespace = ns.as_deref().unwrap_or(""), name,
            hit = object.is_some(), bytes = object.as_ref().map(|o| o.json().len()).unwrap_or(0));
        let _in = span.enter();
        {
            let mut r = self.reads.lock().unwrap_or_else(|p| p.into_inner());
            if r.gets.len() < MAX_GETS {
                r.gets.push((kind.clone(), ns.clone(), name.to_string()));
                r.versions.gets.push(object.as_deref().map(version));
            } else {
                r.versions.truncated = true;
            }
        }
        let found = object.map(|o| o.json().to_string());
        if let Some(f) = &found {
            self.keep(std::slice::from_ref(f));
        }
        found
    }

    fn query(
        &self,
        kind: &Gvk,
        namespace: Option<&str>,
        selector: &Selector,
        max_bytes: usize,
    ) -> Result<Vec<String>, QueryTooLarge> {
        let found = self.query_readable(kind, namespace, selector);
        let span = tracing::debug_span!("cache.query", kind = %kind.kind, namespace = namespace.unwrap_or(""),
            selector = %selector, found = found.len(), bytes = found.iter().map(|o| o.json().len()).sum::<usize>());
        let _in = span.enter();
        {
            let mut r = self.reads.lock().unwrap_or_else(|p| p.into_inner());
            if r.queries.len() < MAX_QUERIES {
                let keys = found.iter().map(|o| o.key().clone()).collect();
                r.queries.push((kind.clone(), namespace.map(str::to_string), selector.clone(), keys));
                r.versions.queries.push(found.iter().map(|o| version(o)).collect());
            } else {
                r.versions.truncated = true;
            }
        }
        let r = super::caches::query_json(kind, &found, max_bytes);
        if let Ok(items) = &r {
            self.keep(items);
        }
        r
    }

    fn namespaced(&self, kind: &Gvk) -> Option<bool> {
        self.inner.namespaced(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_stay_within_the_grants_namespace_objects_and_kinds_owned_across_namespaces_included() {
        use crate::vocab::grants::{Grants, Namespaces};
        use crate::watch::KindCache;
        let namespace = Gvk::new("", "v1", "Namespace");
        let cm = Gvk::new("", "v1", "ConfigMap");
        let mut caches = Caches::default();
        let ns_obj = |n: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}});
        caches.insert(KindCache::with_objects(namespace.clone(), false, vec![ns_obj("a"), ns_obj("b"), ns_obj("c")]));
        let cm_obj =
            |n: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": n}});
        caches.insert(KindCache::with_objects(cm.clone(), true, vec![cm_obj("a"), cm_obj("b"), cm_obj("c")]));
        let caches = Arc::new(caches);
        let grants = |namespaces: Namespaces, across: Vec<Gvk>| {
            Arc::new(Grants {
                primary: Gvk::new("example.com", "v1", "Sync"),
                owns: vec![cm.clone()],
                across,
                reads: vec![namespace.clone()],
                namespaces,
                conversion: false,
            })
        };
        let names = |v: &RecordingCache, kind: &Gvk| -> Vec<String> {
            let found = v.query(kind, None, &Selector::default(), 1 << 20).expect("small");
            found
                .iter()
                .filter_map(|t| serde_json::from_str::<serde_json::Value>(t).ok())
                .map(|o| {
                    format!(
                        "{}/{}",
                        o["metadata"]["namespace"].as_str().unwrap_or(""),
                        o["metadata"]["name"].as_str().unwrap_or("")
                    )
                })
                .collect()
        };
        // Listed [a, b]: Namespace c is not there, nor anything in it.
        let listed = Namespaces::Listed(["a".to_string(), "b".to_string()].into());
        let v = RecordingCache::new(caches.clone(), None, grants(listed.clone(), vec![]));
        assert_eq!(names(&v, &namespace), ["/a", "/b"]);
        assert!(v.get(&namespace, None, "c").is_none() && v.get(&namespace, None, "a").is_some());
        assert_eq!(names(&v, &cm), ["a/x", "b/x"]);
        // A namespaced primary in a, own namespace only: its own Namespace object, its own ConfigMaps...
        let own = RecordingCache::new(caches.clone(), Some("a".into()), grants(Namespaces::Own, vec![]));
        assert_eq!((names(&own, &namespace), names(&own, &cm)), (vec!["/a".to_string()], vec!["a/x".to_string()]));
        // ...even for a kind it owns across namespaces (issue 35: writing in a namespace is no
        // licence to read there; a plugin owning Secrets across namespaces read kube-system's).
        let across = RecordingCache::new(caches.clone(), Some("a".into()), grants(Namespaces::Own, vec![cm.clone()]));
        assert_eq!(names(&across, &cm), ["a/x"]);
        assert!(across.get(&cm, Some("c"), "x").is_none() && across.get(&cm, Some("a"), "x").is_some());
        let bounded = RecordingCache::new(caches, Some("a".into()), grants(listed, vec![cm.clone()]));
        assert_eq!(names(&bounded, &cm), ["a/x", "b/x"]);
    }
}
