//! One reflector store per declared kind, with the fields the host never needs stripped.

use super::discovery::Resolved;
use super::selector::Selector;
use super::ObjectKey;
use crate::kinds::Gvk;
use crate::plugin::CacheView;
use futures::{Stream, StreamExt};
use kube::api::{Api, DynamicObject, TypeMeta};
use kube::runtime::reflector::{store::Writer, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, ResourceExt};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A cached kind.
pub struct KindCache {
    /// What it is.
    pub resolved: Resolved,
    /// The reflector store.
    pub store: Store<DynamicObject>,
    /// The first full list has arrived.
    pub synced: AtomicBool,
    /// The watch is currently connected (false while the API server is unreachable).
    pub healthy: AtomicBool,
}

/// What the watch of one kind reports to its controller.
#[derive(Debug)]
pub enum WatchEvent {
    /// An object was added, changed or deleted (deleted: `true`).
    Changed(Arc<DynamicObject>, bool),
    /// A full (re)list finished; `first` on the initial one. Objects may have vanished unseen.
    Relisted {
        /// Whether this was the first list.
        first: bool,
    },
}

/// Annotations the host never needs: dropping them saves memory per cached object.
const STRIPPED_ANNOTATIONS: &[&str] = &["kubectl.kubernetes.io/last-applied-configuration"];

impl KindCache {
    /// Starts watching a kind (all namespaces, or one). Returns the cache and the event stream
    /// that drives it: the stream must be polled for the store to fill.
    pub fn start(
        client: Client,
        resolved: Resolved,
        namespace: Option<&str>,
    ) -> (Arc<Self>, impl Stream<Item = WatchEvent> + Send + 'static) {
        let ar = resolved.resource.clone();
        let api: Api<DynamicObject> = match (namespace, resolved.namespaced) {
            (Some(ns), true) => Api::namespaced_with(client, ns, &ar),
            _ => Api::all_with(client, &ar),
        };
        let writer = Writer::new(ar.clone());
        let cache = Arc::new(KindCache {
            resolved,
            store: writer.as_reader(),
            synced: AtomicBool::new(false),
            healthy: AtomicBool::new(false),
        });
        let types = TypeMeta { api_version: ar.api_version.clone(), kind: ar.kind.clone() };
        let me = cache.clone();
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(move |o: &mut DynamicObject| {
                // List items carry no apiVersion/kind; plugins expect both.
                o.types = Some(types.clone());
                o.metadata.managed_fields = None;
                if let Some(a) = o.metadata.annotations.as_mut() {
                    for k in STRIPPED_ANNOTATIONS {
                        a.remove(*k);
                    }
                }
            })
            .reflect(writer)
            .filter_map(move |ev| {
                let me = me.clone();
                async move {
                    match ev {
                        Ok(ev) => {
                            me.healthy.store(true, Ordering::Relaxed);
                            match ev {
                                watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                                    Some(WatchEvent::Changed(Arc::new(o), false))
                                }
                                watcher::Event::Delete(o) => Some(WatchEvent::Changed(Arc::new(o), true)),
                                watcher::Event::Init => None,
                                watcher::Event::InitDone => {
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
        (cache, stream)
    }

    /// One object.
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<DynamicObject>> {
        let mut r = ObjectRef::new_with(name, self.resolved.resource.clone());
        if self.resolved.namespaced {
            r = r.within(namespace?);
        }
        self.store.get(&r)
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

    /// Every kind has been listed once and every watch is connected.
    pub fn ready(&self) -> bool {
        self.kinds.values().all(|k| k.synced.load(Ordering::Relaxed) && k.healthy.load(Ordering::Relaxed))
    }

    /// Objects of `gvk` in `namespace` whose controller is the object with `uid`.
    pub fn controlled_by(&self, gvk: &Gvk, namespace: Option<&str>, uid: &str) -> Vec<Arc<DynamicObject>> {
        let Some(k) = self.kinds.get(gvk) else {
            return Vec::new();
        };
        k.store
            .state()
            .into_iter()
            .filter(|o| o.metadata.namespace.as_deref() == namespace)
            .filter(|o| o.owner_references().iter().any(|r| r.controller == Some(true) && r.uid == uid))
            .collect()
    }
}

impl ObjectKey {
    /// The key of a cached object.
    pub fn of(o: &DynamicObject) -> Self {
        ObjectKey { namespace: o.metadata.namespace.clone(), name: o.name_any() }
    }
}

fn to_json(o: &DynamicObject) -> Option<String> {
    serde_json::to_string(o).ok()
}

impl CacheView for Caches {
    fn get(&self, kind: &Gvk, namespace: Option<&str>, name: &str) -> Option<String> {
        let o = self.kinds.get(kind)?.get(namespace, name)?;
        to_json(&o)
    }

    fn query(&self, kind: &Gvk, namespace: Option<&str>, selector: &Selector) -> Vec<String> {
        let Some(k) = self.kinds.get(kind) else {
            return Vec::new();
        };
        k.store
            .state()
            .into_iter()
            .filter(|o| namespace.is_none() || o.metadata.namespace.as_deref() == namespace)
            .filter(|o| selector.matches(&o.labels().clone()))
            .filter_map(|o| to_json(&o))
            .collect()
    }
}
