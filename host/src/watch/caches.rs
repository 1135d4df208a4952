//! One store per declared kind, of compact objects (`object::Cached`), with the fields the host
//! never needs stripped.

use super::discovery::Resolved;
use super::object::{Cached, Store};
use super::owners::OwnerIndex;
use super::ObjectKey;
use crate::plugin::cache_view::bounded;
use crate::plugin::{CacheView, QueryTooLarge};
use crate::vocab::selector::Selector;
use crate::vocab::tracking::Owner;
use crate::vocab::Gvk;
use futures::{Stream, StreamExt};
use kube::api::{Api, DynamicObject, TypeMeta};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, ResourceExt};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A cached kind.
pub struct KindCache {
    /// What it is.
    pub resolved: Resolved,
    /// The objects.
    pub store: Store,
    /// The first full list has arrived.
    pub synced: AtomicBool,
    /// The watch is currently connected (false while the API server is unreachable).
    pub healthy: AtomicBool,
    /// Objects by the uid of their controller, so a reconcile finds what its primary owns
    /// without scanning the whole store (which made every reconcile O(cached objects)).
    owners: Mutex<OwnerIndex>,
    /// The shard epoch its last full list started at (`u64::MAX` when sharding never changes
    /// what it holds): see `Shard::caches_current`.
    listed: AtomicU64,
}

/// This replica's shard as a watch sees it: what to keep, and the count of what it dropped.
#[derive(Clone)]
pub struct ShardFilter {
    /// The shard.
    pub shard: Arc<crate::shard::Shard>,
    /// Objects the watch received outside it (never, when the API server filters).
    pub outside: prometheus_client::metrics::counter::Counter,
    /// Kept whole: nothing dropped, but relisted when the holding grows, like a slice (a live
    /// watch may lag or have been cut off: see `Shard::caches_current`).
    pub whole: bool,
}

/// What the watch of one kind reports to its controller.
#[derive(Debug)]
pub enum WatchEvent {
    /// An object was added, changed or deleted (deleted: `true`).
    Changed(Arc<Cached>, bool),
    /// A full (re)list finished and is in the store; `first` on the initial one. Objects may have
    /// changed or vanished unseen (their own events are not sent during a list).
    Relisted {
        /// Whether this was the first list.
        first: bool,
    },
}

/// Annotations the host never needs: dropping them saves memory per cached object.
const STRIPPED_ANNOTATIONS: &[&str] = &["kubectl.kubernetes.io/last-applied-configuration"];

impl KindCache {
    /// An empty cache of a kind (filled by a [`KindCache::stream`]).
    pub fn new(resolved: Resolved) -> Arc<Self> {
        Arc::new(KindCache {
            resolved,
            store: Store::default(),
            synced: AtomicBool::new(false),
            healthy: AtomicBool::new(false),
            owners: Mutex::new(OwnerIndex::default()),
            listed: AtomicU64::new(0),
        })
    }

    /// The shard epoch its last full list started at.
    pub fn listed(&self) -> u64 {
        self.listed.load(Ordering::Acquire)
    }

