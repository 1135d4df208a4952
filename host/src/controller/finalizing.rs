//! A primary's deletion lifecycle, on the controller's side. A finalizing plugin's finalizer is on
//! the primary before anything is written for it. When the primary is being deleted, `finalize`
//! runs instead of `reconcile` until it says done; its deletions and status are written (fenced
//! as any outcome), and then the finalizer comes off. A failing `finalize` is retried with
//! backoff and never silent: a Warning event `FinalizeFailed`, the condition `Finalized` False in
//! the primary's `status.conditions` (when its schema has them), and
//! `kwop_finalize_total{result="error"|"failure"|"rejected"}`.

use super::reconcile::{warning, Next};
use super::seen::Seen;
use super::Inner;
use crate::outcome::{self, EventSpec, Severity};
use crate::plugin::{CacheView, CallSpec, LoadedPlugin, Request};
use crate::report::REASON_FINALIZE_FAILED;
use crate::telemetry::flight::Verdict;
use crate::telemetry::Metrics;
use crate::vocab::finalize;
use crate::vocab::tracking::Owner;
use crate::watch::view::RecordingCache;
use crate::watch::{Cached, ObjectKey};
use kube::api::DynamicObject;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

impl Inner {
    /// Puts the plugin's finalizer on the primary if it finalizes, takes it off if it does not
    /// (one left by an earlier version). Whether a request was sent, or what comes next.
    pub(super) async fn keep_finalizer(&self, primary: &DynamicObject, plugin: &LoadedPlugin) -> Result<bool, Next> {
        let (name, present) = (&plugin.info.name, plugin.info.finalizes);
        match self.applier.set_finalizer(&self.primary.resolved, primary, &plugin.info.finalizer(), present).await {
            Ok(wrote) => {
                if wrote {
                    let kind = &self.primary.resolved.gvk.kind;
                    self.shared.metrics.writes.get_or_create(&Metrics::write(name, kind, "finalizer")).inc();
                    tracing::debug!(present, "finalizer {}", if present { "added" } else { "removed" });
                }
                Ok(wrote)
            }
            Err(e) => {
                let what = if present { "adding the finalizer" } else { "removing the finalizer" };
                Err(self.write_failed(primary, name, what, e).await)
            }
        }
    }

