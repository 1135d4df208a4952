//! The spine of one reconcile: snapshot → unchanged? → plugin call → decode → fence → writes →
//! report → next.

use super::memo::RequestVersions;
use super::noting;
use super::seen::Seen;
use super::Inner;
use crate::outcome::{self, EventSpec, FenceContext, Outcome, RejectReason, Rejection, Severity};
use crate::plugin::{CacheView, CallSpec, LoadedPlugin, Request};
use crate::report::{REASON_OUTCOME_REJECTED, REASON_PLUGIN_FAILED, REASON_RECONCILE_FAILED};
use crate::telemetry::flight::{Flight, Input, Verdict};
use crate::telemetry::{traces, Metrics};
use crate::vocab::tracking::{self, Owner};
use crate::watch::view::RecordingCache;
use crate::watch::ObjectKey;
use kube::api::DynamicObject;
use kube::Resource;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;

/// What the queue does with the key afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Nothing until something changes (or the resync).
    Done,
    /// Again after this delay (the plugin's requeue hint).
    After(Duration),
    /// Again after the key's backoff.
    Retry,
}

/// Where each write of a fenced outcome goes, and what it is compared with (same order as the
/// outcome's applies and deletions).
pub(super) struct Fenced {
    pub(super) apply_ns: Vec<Option<String>>,
    pub(super) observed_apply: Vec<Option<DynamicObject>>,
    pub(super) delete_ns: Vec<Option<String>>,
    pub(super) observed_delete: Vec<Option<DynamicObject>>,
}

pub(super) fn warning(reason: &str, message: String) -> EventSpec {
    EventSpec { severity: Severity::Warning, reason: reason.into(), message }
}

impl Inner {
    /// One reconcile of `key`, which waited `waited` in the queue: a trace (when exported), the
    /// reconcile-duration metric and a note for the flight recorder around [`Inner::reconcile_inner`].
    pub(crate) async fn reconcile(self: &Arc<Self>, key: &ObjectKey, waited: Duration) -> Next {
        let plugin = self.plugin.load_full();
        let kind = &self.primary.resolved.gvk.kind;
        let digest = plugin.digest();
        let span = tracing::info_span!("reconcile", plugin = %plugin.info.name, object = %key, kind = %kind,
            plugin.version = %plugin.info.version, plugin.digest = %digest, queue.wait_ms = waited.as_millis() as u64,
            trace_id = tracing::field::Empty, result = tracing::field::Empty);
        let trace_id = traces::trace_id(&span);
        if let Some(id) = &trace_id {
            span.record("trace_id", tracing::field::display(id));
            let attrs = vec![opentelemetry::KeyValue::new("object", key.to_string())];
            traces::backdated_child(&span, "queue.wait", std::time::SystemTime::now() - waited, attrs);
        }
        let mut flight = Flight::start(
            &plugin.info.name,
            &plugin.info.version,
            Some(digest),
            noting::obj(kind, key.namespace.as_deref(), &key.name),
        );
        flight.trace_id = trace_id;
        async move {
            let started = Instant::now();
            let (next, kept) = noting::scope(flight, self.reconcile_inner(key, plugin.clone())).await;
            let took = started.elapsed();
            self.shared
                .metrics
                .reconcile_seconds
                .get_or_create(&Metrics::plugin(&plugin.info.name))
                .observe(took.as_secs_f64());
            if let Some(mut f) = kept {
                f.duration_ms = took.as_secs_f64() * 1000.0;
                if let Next::After(d) = next {
                    f.requeue_after_ms = Some(d.as_millis() as u64);
                }
                tracing::Span::current().record("result", f.verdict.label());
                self.shared.flight.keep(f);
            }
            next
        }
        .instrument(span)
        .await
    }

