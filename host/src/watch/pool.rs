//! One cache per kind per host, shared by every plugin that declares the kind: ten plugins that
//! own Deployments make one watch and hold one copy of each Deployment.
//!
//! A plugin's controller subscribes to the kinds it declares and gets the shared
//! [`KindCache`] plus its own stream of [`WatchEvent`]s. The first subscriber starts the watch;
//! the watch stops when the last subscription is dropped (a plugin removed, or swapped for one
//! with other kinds), so nothing is watched that no plugin declares. What a plugin may see of a
//! shared cache is still bounded by its own declaration and grants: the controller only hands
//! it the kinds it declared, and the reconcile's cache view applies its namespace grants.
//!
//! Each subscriber sees the same sequence a watch of its own would give it: a `Relisted { first:
//! true }` once the cache holds a full list (at once, when it joins a synced cache), then every
//! change, with `first: false` on later relists. Events are fanned out on unbounded channels, so
//! a slow controller never stalls the watch of the others (kube-runtime's shared reflector,
//! `reflect_shared`, dispatches applied objects only, not deletions or relist boundaries, and
//! applies back-pressure across subscribers; this is why it is not used).

use super::caches::{KindCache, ShardFilter, WatchEvent};
use super::discovery::Resolved;
use crate::shard::{Shard, ShardBy};
use crate::telemetry::metrics::Metrics;
use crate::vocab::Gvk;
use futures::StreamExt;
use kube::Client;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The host's caches, by kind.
pub struct Pool {
    client: Client,
    namespace: Option<String>,
    metrics: Arc<Metrics>,
    kinds: Mutex<HashMap<Gvk, Weak<Entry>>>,
    /// This replica's shard (namespaced objects of namespaces it does not hold are not cached),
    /// and the client whose lists and watches carry its shard selector (`shard::filter`), for
    /// the kinds cached as its slice.
    shard: Option<(Arc<Shard>, Client)>,
}

/// One shared cache and its subscribers; its watch runs while a [`Subscription`] holds it.
struct Entry {
    cache: Arc<KindCache>,
    subscribers: Arc<Mutex<Vec<Subscriber>>>,
    stop: CancellationToken,
    metrics: Arc<Metrics>,
    /// The running watch (replaced when the shard's holding changes).
    current: Mutex<Option<CancellationToken>>,
    /// Cached whole on a replica of a namespace-sharded host (see [`Reach`]).
    whole: std::sync::atomic::AtomicBool,
}

/// Where a subscriber needs a kind's objects, on a namespace-sharded host (elsewhere every
/// cache is whole anyway).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Only in the namespaces of its primaries: the replica's slice is enough.
    PrimaryNamespaces,
    /// Anywhere: owned across namespaces, owned by a cluster-scoped primary, or read beyond a
    /// primary's own namespace. Such a kind is cached whole on every replica (and never asked
    /// with a shard selector), so a reconcile sees all it owns and reads wherever it lives.
    Everywhere,
}

struct Subscriber {
    tx: mpsc::UnboundedSender<WatchEvent>,
    /// Has been told the cache holds a full list.
    listed: bool,
}

/// A plugin's hold on a shared cache: the cache, and its own events from the watch.
pub struct Subscription {
    /// The shared cache.
    pub cache: Arc<KindCache>,
    /// This subscriber's events.
    pub events: mpsc::UnboundedReceiver<WatchEvent>,
    entry: Arc<Entry>,
}

/// A hold on a shared cache without its events: the cache is kept (and its watch runs) while a
/// hold exists. For readers that are not woken by changes (admission).
#[derive(Clone)]
pub struct Hold {
    /// The shared cache.
    pub cache: Arc<KindCache>,
    _entry: Arc<Entry>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // Forget this subscriber now, not at the next event.
        self.events.close();
        let mut subs = lock(&self.entry.subscribers);
        subs.retain(|s| !s.tx.is_closed());
        self.entry.set_gauge(subs.len());
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.stop.cancel();
        let kind = Metrics::kind(&self.cache.resolved.gvk.to_string());
        self.metrics.cache_plugins.remove(&kind);
        self.metrics.cached_objects.remove(&kind);
    }
}

