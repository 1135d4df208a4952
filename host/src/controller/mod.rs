//! One controller per plugin: its view of the shared caches, its queue, its workers.
//!
//! Start-up follows sample-controller's `Run`: subscribe to the watches, wait for every cache to be
//! listed once, then start the workers. A plugin swap with the same kinds replaces the plugin
//! between reconciles (in-flight ones finish on the old version) and re-queues every primary at
//! a bounded rate; a swap that changes kinds stops this controller and starts a new one.
//! What wakes a primary and the workers' loop are in `wake.rs`; one reconcile in `reconcile.rs`.
//!
//! Floor 11 of 0–15 (`docs/ARCHITECTURE.md`). May use: `admission`, `apply`, `leader`, `outcome`,
//! `plugin`, `report`, `shadow`, `shard`, `telemetry`, `vocab`, `watch`. Used by: `cli`, `hotswap`.

mod access;
mod finalizing;
mod memo;
mod noting;
mod pacer;
pub mod queue;
pub mod reads;
mod reconcile;
mod resync;
mod seen;
mod shadowing;
mod wake;
mod writes;

use crate::apply::Applier;
use crate::outcome::OutcomeLimits;
use crate::plugin::LoadedPlugin;
use crate::report::EventSink;
use crate::telemetry::{health::PluginStatus, Health, Metrics};
use crate::vocab::Gvk;
use crate::watch::{self, Caches, KindCache, ObjectKey};
use arc_swap::ArcSwap;
use kube::Client;
use queue::{Queue, RateLimit};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Settings shared by every controller.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Concurrent reconciles per plugin.
    pub workers: usize,
    /// Every primary is re-queued this often (level-triggered safety net; costs no writes when in
    /// sync); zero turns the resync off, as in client-go.
    pub resync: Duration,
    /// Skip the plugin while nothing a primary's last in-sync reconcile depended on changed
    /// (see [`memo`]).
    pub memoize: bool,
    /// Re-queue rate (objects/s) after a swap, a resync or a relist, per plugin.
    pub requeue_rate: f64,
    /// Watch only this namespace.
    pub namespace: Option<String>,
    /// Outcome caps.
    pub outcome_limits: OutcomeLimits,
    /// Retry backoff.
    pub rate_limit: RateLimit,
    /// Name of this host instance, for events.
    pub instance: Option<String>,
    /// How long a stopping controller waits for its reconciles before abandoning them.
    pub shutdown_grace: Duration,
    /// How long a deletion may wait on a `finalize` that keeps saying not yet before the host
    /// says so on the primary.
    pub finalize_patience: Duration,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            workers: 4,
            resync: Duration::from_secs(300),
            memoize: true,
            requeue_rate: 200.0,
            namespace: None,
            outcome_limits: OutcomeLimits::default(),
            rate_limit: RateLimit::default(),
            instance: None,
            shutdown_grace: Duration::from_secs(10),
            finalize_patience: crate::vocab::finalize::PATIENCE,
        }
    }
}

/// What every controller shares.
pub struct Shared {
    /// API client.
    pub client: Client,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Health.
    pub health: Arc<Health>,
    /// Settings.
    pub config: ControllerConfig,
    /// Candidates run in shadow, by plugin key (read by the ReconcilerPlugin source).
    pub candidates: Arc<crate::shadow::stats::Registry>,
    /// Records every reconcile as a fixture (`--record`).
    pub recorder: Option<Arc<crate::shadow::record::Recorder>>,
    /// The last reconciles of each primary, for `kwop explain` (`/explain`).
    pub flight: Arc<crate::telemetry::flight::FlightRecorder>,
    /// The host's caches, one per kind, shared by every plugin.
    pub pool: Arc<crate::watch::Pool>,
    /// The plugins that validate, when the host serves admission (`--webhook-bind-address`).
    pub admission: Option<Arc<crate::admission::Registry>>,
    /// This replica's part of the primaries, when the host is sharded (`--sharding`).
    pub shard: Option<Arc<crate::shard::Shard>>,
}

/// Why a controller could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A declared kind is not served.
    #[error(transparent)]
    Discovery(#[from] crate::watch::discovery::DiscoveryError),
    /// The host's own RBAC does not allow what the plugin needs.
    #[error("{0}")]
    Forbidden(String),
}

/// Events being published at once per plugin (beyond that, reconciles wait: back-pressure).
const EVENTS_IN_FLIGHT: usize = 64;
/// How long a stopping controller waits for its pending events.
const EVENT_FLUSH: Duration = Duration::from_secs(5);