    /// A primary being deleted: `finalize` while the plugin's finalizer is on it.
    pub(super) async fn deleting(
        &self,
        key: &ObjectKey,
        plugin: &Arc<LoadedPlugin>,
        cached: &Arc<Cached>,
        seen: &Seen<'_>,
    ) -> Next {
        if !cached.has_finalizer(&plugin.info.finalizer()) {
            return Next::Done;
        }
        // The finalizer is off already; the cache has not seen it go yet.
        if self.finalized_at(key).as_deref() == Some(cached.resource_version()) {
            return Next::Done;
        }
        let primary = cached.object();
        if !plugin.info.finalizes {
            // An earlier version finalized; this one does not: there is nothing to wait for.
            return match self.keep_finalizer(&primary, plugin).await {
                Ok(_) => Next::Done,
                Err(next) => next,
            };
        }
        let (name, limits) = (plugin.info.name.as_str(), &self.shared.config.outcome_limits);
        let (uid, ns) = (cached.uid().to_string(), cached.namespace().map(str::to_string));
        let req = Request {
            primary: cached.json().to_string(),
            owned: seen.objects().map(|(_, o)| o.json().to_string()).collect(),
        };
        let spec = CallSpec {
            object: key.to_string(),
            uid: uid.clone(),
            resource_version: cached.resource_version().to_string(),
            started_at: SystemTime::now(),
            clock_read: None,
        };
        let now = spec.started_at;
        let view = Arc::new(RecordingCache::new(self.caches.clone(), ns.clone(), plugin.grants.clone()));
        let started = Instant::now();
        let r = plugin.finalize(req, spec, view.clone() as Arc<dyn CacheView>).await;
        self.shared
            .metrics
            .plugin_call_seconds
            .get_or_create(&Metrics::plugin(name))
            .observe(started.elapsed().as_secs_f64());
        // What it read wakes it when it changes, as for reconcile.
        self.read_index().record(key, view.take());
        let decided = match r {
            Err(e) => return self.finalize_failed(&primary, plugin, "error", e.to_string(), vec![], true, now).await,
            Ok(Err(f)) => {
                let f = outcome::decode_failure(f, limits);
                return self.finalize_failed(&primary, plugin, "failure", f.message, f.events, f.retry, now).await;
            }
            Ok(Ok(raw)) => match outcome::decode_finalize(raw, limits) {
                Ok(o) => o,
                Err(r) => {
                    let m = format!("nothing written: {}", r.message);
                    return self.finalize_failed(&primary, plugin, "rejected", m, vec![], true, now).await;
                }
            },
        };
        let mut out = decided.as_outcome();
        let fenced = match self.fence(&primary, plugin, &out, &uid, seen).await {
            Ok(f) => f,
            Err(Ok(r)) => {
                let m = format!("nothing written: {}", r.message);
                return self.finalize_failed(&primary, plugin, "rejected", m, vec![], true, now).await;
            }
            Err(Err(e)) => return self.write_failed(&primary, name, "get", e).await,
        };
        // A success clears the host's failure condition, unless the plugin's status replaces it.
        if out.status.is_none() {
            out.status = primary.data.get("status").and_then(finalize::without_failure);
        }
        let owner = Owner { uid: &uid, namespace: ns.as_deref(), name: &key.name, plugin: name };
        let mut wrote = match self.write_all(&primary, plugin, &owner, &out, &fenced).await {
            Ok(w) => w,
            Err(next) => return next,
        };
        if !decided.done {
            self.report(&primary, &decided.events, wrote).await;
            self.shared.metrics.finalized(name, "pending");
            super::noting::verdict(Verdict::Finalizing { message: "finalize says not yet: the deletion waits".into() });
            self.waiting_too_long(&primary, plugin, now).await;
            return Next::After(decided.requeue_after);
        }
        match self.keep_finalizer_off(key, &primary, plugin).await {
            Ok(w) => wrote |= w,
            Err(next) => return next,
        }
        self.report(&primary, &decided.events, wrote).await;
        self.shared.metrics.finalized(name, "done");
        super::noting::verdict(Verdict::Finalizing { message: "finalize done: kwop removed its finalizer".into() });
        tracing::info!("finalized; finalizer removed");
        Next::Done
    }

    /// A primary in a namespace the plugin is not (or no longer) granted: left alone, except that
    /// one being deleted with the plugin's finalizer on it has it taken off without `finalize` (the
    /// plugin may not act there), with a Warning event saying so: the deletion never hangs on it.
    pub(super) async fn outside_grants(&self, key: &ObjectKey, plugin: &LoadedPlugin) -> Next {
        let Some(cached) = self.primary.get(key.namespace.as_deref(), &key.name) else {
            super::noting::discard();
            return Next::Done;
        };
        super::noting::verdict(Verdict::OutsideGrants {
            message: format!(
                "namespace {:?} is not among the namespaces plugin {} is granted (spec.grants.namespaces of its \
                 ReconcilerPlugin): kwop neither reconciles it nor writes for it",
                key.namespace.as_deref().unwrap_or_default(),
                plugin.info.name
            ),
        });
        let finalizer = plugin.info.finalizer();
        if !cached.deleting() || !cached.has_finalizer(&finalizer) {
            return Next::Done;
        }
        if let Some(shard) = &self.shared.shard {
            let _held = shard.enter().await;
            if !shard.holds(cached.namespace(), cached.uid()) {
                return Next::Done;
            }
        }
        if self.finalized_at(key).as_deref() == Some(cached.resource_version()) {
            return Next::Done;
        }
        let primary = cached.object();
        let message = format!(
            "namespace {:?} is not among the namespaces plugin {} is granted: its finalizer {finalizer} is removed \
             without running finalize (what it made for this object is left in place)",
            key.namespace.as_deref().unwrap_or_default(),
            plugin.info.name
        );
        tracing::warn!(object = %key, "{message}");
        match self.keep_finalizer_off(key, &primary, plugin).await {
            Ok(_) => {
                self.report(&primary, &[warning(finalize::REASON_NOT_GRANTED, message)], true).await;
                Next::Done
            }
            Err(next) => next,
        }
    }

