//! The periodic resync: a primary whose memoized reconcile still holds is checked where it
//! stands, and only the others are queued.
//!
//! A queued resync of an in-sync primary ends at the memo check anyway (`memo`); going through the
//! pacer, the queue and a worker to get there cost more than the check (issue 17: 12 000 passes a
//! window, each a timer tick, a queue wake-up, a span and metrics). The check here is the same
//! one, on the same inputs, so what it lets through is exactly what a queued reconcile would have
//! answered from the memo; everything else (no entry, a changed version, a primary being deleted,
//! memoizing off) is queued at the pacer's rate as before. Relists and shard changes still queue
//! every primary: they are when events may have been missed.

use super::memo::RequestVersions;
use super::seen::Seen;
use super::Inner;
use crate::plugin::LoadedPlugin;
use crate::vocab::tracking::Owner;
use crate::watch::view::RecordingCache;
use crate::watch::Cached;
use std::sync::Arc;

/// Primaries checked between two yields to the runtime.
const CHUNK: usize = 256;

/// What a queued reconcile of a primary would have done, as the resync sees it.
enum Check {
    /// Nothing, uncounted: outside the plugin's namespaces or this replica's shard.
    Skip,
    /// Answered from the memo (counted as `unchanged`, as a reconcile counts it).
    Unchanged,
    /// Called the plugin or more: queue it.
    Queue,
}

impl Inner {
    /// A resync answered from the memo: counted on the primary's last flight-recorder entry
    /// (one entry per run of hits), or a new entry after a reconcile.
    fn note_memo_hit(&self, cached: &crate::watch::Cached, plugin: &crate::plugin::LoadedPlugin) {
        let key = cached.key();
        let object = super::noting::obj(&self.primary.resolved.gvk.kind, key.namespace.as_deref(), &key.name);
        self.shared.flight.memo_hit(&plugin.info.name, object, || Some(plugin.digest()), &plugin.info.version);
    }

    /// Re-queues every primary at the configured rate (see [`super::pacer`]: a new pass never
    /// restarts an unfinished one from the beginning).
    pub(crate) fn requeue_all(self: &Arc<Self>) {
        self.pacer.push_all(self.primary.store.state().iter().map(|o| o.key().clone()));
    }

    /// One resync pass: queues the primaries whose last in-sync reconcile no longer holds.
    pub(super) async fn resync(self: &Arc<Self>) {
        let plugin = self.plugin.load_full();
        if !self.memoizes(&plugin) {
            return self.requeue_all();
        }
        let primaries = self.primary.store.state();
        let mut stale = Vec::new();
        let mut unchanged = 0u64;
        for chunk in primaries.chunks(CHUNK) {
            for cached in chunk {
                match self.check(cached, &plugin) {
                    Check::Skip => {}
                    Check::Unchanged => {
                        unchanged += 1;
                        self.note_memo_hit(cached, &plugin);
                    }
                    Check::Queue => stale.push(cached.key().clone()),
                }
            }
            if self.stop.is_cancelled() {
                return;
            }
            tokio::task::yield_now().await;
        }
        self.shared.metrics.results(&plugin.info.name, "unchanged", unchanged);
        tracing::debug!(plugin = %plugin.info.name, unchanged, queued = stale.len(), "resync");
        self.pacer.push_all(stale);
    }

    /// Whether reconciles of this plugin may be answered from the memo.
    pub(super) fn memoizes(&self, plugin: &LoadedPlugin) -> bool {
        self.shared.config.memoize && self.shared.recorder.is_none() && plugin.shadow.is_none()
    }

    /// What `cached`'s plugin would be given as owned objects.
    pub(super) fn seen<'a>(&self, cached: &Cached, plugin: &'a LoadedPlugin) -> Seen<'a> {
        let owner = Owner {
            uid: cached.uid(),
            namespace: cached.namespace(),
            name: &cached.key().name,
            plugin: &plugin.info.name,
        };
        // Objects in a namespace the plugin is no longer granted are not its to see or delete
        // (issue 35: a copy there, deleted, made the fence refuse the whole outcome, every time).
        let granted = |o: &Cached| o.namespace().is_none_or(|n| plugin.grants.namespaces.writes_in(n));
        let mut seen = Seen::default();
        for g in &plugin.info.owns {
            for o in self.caches.belonging_to(g, &owner, plugin.info.owns_across(g)) {
                if granted(&o) {
                    seen.record(g, &o);
                }
            }
        }
        seen
    }

    /// What a queued reconcile of `cached` would do, short of calling the plugin: the same
    /// checks in the same order as `reconcile`. A memo miss forgets the entry, as there.
    fn check(&self, cached: &Arc<Cached>, plugin: &Arc<LoadedPlugin>) -> Check {
        let key = cached.key();
        if !plugin.grants.namespaces.acts_on(key.namespace.as_deref()) {
            // One being deleted may still carry the plugin's finalizer: it is released there.
            let held = cached.deleting() && cached.has_finalizer(&plugin.info.finalizer());
            return if held { Check::Queue } else { Check::Skip };
        }
        if let Some(shard) = &self.shared.shard {
            if !shard.holds(cached.namespace(), cached.uid()) {
                return Check::Skip;
            }
        }
        if cached.deleting() {
            return Check::Queue;
        }
        let seen = self.seen(cached, plugin);
        let view =
            RecordingCache::new(self.caches.clone(), cached.namespace().map(str::to_string), plugin.grants.clone());
        match self.memo.unchanged(key, plugin, &RequestVersions::of(cached, &seen), &view) {
            true => Check::Unchanged,
            false => Check::Queue,
        }
    }
}