    /// The watch that fills this cache (all namespaces, or one): a (re)list, then changes; it must
    /// be polled for the store to fill. `managedFields` are dropped, except the status entries of
    /// kwop's plugins (field managers `kwop-<plugin>`: the applier of a plugin whose primary this
    /// kind is needs to know which status fields it set). One cache serves every plugin of the
    /// host that declares the kind (see [`super::pool`]). With a `shard`, namespaced
    /// objects outside the namespaces this replica holds are not kept (the API server may have
    /// filtered them already: see `shard::filter`); a new stream after the holding changed
    /// relists into the same store.
    pub fn stream(
        self: Arc<Self>,
        client: Client,
        namespace: Option<&str>,
        shard: Option<ShardFilter>,
    ) -> impl Stream<Item = WatchEvent> + Send + 'static {
        let ar = self.resolved.resource.clone();
        let api: Api<DynamicObject> = match (namespace, self.resolved.namespaced) {
            (Some(ns), true) => Api::namespaced_with(client, ns, &ar),
            _ => Api::all_with(client, &ar),
        };
        let namespaced = self.resolved.namespaced;
        // The shard epoch this list starts at; never outdated for what resharding does not
        // relist (cluster-scoped kinds with namespace sharding).
        let epoch = match &shard {
            Some(f) if namespaced || f.shard.by() == crate::shard::ShardBy::Uid => f.shard.epoch(),
            _ => u64::MAX,
        };
        let keep = Arc::new(move |o: &DynamicObject| match &shard {
            Some(f) if !f.whole && !f.shard.caches(namespaced, o.metadata.namespace.as_deref()) => {
                f.outside.inc();
                false
            }
            _ => true,
        });
        let types = TypeMeta { api_version: ar.api_version.clone(), kind: ar.kind.clone() };
        let me = self;
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(move |o: &mut DynamicObject| {
                // List items carry no apiVersion/kind; plugins expect both.
                o.types = Some(types.clone());
                o.metadata.managed_fields = o.metadata.managed_fields.take().and_then(|all| {
                    let kept: Vec<_> = all
                        .into_iter()
                        .filter(|f| {
                            f.subresource.as_deref() == Some("status")
                                && f.manager
                                    .as_deref()
                                    .is_some_and(|m| m.starts_with(crate::vocab::FIELD_MANAGER_PREFIX))
                        })
                        .collect();
                    (!kept.is_empty()).then_some(kept)
                });
                if let Some(a) = o.metadata.annotations.as_mut() {
                    for k in STRIPPED_ANNOTATIONS {
                        a.remove(*k);
                    }
                }
            })
            .filter_map(move |ev| {
                let (me, keep) = (me.clone(), keep.clone());
                async move {
                    match ev {
                        Ok(ev) => {
                            me.healthy.store(true, Ordering::Relaxed);
                            match ev {
                                watcher::Event::Apply(o) if !keep(&o) => None,
                                watcher::Event::InitApply(o) if !keep(&o) => None,
                                watcher::Event::Apply(o) => {
                                    let o = Arc::new(Cached::new(o));
                                    let old = me.store.apply(o.clone());
                                    me.owners().replaced(old.as_deref(), &o);
                                    Some(WatchEvent::Changed(o, false))
                                }
                                // A (re)list's objects reach the store only at InitDone (they are
                                // buffered), where the index is rebuilt and the controller
                                // re-queues from the new store: a key queued now would be
                                // reconciled from the old one.
                                watcher::Event::Init => {
                                    me.store.relist_start();
                                    None
                                }
                                watcher::Event::InitApply(o) => {
                                    me.store.relist_object(Arc::new(Cached::new(o)));
                                    None
                                }
                                watcher::Event::Delete(o) => {
                                    let o = Arc::new(Cached::new(o));
                                    if let Some(old) = me.store.delete(o.key()) {
                                        me.owners().removed(&old);
                                    }
                                    Some(WatchEvent::Changed(o, true))
                                }
                                watcher::Event::InitDone => {
                                    // The store was replaced wholesale: objects deleted while the
                                    // watch was down are gone from it, so rebuild the index too.
                                    me.store.relist_done();
                                    me.listed.store(epoch, Ordering::Release);
                                    let state = me.store.state();
                                    me.owners().rebuild(state.iter().map(|o| &**o));
                                    let first = !me.synced.swap(true, Ordering::Relaxed);
                                    Some(WatchEvent::Relisted { first })
                                }
                            }
                        }
                        Err(e) => {
                            if me.healthy.swap(false, Ordering::Relaxed) || !me.synced.load(Ordering::Relaxed) {
                                tracing::warn!(kind = %me.resolved.gvk, "watch failed, retrying with backoff: {e}");
                            }
                            None
                        }
                    }
                }
            });
        stream
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, OwnerIndex> {
        self.owners.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One object.
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<Cached>> {
        let namespace = match self.resolved.namespaced {
            true => Some(namespace?.to_string()),
            false => None,
        };
        self.store.get(&ObjectKey { namespace, name: name.to_string() })
    }
}

#[cfg(test)]
impl KindCache {
    /// A synced cache of `gvk` holding `objects` (JSON), without a watch: for unit tests.
    pub(crate) fn with_objects(gvk: Gvk, namespaced: bool, objects: Vec<serde_json::Value>) -> Arc<Self> {
        let resource = kube::core::ApiResource::from_gvk(&gvk.to_kube());
        let k = KindCache {
            resolved: Resolved { gvk, resource, namespaced },
            store: Store::default(),
            synced: AtomicBool::new(true),
            healthy: AtomicBool::new(true),
            owners: Mutex::new(OwnerIndex::default()),
            listed: AtomicU64::new(u64::MAX),
        };
        for v in objects {
            match serde_json::from_value(v) {
                Ok(o) => {
                    let o = Arc::new(Cached::new(o));
                    let old = k.store.apply(o.clone());
                    k.owners().replaced(old.as_deref(), &o);
                }
                Err(e) => panic!("not an object: {e}"),
            }
        }
        Arc::new(k)
    }
}

/// The caches of one plugin, by kind.
#[derive(Default)]
pub struct Caches {
    kinds: HashMap<Gvk, Arc<KindCache>>,
}

impl Caches {
    /// Adds a kind.
    pub fn insert(&mut self, cache: Arc<KindCache>) {
        self.kinds.insert(cache.resolved.gvk.clone(), cache);
    }