    /// Takes the finalizer off after `finalize` said done, remembering the version it was taken
    /// off (so a cache that has not caught up does not finalize a second time).
    async fn keep_finalizer_off(
        &self,
        key: &ObjectKey,
        primary: &DynamicObject,
        plugin: &LoadedPlugin,
    ) -> Result<bool, Next> {
        let f = plugin.info.finalizer();
        match self.applier.set_finalizer(&self.primary.resolved, primary, &f, false).await {
            Ok(wrote) => {
                if let Some(rv) = &primary.metadata.resource_version {
                    self.finalized.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone(), rv.clone());
                }
                let kind = &self.primary.resolved.gvk.kind;
                self.shared.metrics.writes.get_or_create(&Metrics::write(&plugin.info.name, kind, "finalizer")).inc();
                Ok(wrote)
            }
            Err(e) => Err(self.write_failed(primary, &plugin.info.name, "removing the finalizer", e).await),
        }
    }

    /// The resourceVersion a primary's finalizer was taken off at, if it was.
    fn finalized_at(&self, key: &ObjectKey) -> Option<String> {
        self.finalized.lock().unwrap_or_else(|p| p.into_inner()).get(key).cloned()
    }

    /// Writes the condition `Finalized` False / `reason` into the primary's status (when its
    /// schema has conditions: otherwise the events and the metric say it).
    async fn set_condition(&self, primary: &DynamicObject, reason: &str, message: &str, now: SystemTime) {
        let when = humantime::format_rfc3339_seconds(now).to_string();
        let status = primary.data.get("status");
        if let Some(status) = finalize::with_failure(status, reason, message, primary.metadata.generation, &when) {
            if let Err(e) = self.applier.status(&self.primary.resolved, primary, &status).await {
                tracing::debug!(
                    "condition {} not written (does the status schema have conditions?): {e}",
                    finalize::CONDITION
                );
            }
        }
    }

    /// A deletion that has waited longer than the patience (`--finalize-patience`) on a `finalize` that keeps
    /// saying not yet: said on the primary (a Warning event, repeated at most every few minutes,
    /// and the condition), so a deletion never hangs silently.
    async fn waiting_too_long(&self, primary: &DynamicObject, plugin: &LoadedPlugin, now: SystemTime) {
        let since = serde_json::to_value(&primary.metadata.deletion_timestamp)
            .ok()
            .and_then(|v| v.as_str().and_then(|t| humantime::parse_rfc3339_weak(t).ok()));
        let Some(since) = since else { return };
        let patience = self.shared.config.finalize_patience;
        if now.duration_since(since).unwrap_or_default() < patience {
            return;
        }
        let message = format!(
            "the deletion has waited more than {} for {}'s finalize, which keeps saying not yet",
            humantime::format_duration(patience),
            plugin.info.name
        );
        tracing::warn!("{message}");
        self.report(primary, &[warning(finalize::REASON_WAITING, message.clone())], false).await;
        self.set_condition(primary, finalize::REASON_WAITING, &message, now).await;
    }

    /// A failed `finalize`: reported on the primary (events, the `Finalized` condition) and in
    /// the metrics; retried with backoff unless the plugin said not to.
    #[allow(clippy::too_many_arguments)]
    async fn finalize_failed(
        &self,
        primary: &DynamicObject,
        plugin: &LoadedPlugin,
        result: &str,
        message: String,
        mut events: Vec<EventSpec>,
        retry: bool,
        now: SystemTime,
    ) -> Next {
        let name = &plugin.info.name;
        tracing::warn!(result, "finalize failed, the deletion waits: {message}");
        super::noting::verdict(Verdict::Finalizing {
            message: format!("finalize {result}, the deletion waits: {message}"),
        });
        self.shared.metrics.finalized(name, result);
        if !events.iter().any(|e| e.severity == Severity::Warning) {
            events.push(warning(REASON_FINALIZE_FAILED, format!("{name} {}: {message}", plugin.info.version)));
        }
        self.report(primary, &events, false).await;
        self.set_condition(primary, finalize::REASON_FAILED, &message, now).await;
        if retry {
            Next::Retry
        } else {
            Next::Done
        }
    }
}
