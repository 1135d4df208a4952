//! Reads that trigger: what each primary's last reconcile read through the cache imports, and
//! which primaries a change to a cached object must wake.
//!
//! A reconcile's cache view records every `cache.get` (kind, namespace, name — also when nothing
//! was found, so a later creation wakes the reader) and every `cache.query` (kind, namespace,
//! selector, and the objects it returned). After the call the record replaces that primary's
//! previous one in the [`ReadIndex`]. A watch event then wakes every primary that got the object
//! by name, and every primary whose query matches the object now or returned it last time (so a
//! label removed, or an object deleted, wakes the query's readers too).
//!
//! The same record is what a memoized reconcile needs to know that nothing it depends on changed.

use crate::kinds::Gvk;
use crate::plugin::{read_namespace, CacheView, QueryTooLarge};
use crate::source::grants::Grants;
use crate::watch::selector::Selector;
use crate::watch::Cached;
use crate::watch::{Caches, ObjectKey};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Reads kept per primary; beyond these a reconcile's further reads do not trigger it (the
/// resync still does). Bounds the index's memory against a plugin that reads everything.
pub const MAX_GETS: usize = 1024;
/// Queries kept per primary.
pub const MAX_QUERIES: usize = 64;

/// One object read by name.
pub type ReadKey = (Gvk, Option<String>, String);
type QueryKey = (Option<String>, Selector);

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
        let r = crate::watch::caches::query_json(kind, &found, max_bytes);
        if let Ok(items) = &r {
            self.keep(items);
        }
        r
    }

    fn namespaced(&self, kind: &Gvk) -> Option<bool> {
        self.inner.namespaced(kind)
    }
}

#[derive(Default)]
struct QueryGroup {
    primaries: HashSet<ObjectKey>,
    /// Objects the query matched when last evaluated (by a reconcile or a watch event).
    members: HashSet<ObjectKey>,
}

/// Which primaries read which objects, for one controller.
#[derive(Default)]
pub struct ReadIndex {
    gets: HashMap<ReadKey, HashSet<ObjectKey>>,
    queries: HashMap<Gvk, HashMap<QueryKey, QueryGroup>>,
    by_primary: HashMap<ObjectKey, Reads>,
}

impl ReadIndex {
    /// Replaces what `primary` read with `reads` (its latest reconcile).
    pub fn record(&mut self, primary: &ObjectKey, reads: Reads) {
        self.forget(primary);
        if reads.gets.is_empty() && reads.queries.is_empty() {
            return;
        }
        for g in &reads.gets {
            self.gets.entry(g.clone()).or_default().insert(primary.clone());
        }
        for (kind, ns, sel, found) in &reads.queries {
            let group = self.queries.entry(kind.clone()).or_default().entry((ns.clone(), sel.clone())).or_default();
            group.primaries.insert(primary.clone());
            group.members.extend(found.iter().cloned());
        }
        self.by_primary.insert(primary.clone(), reads);
    }

    /// Drops what `primary` read (it was deleted, or read again).
    pub fn forget(&mut self, primary: &ObjectKey) {
        let Some(old) = self.by_primary.remove(primary) else {
            return;
        };
        for g in old.gets {
            if let Some(set) = self.gets.get_mut(&g) {
                set.remove(primary);
                if set.is_empty() {
                    self.gets.remove(&g);
                }
            }
        }
        for (kind, ns, sel, _) in old.queries {
            let Some(groups) = self.queries.get_mut(&kind) else {
                continue;
            };
            let key = (ns, sel);
            if let Some(g) = groups.get_mut(&key) {
                g.primaries.remove(primary);
                if g.primaries.is_empty() {
                    groups.remove(&key);
                }
            }
            if groups.is_empty() {
                self.queries.remove(&kind);
            }
        }
    }