    /// A kind's cache.
    pub fn kind(&self, gvk: &Gvk) -> Option<&Arc<KindCache>> {
        self.kinds.get(gvk)
    }

    /// All caches.
    pub fn all(&self) -> impl Iterator<Item = &Arc<KindCache>> {
        self.kinds.values()
    }

    /// The oldest shard epoch its caches listed at (see `Shard::caches_current`).
    pub fn listed(&self) -> u64 {
        self.kinds.values().map(|k| k.listed()).min().unwrap_or(u64::MAX)
    }

    /// Every kind has been listed once and every watch is connected.
    pub fn ready(&self) -> bool {
        self.kinds.values().all(|k| k.synced.load(Ordering::Relaxed) && k.healthy.load(Ordering::Relaxed))
    }

    /// Objects of `gvk` that belong to the primary `owner` (from the owner index: cost
    /// proportional to what the primary owns, not to the cache size), sorted by namespace and
    /// name. Those with a controller reference to it count only in `owner.namespace` when the
    /// primary is namespaced (an owner reference cannot cross namespaces); for a kind owned
    /// `across` namespaces, those with its tracking labels count wherever they are.
    pub fn belonging_to(&self, gvk: &Gvk, owner: &Owner<'_>, across: bool) -> Vec<Arc<Cached>> {
        let Some(k) = self.kinds.get(gvk) else {
            return Vec::new();
        };
        let keys: Vec<ObjectKey> = k.owners().of(owner.uid);
        let mut out: Vec<Arc<Cached>> = keys
            .iter()
            .filter_map(|key| k.store.get(key))
            // The store may be a step ahead of the index: check the object itself.
            .filter(|o| {
                let by_reference = o.controller_uid() == Some(owner.uid)
                    && (owner.namespace.is_none() || o.namespace() == owner.namespace);
                let by_labels = across
                    && o.tracked_uid() == Some(owner.uid)
                    && o.label(crate::vocab::tracking::PLUGIN) == Some(owner.plugin);
                by_reference || by_labels
            })
            .collect();
        // A stable order, so the plugin's input does not depend on hashing.
        out.sort_by(|a, b| a.key().cmp(b.key()));
        out
    }
}

impl ObjectKey {
    /// The key of a cached object.
    pub fn of(o: &DynamicObject) -> Self {
        ObjectKey { namespace: o.metadata.namespace.clone(), name: o.name_any() }
    }
}

impl CacheView for Caches {
    fn get(&self, kind: &Gvk, namespace: Option<&str>, name: &str) -> Option<String> {
        Some(self.kinds.get(kind)?.get(namespace, name)?.json().to_string())
    }