impl Entry {
    fn set_gauge(&self, n: usize) {
        self.metrics.cache_plugins.get_or_create(&Metrics::kind(&self.cache.resolved.gvk.to_string())).set(n as i64);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Pool {
    /// A pool watching all namespaces, or one.
    pub fn new(client: Client, namespace: Option<String>, metrics: Arc<Metrics>) -> Self {
        Pool { client, namespace, metrics, kinds: Mutex::new(HashMap::new()), shard: None }
    }

    /// The same pool for one replica of a sharded host: with namespace sharding, caching only
    /// the namespaces `shard` holds, its slices watched through `sliced` (a client with the
    /// shard selector layer, `shard::filter::ShardSelector`).
    pub fn sharded(mut self, shard: Arc<Shard>, sliced: Client) -> Self {
        self.shard = Some((shard, sliced));
        self
    }

    /// Restarts watches (a relist into the same stores) after the shard's holding changed: with
    /// namespace sharding, those of namespaced kinds sliced (other namespaces are to be cached,
    /// and server-side, listed), and when it `grew`, those kept whole too; with uid sharding, all
    /// of them when the holding `grew` (what was
    /// taken over is reconciled from a list read after the handover, see
    /// `Shard::caches_current`).
    pub fn reshard(&self, grew: bool) {
        let Some((shard, _)) = &self.shard else { return };
        let by = shard.by();
        let entries: Vec<Arc<Entry>> = lock(&self.kinds).values().filter_map(Weak::upgrade).collect();
        for e in entries {
            let restart = match by {
                ShardBy::Namespace => e.cache.resolved.namespaced && (grew || !e.whole.load(Ordering::Acquire)),
                ShardBy::Uid => grew,
            };
            if restart {
                self.watch(&e);
            }
        }
    }

    /// Objects cached now, by kind.
    pub fn counts(&self) -> std::collections::BTreeMap<String, usize> {
        let entries: Vec<Arc<Entry>> = lock(&self.kinds).values().filter_map(Weak::upgrade).collect();
        entries.iter().map(|e| (e.cache.resolved.gvk.to_string(), e.cache.store.len())).collect()
    }

    /// Holds a kind's cache without subscribing to its events, starting its watch if no plugin
    /// holds it. Must be called within a tokio runtime.
    pub fn hold(&self, resolved: Resolved) -> Hold {
        let entry = self.entry(resolved, Reach::PrimaryNamespaces);
        Hold { cache: entry.cache.clone(), _entry: entry }
    }

    /// The shared entry of a kind, started if none runs; made whole (and relisted) if `reach`
    /// needs it whole and it was a slice.
    fn entry(&self, resolved: Resolved, reach: Reach) -> Arc<Entry> {
        let whole = reach == Reach::Everywhere
            && resolved.namespaced
            && self.shard.as_ref().is_some_and(|(s, _)| s.by() == ShardBy::Namespace);
        let mut kinds = lock(&self.kinds);
        let entry = match kinds.get(&resolved.gvk).and_then(Weak::upgrade) {
            // The same resource as before (a CRD whose scope or plural changed gets a new watch;
            // the old one lives on for its subscribers until they go).
            Some(e) if same_resource(&e.cache.resolved, &resolved) => {
                if whole && !e.whole.swap(true, Ordering::AcqRel) {
                    tracing::info!(kind = %e.cache.resolved.gvk, "sharded watch: whole from now on (a plugin needs it beyond its primaries' namespaces)");
                    self.watch(&e);
                }
                e
            }
            _ => {
                let e = self.start(resolved.clone(), whole);
                kinds.insert(resolved.gvk.clone(), Arc::downgrade(&e));
                e
            }
        };
        kinds.retain(|_, w| w.strong_count() > 0);
        entry
    }

    /// Subscribes to a kind's cache, starting its watch if no plugin holds it, needed as far as
    /// `reach`. Must be called within a tokio runtime.
    pub fn subscribe(&self, resolved: Resolved, reach: Reach) -> Subscription {
        let entry = self.entry(resolved, reach);
        let (tx, events) = mpsc::unbounded_channel();
        let mut subs = lock(&entry.subscribers);
        // Joining a cache that already holds a full list: told so at once, as its own watch would.
        let listed =
            entry.cache.synced.load(Ordering::Acquire) && tx.send(WatchEvent::Relisted { first: true }).is_ok();
        subs.push(Subscriber { tx, listed });
        entry.set_gauge(subs.len());
        drop(subs);
        Subscription { cache: entry.cache.clone(), events, entry }
    }

    fn start(&self, resolved: Resolved, whole: bool) -> Arc<Entry> {
        if let Some((shard, _)) = &self.shard {
            let mode = match (shard.by(), resolved.namespaced) {
                (ShardBy::Namespace, true) if whole => {
                    "whole (a plugin needs it beyond its primaries' namespaces: every replica caches all of it)"
                }
                (ShardBy::Namespace, true) if shard.server_side() => "sliced by the API server (shardSelector)",
                (ShardBy::Namespace, true) => "sliced here (every object received, the others' dropped)",
                _ => "whole (every replica caches all of it)",
            };
            tracing::info!(kind = %resolved.gvk, "sharded watch: {mode}");
        }
        let entry = Arc::new(Entry {
            cache: KindCache::new(resolved),
            subscribers: Arc::default(),
            stop: CancellationToken::new(),
            metrics: self.metrics.clone(),
            current: Mutex::new(None),
            whole: whole.into(),
        });
        self.watch(&entry);
        entry
    }

    /// Runs (or restarts) the watch feeding an entry's cache and its subscribers.
    fn watch(&self, entry: &Arc<Entry>) {
        let stop = entry.stop.child_token();
        if let Some(old) = lock(&entry.current).replace(stop.clone()) {
            old.cancel();
        }
        let (cache, subscribers) = (entry.cache.clone(), entry.subscribers.clone());
        let gvk = cache.resolved.gvk.clone();
        let kind = Metrics::kind(&gvk.to_string());
        let whole = entry.whole.load(Ordering::Acquire);
        let filter = self.shard.as_ref().map(|(shard, _)| ShardFilter {
            shard: shard.clone(),
            outside: self.metrics.shard_outside.get_or_create(&kind).clone(),
            whole,
        });
        // A slice of a namespaced kind is listed and watched with the shard selector.
        let client = match &self.shard {
            Some((_, sliced)) if cache.resolved.namespaced && !whole => sliced.clone(),
            _ => self.client.clone(),
        };
        let stream = cache.clone().stream(client, self.namespace.as_deref(), filter);
        let objects = self.metrics.cached_objects.get_or_create(&kind).clone();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    ev = stream.next() => match ev {
                        Some(ev) => {
                            fan_out(&subscribers, ev);
                            objects.set(cache.store.len() as i64);
                        }
                        None => break,
                    },
                }
            }
            tracing::debug!(kind = %gvk, "shared watch stopped");
        });
    }
}