    async fn reconcile_inner(self: &Arc<Self>, key: &ObjectKey, plugin: Arc<crate::plugin::LoadedPlugin>) -> Next {
        let name = plugin.info.name.as_str();
        let m = &self.shared.metrics;
        // Outside the namespaces the admin granted: not this plugin's to touch (but a deletion
        // is not left hanging on its finalizer: `controller::finalizing`).
        if !plugin.grants.namespaces.acts_on(key.namespace.as_deref()) {
            return self.outside_grants(key, &plugin).await;
        }
        // The primary is gone: nothing to do (what it owned by reference goes with it through
        // the garbage collector, as in sample-controller; what it owned by labels its
        // `finalize` deleted before).
        let Some(cached) = self.primary.get(key.namespace.as_deref(), &key.name) else {
            noting::discard();
            return Next::Done;
        };
        let uid = cached.uid().to_string();
        let ns = cached.namespace().map(str::to_string);
        // Sharded: only what this replica holds, and the part it is giving up drains first.
        let _held = match &self.shared.shard {
            Some(shard) => {
                let held = shard.enter().await;
                if !shard.holds(ns.as_deref(), &uid) {
                    noting::verdict(Verdict::Deferred { message: "another replica holds it (sharding)".into() });
                    return Next::Done;
                }
                // Its holding grew and the caches are relisting: they may lack what it owns.
                if !shard.caches_current(self.caches.listed()) {
                    noting::verdict(Verdict::Deferred { message: "this replica's caches are relisting".into() });
                    return Next::After(Duration::from_millis(500));
                }
                Some(held)
            }
            None => None,
        };
        let owner = Owner { uid: &uid, namespace: ns.as_deref(), name: &key.name, plugin: name };
        let seen = self.seen(&cached, &plugin);
        noting::note(|f| {
            let input = |kind: &str, o: &crate::watch::Cached, how: &str| Input {
                object: noting::obj(kind, o.namespace(), o.name()),
                resource_version: Some(o.resource_version().to_string()),
                how: how.into(),
            };
            f.inputs.push(input(&self.primary.resolved.gvk.kind, &cached, "primary"));
            f.inputs.extend(seen.objects().map(|(g, o)| input(&g.kind, o, "owned")));
        });
        // Being deleted: `finalize` if the plugin finalizes and its finalizer is still there;
        // otherwise it is left to its other finalizers (`controller::finalizing`).
        if cached.deleting() {
            noting::verdict(Verdict::Finalizing { message: "being deleted".into() });
            return self.deleting(key, &plugin, &cached, &seen).await;
        }
        // Our own last status write is not in the cache yet: its watch event brings a fresh view
        // (the delay is a safety net should that event be lost).
        let gvk = &self.primary.resolved.gvk;
        if self.applier.behind_own_status(gvk, ns.as_deref(), &key.name, cached.resource_version()) {
            m.result(name, "stale");
            noting::verdict(Verdict::Deferred { message: "kwop's own status write is not in its cache yet".into() });
            return Next::After(Duration::from_secs(2));
        }
        let mut view = RecordingCache::new(self.caches.clone(), ns.clone(), plugin.grants.clone());
        if self.shared.recorder.is_some() {
            view = view.keeping_answers();
        }
        // Nothing the last in-sync reconcile depended on changed: it would decide the same (`memo`).
        let memoize = self.memoizes(&plugin);
        let versions = memoize.then(|| RequestVersions::of(&cached, &seen));
        if let Some(v) = &versions {
            let hit = tracing::debug_span!("memo.check", hit = tracing::field::Empty).in_scope(|| {
                let hit = self.memo.unchanged(key, &plugin, v, &view);
                tracing::Span::current().record("hit", hit);
                hit
            });
            if hit {
                m.result(name, "unchanged");
                noting::verdict(Verdict::Memoized { since: crate::telemetry::flight::now(), checks: 1 });
                return Next::Done;
            }
        }
        // The cache holds each object as the JSON a plugin is given (`watch::object`).
        let req = Request {
            primary: cached.json().to_string(),
            owned: seen.objects().map(|(_, o)| o.json().to_string()).collect(),
        };
        let clock_read = Arc::new(AtomicBool::new(false));

        // The call: admitted against the engine's instance slots and memory budget, run on the
        // plugin runtime, ended at its deadline (see `plugin::call`).
        let (raw, reads) = {
            let spec = CallSpec {
                object: key.to_string(),
                uid: uid.clone(),
                resource_version: cached.resource_version().to_string(),
                started_at: std::time::SystemTime::now(),
                clock_read: Some(clock_read.clone()),
            };
            let view = Arc::new(view);
            // A candidate runs beside it on the same request, clock and caches (`shadow`).
            let watch = self.watch_call(&plugin, &req, &spec, ns.clone());
            let started = Instant::now();
            let call_span = tracing::debug_span!("plugin.call", world = %plugin.world(), digest = %plugin.sha256,
                duration_ms = tracing::field::Empty, memory_peak_bytes = tracing::field::Empty, result = tracing::field::Empty);
            let r = plugin.call(req, spec, view.clone() as Arc<dyn CacheView>).instrument(call_span.clone()).await;
            call_span.record(
                "result",
                match &r {
                    Err(e) => e.label(),
                    Ok(Err(_)) => "failure",
                    Ok(Ok(_)) => "ok",
                },
            );
            m.plugin_call_seconds.get_or_create(&Metrics::plugin(name)).observe(started.elapsed().as_secs_f64());
            // Whatever the call's result, what it read wakes this primary when it changes.
            let reads = view.take();
            noting::note(|f| f.inputs.extend(super::reads::inputs(&reads)));
            let kept = memoize.then(|| reads.clone());
            self.read_index().record(key, reads);
            if let Some(w) = watch {
                self.watched_call(key, &plugin, &r, w, &view);
            }
            (r, kept)
        };
        // From here on the whole primary is needed (events, the status comparison): parsed once.
        let primary = cached.object();

        let raw = match raw {
            Err(e) => {
                tracing::warn!("plugin call failed: {e}");
                noting::verdict(Verdict::Failed { stage: "call".into(), message: e.to_string() });
                m.plugin_errors.get_or_create(&Metrics::reason(name, e.label())).inc();
                m.result(name, "plugin_error");
                self.report(
                    &primary,
                    &[warning(REASON_PLUGIN_FAILED, format!("{} {}: {e}", name, plugin.info.version))],
                    false,
                )
                .await;
                return Next::Retry;
            }
            Ok(Err(f)) => {
                let f = outcome::decode_failure(f, &self.shared.config.outcome_limits);
                tracing::warn!(retry = f.retry, "plugin reported failure: {}", f.message);
                noting::verdict(Verdict::Failed { stage: "plugin".into(), message: f.message.clone() });
                m.result(name, "plugin_failure");
                let mut events = f.events;
                if !events.iter().any(|e| e.severity == Severity::Warning) {
                    events.push(warning(REASON_RECONCILE_FAILED, f.message));
                }
                self.report(&primary, &events, false).await;
                return if f.retry { Next::Retry } else { Next::Done };
            }
            Ok(Ok(o)) => o,
        };

        let outcome = match outcome::decode(raw, &self.shared.config.outcome_limits) {
            Ok(o) => o,
            Err(r) => return self.rejected(&primary, name, r).await,
        };
        let fenced = match self
            .fence(&primary, &plugin, &outcome, &uid, &seen)
            .instrument(tracing::debug_span!("fence"))
            .await
        {
            Ok(v) => v,
            Err(Ok(r)) => return self.rejected(&primary, name, r).await,
            Err(Err(e)) => return self.write_failed(&primary, name, "get", e).await,
        };
        // A finalizing plugin's finalizer is on the primary before anything is written for it
        // (and one left by an earlier, finalizing version is taken off).
        let mut wrote = match self.keep_finalizer(&primary, &plugin).await {
            Ok(w) => w,
            Err(next) => return next,
        };
        match self.write_all(&primary, &plugin, &owner, &outcome, &fenced).await {
            Ok(w) => wrote |= w,
            Err(next) => return next,
        }
        self.report(&primary, &outcome.events, wrote).await;
        m.result(name, "success");
        noting::verdict(Verdict::Synced);
        tracing::debug!(wrote, "reconciled");
        if let (Some(v), Some(reads)) = (versions, reads) {
            if !wrote && outcome.requeue_after.is_none() && !clock_read.load(Ordering::Relaxed) {
                self.memo.keep(key, &plugin, v, reads);
            }
        }
        match outcome.requeue_after {
            Some(d) => Next::After(d),
            None => Next::Done,
        }
    }

