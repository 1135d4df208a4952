//! Knowing what a new version would do before it writes anything: a candidate component run in
//! shadow beside the active one on the same inputs (`ReconcilerPlugin.spec.candidate`), and
//! reconciles recorded as fixtures (`kwop run --record DIR`) that `kwop plugin replay` runs again.
//!
//! Both rest on determinism: a plugin sees only its request, the cache, and a clock and random
//! bytes fixed per call (`plugin::wasi`), so the same inputs give the same outcome. A candidate
//! gets the active call's request and call spec (so the same clock), and reads the same caches
//! (at the same moment, or a little later when it waits for a slot); its random bytes are its
//! own (they are seeded with the plugin's digest).

pub mod compare;
pub mod record;
pub mod stats;

use crate::outcome::OutcomeLimits;
use crate::plugin::{CacheView, CallSpec, LoadedPlugin, Request, Shadow, ShadowCall};
use crate::telemetry::Metrics;
use serde_json::Value;
use stats::{Stats, Verdict};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// Candidate calls waiting for a slot, per plugin. Beyond that a reconcile is not shadowed
/// (counted as skipped): a slow candidate never slows the active version down, nor piles up.
pub const MAX_WAITING: usize = 256;

/// A candidate attached to the active version it shadows.
pub struct Candidate {
    /// The candidate component, loaded under the active version's grants and limits.
    pub plugin: Arc<LoadedPlugin>,
    /// What it did so far.
    pub stats: Arc<Stats>,
    slots: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
    /// The outcome caps its results are decoded with (the controllers').
    limits: OutcomeLimits,
    /// Where verdicts are counted.
    metrics: Arc<Metrics>,
    /// The name of the active version it shadows, for logs and metrics.
    active: String,
}

impl Candidate {
    /// A candidate counting into `stats`, running at most `concurrency` calls at once (the
    /// active version's own concurrency: a candidate as fast as it keeps up), its results decoded
    /// under `limits` and its verdicts counted in `metrics` under the `active` version's name.
    pub fn new(
        plugin: Arc<LoadedPlugin>,
        stats: Arc<Stats>,
        concurrency: usize,
        limits: OutcomeLimits,
        metrics: Arc<Metrics>,
        active: String,
    ) -> Self {
        let slots = Arc::new(Semaphore::new(concurrency.max(1)));
        Candidate { plugin, stats, slots, waiting: Arc::new(AtomicUsize::new(0)), limits, metrics, active }
    }
}

impl Shadow for Candidate {
    /// Starts the candidate's call on the active call's request and call spec: at once if a slot
    /// is free, else once one is (unless [`MAX_WAITING`] calls already wait: then skipped).
    fn begin(
        self: Arc<Self>,
        req: &Request,
        spec: &CallSpec,
        view: Arc<dyn CacheView>,
    ) -> Option<Box<dyn ShadowCall>> {
        if self.waiting.fetch_add(1, Ordering::Relaxed) >= MAX_WAITING {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            self.stats.record(&spec.object, Verdict::Skipped);
            return None;
        }
        let (plugin, req, spec) = (self.plugin.clone(), req.clone(), spec.clone());
        let (slots, waiting, limits) = (self.slots.clone(), self.waiting.clone(), self.limits.clone());
        let task = tokio::spawn(async move {
            let permit = slots.acquire_owned().await;
            waiting.fetch_sub(1, Ordering::Relaxed);
            let r = plugin.call(req, spec, view).await;
            drop(permit);
            compare::result_json(&r, &limits)
        });
        Some(Box::new(Pending { candidate: self, task }))
    }
}

/// A candidate call under way.
pub struct Pending {
    candidate: Arc<Candidate>,
    task: JoinHandle<Value>,
}

impl ShadowCall for Pending {
    /// Compares the candidate's outcome, once it is there, with the active one's (`active`, in
    /// [`compare::result_json`]'s form), and counts the verdict. Never waits.
    fn finish(self: Box<Self>, object: String, active: Value) {
        let (metrics, plugin) = (self.candidate.metrics.clone(), self.candidate.active.clone());
        tokio::spawn(async move {
            let got = match self.task.await {
                Ok(v) => v,
                Err(e) => compare::error_json(&format!("candidate task failed: {e}"), true),
            };
            let verdict = compare::verdict(&active, &got);
            match &verdict {
                Verdict::Differing(paths) => {
                    tracing::info!(plugin, object, differences = paths.len(), first = %paths.first().map(String::as_str).unwrap_or(""), "candidate differs")
                }
                Verdict::Failing(m) => tracing::info!(plugin, object, "candidate failed: {m}"),
                _ => tracing::debug!(plugin, object, "candidate agrees"),
            }
            metrics.shadow.get_or_create(&Metrics::reason(&plugin, verdict.label())).inc();
            self.candidate.stats.record(&object, verdict);
        });
    }
}