    /// Primaries to wake because `obj` of `kind` changed (or was deleted).
    pub fn triggered(&mut self, kind: &Gvk, obj: &Cached, deleted: bool) -> HashSet<ObjectKey> {
        let key = obj.key().clone();
        let mut out = HashSet::new();
        if let Some(p) = self.gets.get(&(kind.clone(), key.namespace.clone(), key.name.clone())) {
            out.extend(p.iter().cloned());
        }
        if let Some(groups) = self.queries.get_mut(kind) {
            for ((ns, sel), g) in groups.iter_mut() {
                if ns.is_some() && ns != &key.namespace {
                    continue;
                }
                let matches = !deleted && sel.matches_with(|l| obj.label(l));
                let was = if matches { !g.members.insert(key.clone()) } else { g.members.remove(&key) };
                if matches || was {
                    out.extend(g.primaries.iter().cloned());
                }
            }
        }
        out
    }

    /// Primaries that read anything of `kind` (after a relist, when changes may have gone unseen).
    pub fn readers_of(&self, kind: &Gvk) -> HashSet<ObjectKey> {
        let mut out: HashSet<ObjectKey> =
            self.gets.iter().filter(|((g, _, _), _)| g == kind).flat_map(|(_, p)| p.iter().cloned()).collect();
        if let Some(groups) = self.queries.get(kind) {
            out.extend(groups.values().flat_map(|g| g.primaries.iter().cloned()));
        }
        out
    }

    /// Primaries with a record (for tests and metrics).
    pub fn len(&self) -> usize {
        self.by_primary.len()
    }

    /// Whether no primary has a record.
    pub fn is_empty(&self) -> bool {
        self.by_primary.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(ns: &str, name: &str, labels: serde_json::Value) -> Cached {
        Cached::new(
            serde_json::from_value(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": ns, "labels": labels}}))
            .expect("object"),
        )
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey { namespace: Some("ns".into()), name: name.into() }
    }

    fn dep() -> Gvk {
        Gvk::new("apps", "v1", "Deployment")
    }

    #[test]
    fn reads_stay_within_the_grants_namespace_objects_and_kinds_owned_across_namespaces_included() {
        use crate::source::grants::{Grants, Namespaces};
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

    #[test]
    fn a_get_wakes_its_reader_even_for_an_object_created_later() {
        let mut ix = ReadIndex::default();
        let reads = Reads { gets: vec![(dep(), Some("ns".into()), "web".into())], ..Default::default() };
        ix.record(&key("foo-a"), reads);
        assert_eq!(ix.triggered(&dep(), &obj("ns", "web", json!({})), false), HashSet::from([key("foo-a")]));
        assert!(ix.triggered(&dep(), &obj("other", "web", json!({})), false).is_empty());
        assert!(ix.triggered(&Gvk::new("", "v1", "ConfigMap"), &obj("ns", "web", json!({})), false).is_empty());
        ix.forget(&key("foo-a"));
        assert!(ix.triggered(&dep(), &obj("ns", "web", json!({})), false).is_empty());
        assert!(ix.is_empty());
    }

    #[test]
    fn a_query_wakes_its_readers_on_match_and_on_leaving_the_match() {
        let mut ix = ReadIndex::default();
        let sel = Selector::parse("app=web").expect("selector");
        let reads = Reads { queries: vec![(dep(), Some("ns".into()), sel, vec![key("d1")])], ..Default::default() };
        ix.record(&key("foo-a"), reads.clone());
        ix.record(&key("foo-b"), reads);
        let both = HashSet::from([key("foo-a"), key("foo-b")]);
        // A new object that matches.
        assert_eq!(ix.triggered(&dep(), &obj("ns", "d2", json!({"app": "web"})), false), both);
        // d1 loses its label: it left the query's result, its readers must know.
        assert_eq!(ix.triggered(&dep(), &obj("ns", "d1", json!({})), false), both);
        // ...and once out, further changes to it wake nobody.
        assert!(ix.triggered(&dep(), &obj("ns", "d1", json!({"x": "y"})), false).is_empty());
        // A deleted member wakes its readers.
        assert_eq!(ix.triggered(&dep(), &obj("ns", "d2", json!({"app": "web"})), true), both);
        assert_eq!(ix.readers_of(&dep()), HashSet::from([key("foo-a"), key("foo-b")]));
        // A new record replaces the old one.
        ix.record(&key("foo-a"), Reads::default());
        ix.record(&key("foo-b"), Reads::default());
        assert!(ix.readers_of(&dep()).is_empty() && ix.queries.is_empty() && ix.gets.is_empty());
    }
}