    /// Runs the write fence. Objects the cache has not seen are read from the API server first,
    /// so a lagging cache can never make the fence allow a write over someone else's object.
    pub(super) async fn fence(
        &self,
        primary: &DynamicObject,
        plugin: &LoadedPlugin,
        outcome: &Outcome,
        uid: &str,
        seen: &Seen<'_>,
    ) -> Result<Fenced, Result<Rejection, kube::Error>> {
        let info = &plugin.info;
        let caches = &self.caches;
        let namespaced = |g: &crate::vocab::Gvk| caches.kind(g).map(|k| k.resolved.namespaced).unwrap_or(true);
        let observed = |g: &crate::vocab::Gvk, ns: Option<&str>, n: &str| {
            caches.kind(g)?.get(ns, n).and_then(|o| serde_json::from_str(o.json()).ok())
        };
        let ctx = FenceContext {
            info,
            primary_namespace: primary.metadata.namespace.as_deref(),
            primary_uid: uid,
            granted: &plugin.grants.namespaces,
            namespaced: &namespaced,
            observed: &observed,
        };
        let outcome::fence::Namespaces { apply: apply_ns, delete: delete_ns } =
            outcome::fence(outcome, &ctx).map_err(Ok)?;

        let mut observed_apply = Vec::with_capacity(outcome.apply.len());
        for (intent, ns) in outcome.apply.iter().zip(&apply_ns) {
            let Some(kind) = caches.kind(&intent.gvk) else {
                observed_apply.push(None);
                continue;
            };
            let cached = kind.get(ns.as_deref(), &intent.name).map(|o| o.object());
            let o = match cached {
                Some(o) => Some(o),
                None => {
                    let live = self.applier.get_live(&kind.resolved, ns.as_deref(), &intent.name).await.map_err(Err)?;
                    if let Some(l) = &live {
                        let v = serde_json::to_value(l).unwrap_or_default();
                        if !tracking::belongs(&v, uid, &info.name) {
                            return Err(Ok(Rejection {
                                reason: RejectReason::NotControlled,
                                message: format!(
                                    "apply {} {:?} exists and is {}, not this {}'s",
                                    intent.gvk.kind,
                                    intent.name,
                                    tracking::describe(&v),
                                    self.primary.resolved.gvk.kind
                                ),
                            }));
                        }
                    }
                    live
                }
            };
            observed_apply.push(o);
        }
        let observed_delete = outcome
            .delete
            .iter()
            .zip(&delete_ns)
            .map(|(d, ns)| {
                let cached = caches.kind(&d.gvk).and_then(|k| k.get(ns.as_deref(), &d.name)).map(|o| o.object());
                seen.as_seen(&d.gvk, ns.as_deref(), &d.name, cached)
            })
            .collect();
        Ok(Fenced { apply_ns, observed_apply, delete_ns, observed_delete })
    }