pub(crate) struct Inner {
    pub(crate) file: String,
    pub(crate) plugin: ArcSwap<LoadedPlugin>,
    pub(crate) caches: Arc<Caches>,
    pub(crate) primary: Arc<KindCache>,
    pub(crate) queue: Arc<Queue<ObjectKey>>,
    pub(crate) applier: Applier,
    pub(crate) events: Arc<EventSink>,
    /// Events are published off the reconcile path (like client-go's broadcaster), at most
    /// [`EVENTS_IN_FLIGHT`] at once; a reconcile waits only when that many are pending.
    pub(crate) event_slots: Arc<Semaphore>,
    pub(crate) event_tasks: TaskTracker,
    pub(crate) shared: Arc<Shared>,
    /// No new reconciles.
    pub(crate) stop: CancellationToken,
    /// Reconciles still running when the grace is over are dropped where they are.
    abandon: CancellationToken,
    pacer: pacer::Pacer<ObjectKey>,
    /// What each primary's last reconcile read (reads trigger reconciles).
    pub(crate) reads: std::sync::Mutex<reads::ReadIndex>,
    /// Each primary's last in-sync reconcile, to skip the plugin while nothing changed.
    memo: memo::Memo,
    /// Primaries whose finalizer this controller took off, with the resourceVersion it was
    /// taken off at (until the watch sees them go).
    pub(crate) finalized: std::sync::Mutex<std::collections::HashMap<ObjectKey, String>>,
}

/// A running controller.
pub struct Controller {
    inner: Arc<Inner>,
    tasks: TaskTracker,
    workers: TaskTracker,
}

impl Controller {
    /// Resolves the plugin's kinds, starts its watches, and its workers once caches are synced.
    pub async fn start(shared: Arc<Shared>, file: String, plugin: Arc<LoadedPlugin>) -> Result<Self, StartError> {
        let info = plugin.info.clone();
        let ns = shared.config.namespace.clone();
        let mut caches = Caches::default();
        let mut streams = Vec::new();
        let kinds: Vec<(Gvk, Role)> = std::iter::once((info.primary.clone(), Role::Primary))
            .chain(info.owns.iter().map(|g| (g.clone(), Role::Owned)))
            .chain(info.reads.iter().map(|g| (g.clone(), Role::Read)))
            .collect();
        let mut resolved = Vec::with_capacity(kinds.len());
        for (gvk, role) in &kinds {
            resolved.push((watch::resolve(&shared.client, gvk).await?, *role));
        }
        let needs = access::needed(&resolved, ns.as_deref(), &plugin.grants.namespaces, info.finalizes);
        if let Some(denied) = access::first_denied(&shared.client, &needs).await {
            return Err(StartError::Forbidden(denied));
        }
        let primary_namespaced = resolved.first().is_some_and(|(r, _)| r.namespaced);
        for ((gvk, role), (resolved, _)) in kinds.iter().zip(resolved) {
            let reach = access::reach(*role, primary_namespaced, info.owns_across(gvk), &plugin.grants.namespaces);
            let sub = shared.pool.subscribe(resolved, reach);
            caches.insert(sub.cache.clone());
            streams.push((*role, gvk.clone(), sub));
        }
        let caches = Arc::new(caches);
        let primary = caches.kind(&info.primary).cloned().ok_or_else(|| unreachable_discovery(&info.primary))?;
        let inner = Arc::new(Inner {
            file: file.clone(),
            applier: Applier::new(shared.client.clone(), info.field_manager()),
            events: Arc::new(EventSink::new(
                shared.client.clone(),
                info.field_manager(),
                shared.config.instance.clone(),
            )),
            event_slots: Arc::new(Semaphore::new(EVENTS_IN_FLIGHT)),
            event_tasks: TaskTracker::new(),
            plugin: ArcSwap::new(plugin.clone()),
            caches,
            primary,
            queue: Arc::new(Queue::new(shared.config.rate_limit.clone())),
            shared: shared.clone(),
            stop: CancellationToken::new(),
            abandon: CancellationToken::new(),
            pacer: pacer::Pacer::new(shared.config.requeue_rate),
            reads: std::sync::Mutex::new(reads::ReadIndex::default()),
            memo: memo::Memo::default(),
            finalized: std::sync::Mutex::new(std::collections::HashMap::new()),
        });
        publish_info(&shared, &file, &plugin, false);
        let tasks = TaskTracker::new();
        for (role, gvk, mut sub) in streams {
            let inner = inner.clone();
            // The subscription keeps the shared watch alive while this controller runs.
            tasks.spawn(async move {
                loop {
                    tokio::select! {
                        _ = inner.stop.cancelled() => return,
                        ev = sub.events.recv() => match ev {
                            Some(ev) => inner.on_watch_event(role, &gvk, ev),
                            None => return,
                        },
                    }
                }
            });
        }
        let workers = TaskTracker::new();
        {
            let inner = inner.clone();
            let workers = workers.clone();
            tasks.spawn(async move { inner.run(workers).await });
        }
        {
            let inner = inner.clone();
            tasks.spawn(async move { inner.pacer.run(&inner.queue, &inner.stop).await });
        }
        tracing::info!(plugin = %info.name, version = %info.version, sha256 = %plugin.sha256, file = %file, primary = %info.primary, "controller started");
        Ok(Controller { inner, tasks, workers })
    }

