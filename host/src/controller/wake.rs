//! What wakes a controller's primaries and who works them off: a watch event (the primary's own,
//! an owned object's, a read's), a relist, the periodic resync, a change of this replica's shard;
//! the start-up wait for every cache and the workers' loop over the queue.

use super::{reads, reconcile, Inner, Role};
use crate::telemetry::Metrics;
use crate::vocab::Gvk;
use crate::watch::{ObjectKey, WatchEvent};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::task::TaskTracker;

/// A change to an object a primary read wakes that primary after this delay, so a burst of
/// changes (a Deployment's status while its Pods start) costs one reconcile, not one each.
const READ_TRIGGER_DELAY: Duration = Duration::from_millis(20);

impl Inner {
    pub(crate) fn read_index(&self) -> std::sync::MutexGuard<'_, reads::ReadIndex> {
        self.reads.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn on_watch_event(self: &Arc<Self>, role: Role, gvk: &Gvk, ev: WatchEvent) {
        match &ev {
            WatchEvent::Changed(o, deleted) => {
                let woken = self.read_index().triggered(gvk, o, *deleted);
                let me = o.key().clone();
                for key in woken {
                    // A primary reading itself is woken by its own change anyway.
                    if !(role == Role::Primary && key == me) {
                        self.queue.add_after(key, READ_TRIGGER_DELAY);
                    }
                }
            }
            WatchEvent::Relisted { first: false } => {
                for key in self.read_index().readers_of(gvk) {
                    self.queue.add(key);
                }
            }
            WatchEvent::Relisted { first: true } => {}
        }
        match (role, ev) {
            (Role::Primary, WatchEvent::Changed(o, false)) => self.queue.add(o.key().clone()),
            (Role::Primary, WatchEvent::Changed(o, true)) => {
                let key = o.key().clone();
                self.queue.remove(&key);
                self.read_index().forget(&key);
                self.memo.forget(&key);
                self.finalized.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
                self.events.forget(&key);
                self.applier.forget(gvk, key.namespace.as_deref(), &key.name);
            }
            (Role::Owned, WatchEvent::Changed(o, deleted)) => {
                if deleted {
                    self.applier.forget(gvk, o.namespace(), o.name());
                }
                let primary = &self.primary.resolved;
                if let Some(r) = o.controller() {
                    let owner = Gvk::from_api_version(&r.api_version, &r.kind);
                    if owner.same_group_kind(&primary.gvk) {
                        let namespace = if primary.namespaced { o.namespace().map(str::to_string) } else { None };
                        self.queue.add(ObjectKey { namespace, name: r.name.to_string() });
                    }
                }
                // Tracked by labels (a kind owned across namespaces): the annotation names the
                // primary; the plugin label says whose it is.
                let ours = o.label(crate::vocab::tracking::PLUGIN) == Some(self.plugin.load().info.name.as_str());
                if let Some(owner) = o.tracked_owner().filter(|_| ours) {
                    let (namespace, name) = crate::vocab::tracking::parse_owner(owner);
                    if namespace.is_some() == primary.namespaced {
                        self.queue.add(ObjectKey { namespace: namespace.map(str::to_string), name: name.to_string() });
                    }
                }
            }
            // A (re)list of primaries is in the store only now (not at each listed object, when
            // the store still held the old list): queue every primary from the new store.
            (Role::Primary, WatchEvent::Relisted { .. }) => {
                self.primary.store.state().iter().for_each(|o| self.queue.add(o.key().clone()));
            }
            // After a relist (e.g. the API server came back), owned objects may have been deleted
            // unseen: reconcile everything (free when in sync).
            (Role::Owned, WatchEvent::Relisted { first: false }) => self.requeue_all(),
            _ => {}
        }
    }

    pub(super) async fn run(self: Arc<Self>, workers: TaskTracker) {
        let name = self.plugin.load().info.name.clone();
        // Wait for every cache to be listed once (sample-controller's WaitForCacheSync).
        loop {
            if self.caches.all().all(|k| k.synced.load(std::sync::atomic::Ordering::Relaxed)) {
                break;
            }
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        }
        let workers_n = self.plugin.load().limits.concurrency.unwrap_or(self.shared.config.workers).max(1);
        tracing::info!(plugin = %name, "caches synced; starting {workers_n} workers");
        for _ in 0..workers_n {
            let me = self.clone();
            workers.spawn(async move { me.work().await });
        }
        // A zero period turns the resync off (tokio's interval would panic on it).
        let period = self.shared.config.resync;
        let mut resync = tokio::time::interval_at(
            tokio::time::Instant::now() + period.max(Duration::from_secs(1)),
            period.max(Duration::from_secs(1)),
        );
        let mut report = tokio::time::interval(Duration::from_secs(1));
        // Sharded: what this replica holds changed, so other primaries are its own now.
        let mut shard = self.shared.shard.as_ref().map(|s| s.subscribe());
        loop {
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = resync.tick(), if !period.is_zero() => self.resync().await,
                true = shard_changed(shard.as_mut()) => self.requeue_all(),
                _ = report.tick() => {
                    let name = self.plugin.load().info.name.clone();
                    self.shared.metrics.queue_depth.get_or_create(&Metrics::plugin(&name)).set(self.queue.len() as i64);
                    self.shared.health.set_synced(&self.file, self.caches.ready());
                }
            }
        }
    }

    async fn work(self: Arc<Self>) {
        while let Some((key, waited)) = self.queue.get_waited().await {
            let next = tokio::select! {
                next = self.reconcile(&key, waited) => next,
                // Past the shutdown grace: drop the reconcile where it is.
                _ = self.abandon.cancelled() => return,
            };
            match next {
                reconcile::Next::Done => self.queue.forget(&key),
                reconcile::Next::After(d) => {
                    self.queue.forget(&key);
                    self.queue.add_after(key.clone(), d);
                }
                reconcile::Next::Retry => {
                    let d = self.queue.add_rate_limited(key.clone());
                    tracing::debug!(object = %key, delay_ms = d.as_millis() as u64, "requeued with backoff");
                }
            }
            self.queue.done(&key);
        }
    }
}

/// Whether the shard's holding changed (never, when not sharded).
async fn shard_changed(rx: Option<&mut tokio::sync::watch::Receiver<u64>>) -> bool {
    match rx {
        Some(rx) => rx.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}