    fn query(
        &self,
        kind: &Gvk,
        namespace: Option<&str>,
        selector: &Selector,
        max_bytes: usize,
    ) -> Result<Vec<String>, QueryTooLarge> {
        query_json(kind, &self.query_objects(kind, namespace, selector), max_bytes)
    }

    fn namespaced(&self, kind: &Gvk) -> Option<bool> {
        self.kinds.get(kind).map(|k| k.resolved.namespaced)
    }
}

/// Query results as the JSON a plugin gets, at most `max_bytes` in all (serialising stops there).
pub(crate) fn query_json(kind: &Gvk, found: &[Arc<Cached>], max_bytes: usize) -> Result<Vec<String>, QueryTooLarge> {
    bounded(kind, found.iter().map(|o| o.json().to_string()), max_bytes)
}

impl Caches {
    /// Objects of a kind, optionally in one namespace, matching a selector, in a stable order.
    pub fn query_objects(&self, kind: &Gvk, namespace: Option<&str>, selector: &Selector) -> Vec<Arc<Cached>> {
        let Some(k) = self.kinds.get(kind) else {
            return Vec::new();
        };
        let mut out: Vec<Arc<Cached>> = k
            .store
            .state()
            .into_iter()
            .filter(|o| namespace.is_none() || o.namespace() == namespace)
            .filter(|o| selector.matches_with(|l| o.label(l)))
            .collect();
        // A stable order, so the plugin's input does not depend on the store's hashing.
        out.sort_by(|a, b| a.key().cmp(b.key()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache_of(objects: Vec<serde_json::Value>) -> Caches {
        let mut c = Caches::default();
        c.insert(KindCache::with_objects(Gvk::new("", "v1", "ConfigMap"), true, objects));
        c
    }

    fn cm(ns: &str, name: &str, controller: Option<&str>, tracked: Option<(&str, &str)>) -> serde_json::Value {
        let mut v =
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}});
        if let Some(uid) = controller {
            v["metadata"]["ownerReferences"] =
                serde_json::json!([{"apiVersion": "v1", "kind": "P", "name": "p", "uid": uid, "controller": true}]);
        }
        if let Some((uid, plugin)) = tracked {
            v["metadata"]["labels"] = serde_json::json!({"kwop.dev/owner-uid": uid, "kwop.dev/plugin": plugin});
            v["metadata"]["annotations"] = serde_json::json!({"kwop.dev/owner": "a/p"});
        }
        v
    }

    #[test]
    fn what_belongs_to_a_primary_depends_on_its_scope_and_on_the_kind_being_owned_across() {
        let c = cache_of(vec![
            cm("a", "ref-here", Some("u1"), None),
            cm("b", "ref-elsewhere", Some("u1"), None),
            cm("b", "tracked", None, Some(("u1", "p"))),
            cm("c", "tracked-by-another-plugin", None, Some(("u1", "q"))),
            cm("c", "tracked-for-another-primary", None, Some(("u2", "p"))),
        ]);
        let gvk = Gvk::new("", "v1", "ConfigMap");
        let names = |owner: &Owner<'_>, across: bool| -> Vec<String> {
            c.belonging_to(&gvk, owner, across).iter().map(|o| o.name().to_string()).collect()
        };
        let namespaced = Owner { uid: "u1", namespace: Some("a"), name: "p", plugin: "p" };
        // An owner reference counts only in the primary's namespace.
        assert_eq!(names(&namespaced, false), ["ref-here"]);
        // Across namespaces: the tracked one too, never another plugin's or another primary's.
        assert_eq!(names(&namespaced, true), ["ref-here", "tracked"]);
        // A cluster-scoped primary's owner-referenced children count wherever they are.
        let cluster = Owner { namespace: None, ..namespaced };
        assert_eq!(names(&cluster, false), ["ref-here", "ref-elsewhere"]);
        let tracked = c.kind(&gvk).and_then(|k| k.get(Some("b"), "tracked")).expect("cached");
        assert_eq!(tracked.tracked_owner(), Some("a/p"));
    }
}