    /// The active plugin.
    pub fn plugin(&self) -> Arc<LoadedPlugin> {
        self.inner.plugin.load_full()
    }

    /// Swaps in a new version with the same kinds; every primary is reconciled again.
    pub fn swap(&self, next: Arc<LoadedPlugin>) {
        let prev = self.inner.plugin.swap(next.clone());
        let m = &self.inner.shared.metrics;
        remove_info(&self.inner.shared, &self.inner.file, &prev);
        publish_info(&self.inner.shared, &self.inner.file, &next, self.inner.caches.ready());
        m.swaps.get_or_create(&Metrics::plugin(&next.info.name)).inc();
        tracing::info!(plugin = %next.info.name, from_version = %prev.info.version, to_version = %next.info.version,
            from_sha256 = %prev.sha256, to_sha256 = %next.sha256, "plugin swapped; reconciling every object with the new version");
        self.inner.requeue_all();
    }

    /// Stops within `grace`: no new reconciles; in-flight ones get until the grace is over, then
    /// are abandoned where they are (a plugin call is aborted, a write request dropped: the next
    /// leader or version reconciles again, level-triggered); watches end. Deletes nothing.
    pub async fn stop(self, grace: Duration) {
        let plugin = self.inner.plugin.load_full();
        let until = tokio::time::Instant::now() + grace;
        self.inner.stop.cancel();
        self.inner.queue.shutdown();
        self.workers.close();
        if tokio::time::timeout_at(until, self.workers.wait()).await.is_err() {
            let calls = self.workers.len();
            tracing::warn!(plugin = %plugin.info.name, file = %self.inner.file, calls, "reconciles still running after the shutdown grace of {grace:?}; abandoned");
            self.inner.abandon.cancel();
            self.workers.wait().await;
        }
        self.tasks.close();
        self.tasks.wait().await;
        // Pending events are still sent within what is left of the grace (and at most
        // EVENT_FLUSH); an unreachable API server does not hold up the stop.
        self.inner.event_tasks.close();
        let flush = until.min(tokio::time::Instant::now() + EVENT_FLUSH);
        if tokio::time::timeout_at(flush, self.inner.event_tasks.wait()).await.is_err() {
            tracing::warn!(file = %self.inner.file, "events still pending at the end of the grace; dropped");
        }
        remove_info(&self.inner.shared, &self.inner.file, &plugin);
        self.inner.shared.metrics.queue_depth.remove(&Metrics::plugin(&plugin.info.name));
        tracing::info!(plugin = %plugin.info.name, file = %self.inner.file, "controller stopped");
    }
}

fn unreachable_discovery(g: &Gvk) -> StartError {
    // The primary was inserted above; this cannot happen, but an error beats a panic.
    StartError::Discovery(crate::watch::discovery::DiscoveryError::missing(g))
}

fn publish_info(shared: &Shared, file: &str, p: &LoadedPlugin, synced: bool) {
    shared.metrics.plugin_info.get_or_create(&info_labels(file, p)).set(1);
    shared.health.set_plugin(
        file,
        PluginStatus {
            name: p.info.name.clone(),
            version: p.info.version.clone(),
            sha256: p.sha256.clone(),
            file: file.to_string(),
            primary: p.info.primary.to_string(),
            world: p.world().to_string(),
            finalizes: p.info.finalizes,
            synced,
            last_error: None,
            stopping: false,
        },
    );
}

fn remove_info(shared: &Shared, file: &str, p: &LoadedPlugin) {
    shared.metrics.plugin_info.remove(&info_labels(file, p));
}

fn info_labels(file: &str, p: &LoadedPlugin) -> crate::telemetry::metrics::InfoLabels {
    crate::telemetry::metrics::InfoLabels {
        plugin: p.info.name.clone(),
        version: p.info.version.clone(),
        sha256: p.sha256.clone(),
        file: file.to_string(),
    }
}

/// How a watched kind relates to the plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Primary,
    Owned,
    Read,
}