    async fn rejected(&self, primary: &DynamicObject, plugin: &str, r: Rejection) -> Next {
        tracing::warn!(reason = r.reason.label(), "outcome rejected, nothing written: {}", r.message);
        noting::verdict(Verdict::Rejected { reason: r.reason.label().into(), message: r.message.clone() });
        self.shared.metrics.rejected.get_or_create(&Metrics::reason(plugin, r.reason.label())).inc();
        self.shared.metrics.result(plugin, "rejected");
        self.report(primary, &[warning(REASON_OUTCOME_REJECTED, format!("nothing written: {}", r.message))], false)
            .await;
        // The same plugin will likely decide the same again: back off (a swap re-queues anyway).
        Next::Retry
    }

    pub(super) async fn report(&self, primary: &DynamicObject, events: &[EventSpec], wrote: bool) {
        if events.is_empty() {
            return;
        }
        let selected = self.events.select(primary, events, wrote);
        if selected.is_empty() {
            return;
        }
        noting::note(|f| {
            let line = |e: &kube::runtime::events::Event| {
                format!("{:?} {}: {}", e.type_, e.reason, e.note.as_deref().unwrap_or(""))
            };
            f.events.extend(selected.iter().map(line));
        });
        let trace_id = traces::current_trace_id();
        let span = tracing::debug_span!("events", count = selected.len());
        let Ok(slot) = self.event_slots.clone().acquire_owned().await else {
            return; // closed: never happens (the semaphore is never closed)
        };
        let reference = primary.object_ref(&self.primary.resolved.resource);
        let (sink, metrics) = (self.events.clone(), self.shared.metrics.clone());
        let plugin = self.plugin.load().info.name.clone();
        self.event_tasks.spawn(
            async move {
                let n = sink.publish(&reference, &selected, trace_id.as_deref()).await;
                if n > 0 {
                    metrics.events.get_or_create(&Metrics::plugin(&plugin)).inc_by(n as u64);
                }
                drop(slot);
            }
            .instrument(span),
        );
    }
}
