//! Prometheus metrics, one struct passed around (no globals).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// `plugin`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabel {
    /// Plugin name.
    pub plugin: String,
}

/// `plugin`, `result`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// Plugin name.
    pub plugin: String,
    /// `success`, `unchanged` (memoized: the plugin was not called), `stale` (the cache has not
    /// seen the host's own last status write yet: not called, its watch event reconciles again),
    /// `plugin_failure`, `plugin_error`, `rejected`, `write_error`.
    pub result: String,
}

/// `plugin`, `reason`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// Plugin name.
    pub plugin: String,
    /// Why.
    pub reason: String,
}

/// `plugin`, `kind`, `op`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// Plugin name.
    pub plugin: String,
    /// Kind written.
    pub kind: String,
    /// `apply`, `status`, `delete`.
    pub op: String,
}

/// `plugin`, `version`, `sha256`, `file`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InfoLabels {
    /// Plugin name.
    pub plugin: String,
    /// Version from `info()`.
    pub version: String,
    /// sha256 of the component.
    pub sha256: String,
    /// File name.
    pub file: String,
}

/// `kind`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// Group/version/kind.
    pub kind: String,
}

/// `file`, `reason`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LoadLabels {
    /// File name.
    pub file: String,
    /// Why it was rejected.
    pub reason: String,
}

/// `reconcilerplugin`, `condition`, `reason`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConditionLabels {
    /// The ReconcilerPlugin's name.
    pub reconcilerplugin: String,
    /// `Ready` or `Degraded`.
    pub condition: String,
    /// The condition's reason.
    pub reason: String,
}

fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.5, 16))
}