/// Sends one event to every subscriber (its `first` as that subscriber sees it), dropping
/// subscribers that went away.
fn fan_out(subscribers: &Mutex<Vec<Subscriber>>, ev: WatchEvent) {
    let mut subs = lock(subscribers);
    subs.retain_mut(|s| {
        let ev = match &ev {
            WatchEvent::Changed(o, deleted) => WatchEvent::Changed(o.clone(), *deleted),
            WatchEvent::Relisted { .. } => {
                let first = !s.listed;
                s.listed = true;
                WatchEvent::Relisted { first }
            }
        };
        s.tx.send(ev).is_ok()
    });
}

fn same_resource(a: &Resolved, b: &Resolved) -> bool {
    a.namespaced == b.namespaced && a.resource == b.resource
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::Cached;

    fn obj() -> Arc<Cached> {
        let v = serde_json::json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a" } });
        Arc::new(Cached::new(serde_json::from_value(v).expect("object")))
    }

    fn drain(rx: &mut mpsc::UnboundedReceiver<WatchEvent>) -> Vec<String> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .map(|e| match e {
                WatchEvent::Changed(_, d) => format!("changed deleted={d}"),
                WatchEvent::Relisted { first } => format!("relisted first={first}"),
            })
            .collect()
    }

    #[test]
    fn each_subscriber_sees_its_own_first_list_and_gone_subscribers_are_dropped() {
        let subs = Mutex::new(Vec::new());
        let (tx_a, mut a) = mpsc::unbounded_channel();
        lock(&subs).push(Subscriber { tx: tx_a, listed: false });
        fan_out(&subs, WatchEvent::Relisted { first: true });
        fan_out(&subs, WatchEvent::Changed(obj(), false));
        // b joins a synced cache: it was told at subscription (listed = true).
        let (tx_b, mut b) = mpsc::unbounded_channel();
        lock(&subs).push(Subscriber { tx: tx_b, listed: true });
        fan_out(&subs, WatchEvent::Changed(obj(), true));
        fan_out(&subs, WatchEvent::Relisted { first: true });
        assert_eq!(
            drain(&mut a),
            ["relisted first=true", "changed deleted=false", "changed deleted=true", "relisted first=false"]
        );
        assert_eq!(drain(&mut b), ["changed deleted=true", "relisted first=false"]);
        // A subscriber joining before the first list is told at the list, once.
        let (tx_c, mut c) = mpsc::unbounded_channel();
        lock(&subs).push(Subscriber { tx: tx_c, listed: false });
        drop(a);
        fan_out(&subs, WatchEvent::Relisted { first: false });
        assert_eq!(drain(&mut c), ["relisted first=true"]);
        assert_eq!(drain(&mut b), ["relisted first=false"]);
        assert_eq!(lock(&subs).len(), 2, "the dropped subscriber is forgotten");
    }
}