/// Every metric the host exports.
pub struct Metrics {
    /// The registry they are in.
    pub registry: Registry,
    /// Reconciles by result.
    pub reconciles: Family<ResultLabels, Counter>,
    /// Reconcile wall time (plugin call + writes).
    pub reconcile_seconds: Family<PluginLabel, Histogram, fn() -> Histogram>,
    /// Plugin call time only.
    pub plugin_call_seconds: Family<PluginLabel, Histogram, fn() -> Histogram>,
    /// Plugin call failures (trap, deadline, out_of_memory, instantiate).
    pub plugin_errors: Family<ReasonLabels, Counter>,
    /// Outcomes refused by the write fence.
    pub rejected: Family<ReasonLabels, Counter>,
    /// Writes sent to the API server.
    pub writes: Family<WriteLabels, Counter>,
    /// Writes skipped because the object already matched.
    pub writes_skipped: Family<WriteLabels, Counter>,
    /// API errors on writes, by HTTP status.
    pub write_errors: Family<ReasonLabels, Counter>,
    /// Events published.
    pub events: Family<PluginLabel, Counter>,
    /// Keys waiting in the queue.
    pub queue_depth: Family<PluginLabel, Gauge>,
    /// Active plugin version (value 1).
    pub plugin_info: Family<InfoLabels, Gauge>,
    /// Plugin files rejected at load.
    pub load_failures: Family<LoadLabels, Counter>,
    /// Successful swaps to a new plugin version.
    pub swaps: Family<PluginLabel, Counter>,
    /// 1 while this instance holds the leader lease (or runs without election).
    pub leader: Gauge,
    /// Plugin calls running now.
    pub calls_in_flight: Family<PluginLabel, Gauge>,
    /// Plugin calls running past their deadline plus the grace (see `/healthz`).
    pub calls_stuck: Family<PluginLabel, Gauge>,
    /// Bytes of the plugin memory budget held by running calls.
    pub memory_reserved: Gauge,
    /// The plugin memory budget in bytes (0: unbounded).
    pub memory_budget: Gauge,
    /// Writes refused because this replica is not (or no longer surely) the leader.
    pub writes_refused_not_leader: Counter,
    /// Shadowed reconciles by verdict (identical, differing, failing, skipped).
    pub shadow: Family<ReasonLabels, Counter>,
    /// Reconciles recorded (`--record`).
    pub recorded: Family<PluginLabel, Counter>,
    /// Plugins subscribed to the host's one cache of a kind.
    pub cache_plugins: Family<KindLabel, Gauge>,
    /// Objects in the host's cache of a kind.
    pub cached_objects: Family<KindLabel, Gauge>,
    /// `finalize` calls of primaries being deleted, by result (`done`, `pending`, `error`,
    /// `failure`, `rejected`).
    pub finalize: Family<ResultLabels, Counter>,
    /// Admission requests answered, by plugin and result (`allowed`, `denied`, `error`,
    /// `error_ignored`).
    pub admission: Family<ResultLabels, Counter>,
    /// Time to answer an admission request.
    pub admission_seconds: Family<PluginLabel, Histogram, fn() -> Histogram>,
    /// Mutation requests answered, by result.
    pub mutation: Family<ResultLabels, Counter>,
    /// Time to answer a mutation request.
    pub mutation_seconds: Family<PluginLabel, Histogram, fn() -> Histogram>,
    /// Conversion requests (ConversionReviews) answered, by result (`converted`, `failed`, `busy`).
    pub conversion: Family<ResultLabels, Counter>,
    /// Time to answer a conversion request.
    pub conversion_seconds: Family<PluginLabel, Histogram, fn() -> Histogram>,
    /// Sampled conversions that did not round-trip (A → B → A did not give A back).
    pub conversion_round_trip_failures: Family<PluginLabel, Counter>,
    /// Objects a watch received outside this replica's shard (dropped; none when the API server
    /// slices the watch).
    pub shard_outside: Family<KindLabel, Counter>,
    /// The part of the hash space this replica holds, in parts per million.
    pub shard_range_ppm: Gauge,
    /// The part of the hash space the ring assigns this replica and it does not hold (its member
    /// Lease lapsed, or not confirmed since), in parts per million: nobody reconciles there.
    pub shard_unheld_ppm: Gauge,
    /// Live members of the shard ring, as this replica last counted.
    pub shard_members: Gauge,
    /// Each ReconcilerPlugin's conditions as the cluster has them: 1 True, 0 False.
    pub reconcilerplugin_conditions: Family<ConditionLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// All metrics, registered under `kwop_`.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("kwop");
        let m = Metrics {
            reconciles: Family::default(),
            reconcile_seconds: Family::new_with_constructor(seconds_histogram),
            plugin_call_seconds: Family::new_with_constructor(seconds_histogram),
            plugin_errors: Family::default(),
            rejected: Family::default(),
            writes: Family::default(),
            writes_skipped: Family::default(),
            write_errors: Family::default(),
            events: Family::default(),
            queue_depth: Family::default(),
            plugin_info: Family::default(),
            load_failures: Family::default(),
            swaps: Family::default(),
            leader: Gauge::default(),
            calls_in_flight: Family::default(),
            calls_stuck: Family::default(),
            memory_reserved: Gauge::default(),
            memory_budget: Gauge::default(),
            writes_refused_not_leader: Counter::default(),
            shadow: Family::default(),
            recorded: Family::default(),
            cache_plugins: Family::default(),
            cached_objects: Family::default(),
            finalize: Family::default(),
            admission: Family::default(),
            admission_seconds: Family::new_with_constructor(seconds_histogram),
            mutation: Family::default(),
            mutation_seconds: Family::new_with_constructor(seconds_histogram),
            conversion: Family::default(),
            conversion_seconds: Family::new_with_constructor(seconds_histogram),
            conversion_round_trip_failures: Family::default(),
            shard_outside: Family::default(),
            shard_range_ppm: Gauge::default(),
            shard_unheld_ppm: Gauge::default(),
            shard_members: Gauge::default(),
            reconcilerplugin_conditions: Family::default(),
            registry: Registry::default(),
        };
        registry.register("reconcile", "Reconciles by result", m.reconciles.clone());
        registry.register("reconcile_duration_seconds", "Reconcile wall time", m.reconcile_seconds.clone());
        registry.register("plugin_call_duration_seconds", "Time inside the plugin", m.plugin_call_seconds.clone());
        registry.register(
            "plugin_errors",
            "Plugin calls that trapped, timed out or ran out of memory",
            m.plugin_errors.clone(),
        );
        registry.register("outcomes_rejected", "Outcomes refused by the write fence", m.rejected.clone());
        registry.register("writes", "Write requests sent to the API server", m.writes.clone());
        registry.register(
            "writes_skipped",
            "Writes skipped because the object already matched",
            m.writes_skipped.clone(),
        );
        registry.register(
            "write_errors",
            "Write requests the API server refused, by HTTP status",
            m.write_errors.clone(),
        );
        registry.register("events", "Events published", m.events.clone());
        registry.register("queue_depth", "Objects waiting to be reconciled", m.queue_depth.clone());
        registry.register("plugin_info", "Active plugin version", m.plugin_info.clone());
        registry.register("plugin_load_failures", "Plugin files rejected at load", m.load_failures.clone());
        registry.register("plugin_swaps", "Plugin versions swapped in", m.swaps.clone());
        registry.register("leader", "1 while this instance is the leader", m.leader.clone());
        registry.register("plugin_calls_in_flight", "Plugin calls running now", m.calls_in_flight.clone());
        registry.register(
            "plugin_calls_stuck",
            "Plugin calls still running past their deadline plus the grace",
            m.calls_stuck.clone(),
        );
        registry.register(
            "plugin_memory_reserved_bytes",
            "Plugin memory budget held by running calls",
            m.memory_reserved.clone(),
        );
        registry.register("plugin_memory_budget_bytes", "Plugin memory budget (0: unbounded)", m.memory_budget.clone());
        registry.register(
            "writes_refused_not_leader",
            "Writes refused because this replica was not surely the leader",
            m.writes_refused_not_leader.clone(),
        );
        registry.register(
            "candidate_reconciles",
            "Reconciles a candidate ran in shadow, by verdict (reason label)",
            m.shadow.clone(),
        );
        registry.register("reconciles_recorded", "Reconciles recorded as fixtures (--record)", m.recorded.clone());
        registry.register(
            "cache_plugins",
            "Plugins sharing the host's one cache (and watch) of a kind",
            m.cache_plugins.clone(),
        );
        registry.register("cached_objects", "Objects in the host's cache of a kind", m.cached_objects.clone());
        registry.register(
            "finalize",
            "finalize calls for primaries being deleted, by result (done, pending, error, failure, rejected)",
            m.finalize.clone(),
        );
        registry.register(
            "admission_requests",
            "Admission requests answered, by result (allowed, denied, error, error_ignored)",
            m.admission.clone(),
        );
        registry.register(
            "admission_duration_seconds",
            "Time to answer an admission request",
            m.admission_seconds.clone(),
        );
        registry.register(
            "mutation_requests",
            "Mutation requests answered, by result (mutated, unchanged, denied, error, error_ignored, busy)",
            m.mutation.clone(),
        );
        registry.register("mutation_duration_seconds", "Time to answer a mutation request", m.mutation_seconds.clone());
        registry.register(
            "conversion_requests",
            "CRD conversion requests answered, by result (converted, failed, busy)",
            m.conversion.clone(),
        );
        registry.register(
            "conversion_duration_seconds",
            "Time to answer a CRD conversion request",
            m.conversion_seconds.clone(),
        );
        registry.register(
            "conversion_round_trip_failures",
            "Sampled CRD conversions that did not round-trip (converted back, the object differed)",
            m.conversion_round_trip_failures.clone(),
        );
        registry.register(
            "watch_objects_outside_shard",
            "Objects a watch received outside this replica's shard and dropped (none when the API server slices watches)",
            m.shard_outside.clone(),
        );
        registry.register(
            "shard_range_ppm",
            "Part of the hash space this replica holds, in parts per million",
            m.shard_range_ppm.clone(),
        );
        registry.register(
            "shard_unheld_ppm",
            "Part of the hash space the shard ring assigns this replica and it does not hold, in parts per million",
            m.shard_unheld_ppm.clone(),
        );
        registry.register("shard_members", "Live members of the shard ring", m.shard_members.clone());
        registry.register(
            "reconcilerplugin_condition",
            "ReconcilerPlugin conditions (Ready, Degraded) as the cluster has them, by reason: 1 True, 0 False",
            m.reconcilerplugin_conditions.clone(),
        );
        Metrics { registry, ..m }
    }

    /// Sets the call, memory and ReconcilerPlugin condition gauges from what is now (at each
    /// scrape).
    pub fn refresh_calls(&self, health: &crate::telemetry::Health) {
        let counts = health.call_counts();
        self.calls_in_flight.clear();
        self.calls_stuck.clear();
        for (plugin, c) in counts {
            let l = Self::plugin(&plugin);
            self.calls_in_flight.get_or_create(&l).set(c.in_flight as i64);
            self.calls_stuck.get_or_create(&l).set(c.stuck as i64);
        }
        let (budget, reserved) = health.memory();
        self.memory_budget.set(budget.unwrap_or(0) as i64);
        self.memory_reserved.set(reserved as i64);
        self.reconcilerplugin_conditions.clear();
        for c in health.reconcilerplugin_conditions() {
            let l = ConditionLabels { reconcilerplugin: c.reconcilerplugin, condition: c.condition, reason: c.reason };
            self.reconcilerplugin_conditions.get_or_create(&l).set(i64::from(c.status));
        }
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut s = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut s, &self.registry);
        s
    }

    /// Label helper.
    pub fn kind(k: &str) -> KindLabel {
        KindLabel { kind: k.to_string() }
    }

    /// Label helper.
    pub fn plugin(p: &str) -> PluginLabel {
        PluginLabel { plugin: p.to_string() }
    }

    /// Label helper.
    pub fn reason(p: &str, r: &str) -> ReasonLabels {
        ReasonLabels { plugin: p.to_string(), reason: r.to_string() }
    }

    /// Label helper.
    pub fn write(p: &str, kind: &str, op: &str) -> WriteLabels {
        WriteLabels { plugin: p.to_string(), kind: kind.to_string(), op: op.to_string() }
    }

    /// Label helper.
    pub fn result_labels(p: &str, r: &str) -> ResultLabels {
        ResultLabels { plugin: p.to_string(), result: r.to_string() }
    }

    /// Counts a `finalize` result.
    pub fn finalized(&self, p: &str, r: &str) {
        self.finalize.get_or_create(&ResultLabels { plugin: p.to_string(), result: r.to_string() }).inc();
    }

    /// Counts a reconcile result.
    pub fn result(&self, p: &str, r: &str) {
        self.reconciles.get_or_create(&ResultLabels { plugin: p.to_string(), result: r.to_string() }).inc();
    }

    /// Counts `n` reconcile results at once (a resync's in-place memo hits).
    pub fn results(&self, p: &str, r: &str, n: u64) {
        if n > 0 {
            self.reconciles.get_or_create(&ResultLabels { plugin: p.to_string(), result: r.to_string() }).inc_by(n);
        }
    }
}
