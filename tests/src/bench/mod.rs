//! The benchmark harness (issue 9): kwop vs the real sample-controller vs a "write floor" client,
//! on the same local control plane, plus the WASM-vs-native call cost.
//!
//! - [`scenarios`] runs each measurement (convergence, steady-state writes, memory, many plugins,
//!   hot swap; [`shards`]: sharding across replicas; [`admission`]: webhook latency) and returns plain numbers; [`Results`] holds them all. [`builds`] compares builds
//!   of kwop (glibc, static musl) with the same scenarios.
//! - [`report`] turns [`Results`] into the Markdown tables of `BENCHMARKS.md` and an SVG plot.
//! - `kwop-bench` (src/bin/kwop_bench.rs) drives a full or quick run; `scripts/bench` is the one
//!   command; `tests/tests/bench_smoke.rs` runs every part at a tiny scale in the test suite.
//! - The plugin call cost is measured with criterion (`benches/plugin_call.rs`); [`calls`] holds
//!   the request it uses and a quick timer for the smoke test.

pub mod admission;
pub mod builds;
pub mod calls;
pub mod controllers;
pub mod goals;
pub mod histo;
pub mod proc_stats;
pub mod report;
pub mod scenarios;
pub mod shards;
pub mod stats;
pub mod svg;
pub mod swaps;
pub mod traced;
pub mod variants;
pub mod world;

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What to run and at which scale.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// The kwop binary (a release build for real numbers).
    pub kwop: PathBuf,
    /// Scratch folder (plugin folders, precompile cache, plugin variants).
    pub work: PathBuf,
    /// Convergence: numbers of Foos created at once.
    pub conv_sizes: Vec<usize>,
    /// Convergence: repetitions of each (kwop and the floor).
    pub reps: usize,
    /// Convergence: repetitions for sample-controller at sizes above 100 (it is throttled to
    /// 5 requests/s, so N=2000 takes many minutes).
    pub sc_reps_large: usize,
    /// Concurrent requests of the client that creates Foos (and of the write floor).
    pub create_concurrency: usize,
    /// Steady state: Foos in sync.
    pub steady_n: usize,
    /// Steady state: measuring window, seconds.
    pub steady_window_s: u64,
    /// Steady state: kwop's resync period, seconds.
    pub steady_resync_s: u64,
    /// Memory: object counts (Foos; as many Deployments) measured, ascending. 0 is always added.
    pub mem_sizes: Vec<usize>,
    /// Many plugins: how many.
    pub many: usize,
    /// Many plugins: Foos per plugin.
    pub many_foos: usize,
    /// Hot swap: swaps between two cached versions.
    pub swaps_warm: usize,
    /// Hot swap: swaps to never-seen files (compiled on the spot).
    pub swaps_cold: usize,
    /// Memory samples per measurement (1 s apart; the median is kept).
    pub samples: usize,
    /// Pause before measuring memory, and quiet time that counts as "kwop is idle", milliseconds.
    pub settle_ms: u64,
    /// Which scenarios run (all when empty): conv, steady, memory, many, hotswap, builds, shards,
    /// tracing, admission.
    pub only: Vec<String>,
    /// Convergence: leave sample-controller out (what-if runs of kwop against the floor).
    #[serde(default)]
    pub no_sample_controller: bool,
    /// Sharding: Foos.
    #[serde(default)]
    pub shard_foos: usize,
    /// Sharding: namespaces they are spread over.
    #[serde(default)]
    pub shard_namespaces: usize,
    /// Admission latency: requests of one client, and of each of `adm_clients` concurrent ones.
    #[serde(default)]
    pub adm_requests: usize,
    /// Admission latency: concurrent clients.
    #[serde(default)]
    pub adm_clients: usize,
}

impl Config {
    /// The full run behind BENCHMARKS.md.
    pub fn full(kwop: PathBuf, work: PathBuf) -> Self {
        Config {
            kwop,
            work,
            conv_sizes: vec![100, 1000, 2000],
            reps: 3,
            sc_reps_large: 1,
            create_concurrency: 16,
            steady_n: 1000,
            steady_window_s: 120,
            steady_resync_s: 10,
            mem_sizes: vec![100, 1000, 2000, 5000, 10_000],
            many: 10,
            many_foos: 10,
            swaps_warm: 40,
            swaps_cold: 10,
            samples: 5,
            settle_ms: 3000,
            only: vec![],
            no_sample_controller: false,
            shard_foos: 3000,
            shard_namespaces: 60,
            adm_requests: 500,
            adm_clients: 50,
        }
    }

    /// A few minutes: same code paths, smaller numbers (sample-controller still dominates).
    pub fn quick(kwop: PathBuf, work: PathBuf) -> Self {
        Config {
            conv_sizes: vec![100, 300],
            reps: 1,
            steady_n: 200,
            steady_window_s: 30,
            steady_resync_s: 5,
            mem_sizes: vec![100, 1000],
            many: 3,
            many_foos: 5,
            swaps_warm: 10,
            swaps_cold: 2,
            shard_foos: 600,
            shard_namespaces: 30,
            adm_requests: 100,
            ..Config::full(kwop, work)
        }
    }

    /// Seconds, for the test suite: every part runs, nothing is meaningful as a figure.
    pub fn smoke(kwop: PathBuf, work: PathBuf) -> Self {
        Config {
            conv_sizes: vec![8],
            reps: 1,
            create_concurrency: 8,
            steady_n: 8,
            steady_window_s: 4,
            steady_resync_s: 1,
            // Two sizes: the world grows twice, as in the full run.
            mem_sizes: vec![5, 20],
            many: 2,
            many_foos: 2,
            swaps_warm: 4,
            swaps_cold: 1,
            samples: 1,
            settle_ms: 500,
            shard_foos: 30,
            shard_namespaces: 10,
            adm_requests: 10,
            adm_clients: 4,
            ..Config::full(kwop, work)
        }
    }

    /// Whether a scenario is selected.
    pub fn runs(&self, scenario: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|s| s == scenario)
    }
}

/// Who drives the Foos.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Driver {
    /// kwop + guest-foo.
    Kwop,
    /// kwop + guest-foo with `--memoize=false`: the plugin is called at every resync (steady
    /// state's "before").
    KwopNoMemo,
    /// kubernetes/sample-controller v0.36.3, as shipped (client-go default 5 QPS / burst 10).
    SampleController,
    /// No controller: the benchmark client issues the same creates and status writes itself.
    Floor,
    /// No controller: the benchmark client issues kwop's kind of writes itself (server-side apply
    /// of the Deployment and of the status, plus an event).
    FloorSsa,
}

impl Driver {
    /// Short label for tables.
    pub fn label(self) -> &'static str {
        match self {
            Driver::Kwop => "kwop",
            Driver::KwopNoMemo => "kwop --memoize=false (before)",
            Driver::SampleController => "sample-controller",
            Driver::Floor => "write floor",
            Driver::FloorSsa => "write floor, kwop's writes",
        }
    }
}

/// One convergence run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConvergenceRun {
    /// Who converged the Foos.
    pub driver: Driver,
    /// Foos created at once.
    pub n: usize,
    /// From the first create to the last Deployment/status in place, seconds.
    pub seconds: f64,
    /// How long creating the Foos took (the creating client is not throttled), seconds.
    pub create_seconds: f64,
    /// CPU time of the controller process during the run (user + system), seconds.
    pub controller_cpu_s: f64,
    /// CPU time of kube-apiserver during the run, seconds.
    pub apiserver_cpu_s: f64,
    /// Peak RSS of the controller process, bytes.
    pub controller_peak_rss: u64,
    /// Write requests (POST/PUT/PATCH/APPLY/DELETE) to foos, deployments and events during the run.
    pub writes: f64,
}

/// Steady-state write cost of one controller.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SteadyRun {
    /// Which controller.
    pub driver: Driver,
    /// Foos in sync.
    pub n: usize,
    /// Window measured, seconds.
    pub window_s: f64,
    /// The controller's resync period, seconds.
    pub resync_s: f64,
    /// Write requests by "resource verb" during the window (foos, deployments, events).
    pub writes: std::collections::BTreeMap<String, f64>,
    /// Total writes in the window.
    pub total: f64,
    /// Reconciles during the window (kwop's metric; None for sample-controller).
    pub reconciles: Option<f64>,
    /// Plugin calls during the window (kwop's metric; None for sample-controller).
    #[serde(default)]
    pub plugin_calls: Option<f64>,
    /// CPU time of the controller during the window, seconds.
    pub cpu_s: f64,
    /// Writes while the freshly started controller made its first pass (before the window).
    pub startup_writes: f64,
}

impl SteadyRun {
    /// Writes per hour at this rate.
    pub fn per_hour(&self) -> f64 {
        self.total * 3600.0 / self.window_s
    }
}

/// Resident memory of one controller with `n` Foos and `n` Deployments cached.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryRun {
    /// Which controller.
    pub driver: Driver,
    /// Foos (and as many Deployments).
    pub n: usize,
    /// Median RSS over the samples, bytes.
    pub rss: u64,
    /// Median PSS (proportional set size), bytes.
    pub pss: u64,
    /// Median anonymous RSS (heap, stacks: without the mapped binary), bytes.
    #[serde(default)]
    pub anon: u64,
    /// Seconds from start until the caches were synced and the work done.
    pub ready_s: f64,
}

/// One host with many plugins vs as many sample-controller processes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ManyRun {
    /// Plugins (and sample-controller processes).
    pub plugins: usize,
    /// Foos per plugin.
    pub foos_each: usize,
    /// RSS of the one kwop host with a single plugin, bytes.
    pub kwop_one_rss: u64,
    /// RSS of the one kwop host with all plugins, bytes.
    pub kwop_rss: u64,
    /// PSS of it, bytes.
    pub kwop_pss: u64,
    /// Anonymous RSS of it, bytes.
    #[serde(default)]
    pub kwop_anon: u64,
    /// Anonymous RSS of the host with one plugin, bytes.
    #[serde(default)]
    pub kwop_one_anon: u64,
    /// RSS of one sample-controller process, bytes.
    pub sc_one_rss: u64,
    /// Sum of RSS of all sample-controller processes, bytes.
    pub sc_rss_total: u64,
    /// Sum of PSS (shared pages counted once), bytes.
    pub sc_pss_total: u64,
    /// Sum of anonymous RSS, bytes.
    #[serde(default)]
    pub sc_anon_total: u64,
    /// Every plugin converged its Foos (Deployment + status) in the kwop run.
    pub kwop_converged: bool,
    /// Deployment watches kwop held open at kube-apiserver with every plugin running (one
    /// shared cache: 1; before issue 17, one per plugin).
    #[serde(default)]
    pub deployment_watches: Option<f64>,
    /// Plugins sharing kwop's Deployment cache (`kwop_cache_plugins`).
    #[serde(default)]
    pub deployment_cache_plugins: Option<f64>,
}

/// Hot-swap latencies.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HotSwapRun {
    /// File renamed into place → first object written by the new version, seconds, between
    /// versions already in the precompile cache.
    pub warm_s: Vec<f64>,
    /// The same for files never seen before (compiled on the spot).
    pub cold_s: Vec<f64>,
    /// File in place → the host reports the new version active (`/plugins`), warm swaps, seconds.
    pub warm_active_s: Vec<f64>,
    /// A ReconcilerPlugin's `spec.source` edited to the other version's digest → first object
    /// written by it, seconds (both digests pulled and compiled once before).
    #[serde(default)]
    pub rp_warm_s: Vec<f64>,
}

/// Plugin call cost, nanoseconds per call (medians).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CallCost {
    /// (label, ns per call), e.g. ("guest-foo (Rust) wasm, fresh instance", 123456.0).
    pub rows: Vec<(String, f64)>,
    /// Where the numbers come from (criterion or the quick timer).
    pub source: String,
    /// Size of the Rust guest-foo component measured, bytes.
    #[serde(default)]
    pub guest_bytes: Option<u64>,
}

/// The machine the run happened on.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model.
    pub cpu: String,
    /// Logical CPUs.
    pub cpus: usize,
    /// Memory, bytes.
    pub memory: u64,
    /// Kernel.
    pub kernel: String,
    /// 1-minute load average when the run started.
    pub load_at_start: f64,
}

/// Every figure of a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Results {
    /// UTC date and time of the run.
    pub date: String,
    /// The command line.
    pub command: String,
    /// kwop binary and git revision.
    pub kwop: String,
    /// Extra kwop flags / environment of a what-if run (`KWOP_BENCH_KWOP_ARGS`, `KWOP_BENCH_KWOP_ENV`).
    #[serde(default)]
    pub what_if: String,
    /// Where it ran.
    pub machine: Machine,
    /// Scale used.
    pub config: Option<Config>,
    /// 1. Plugin call cost.
    pub calls: Option<CallCost>,
    /// 2. Convergence runs.
    pub convergence: Vec<ConvergenceRun>,
    /// 3. Steady-state writes.
    pub steady: Vec<SteadyRun>,
    /// 4. Memory.
    pub memory: Vec<MemoryRun>,
    /// kwop's convergence while the memory world was built (N up to 10 000), seconds.
    pub memory_build: Vec<(usize, f64)>,
    /// 5. Many plugins.
    pub many: Option<ManyRun>,
    /// 6. Hot swap.
    pub hotswap: Option<HotSwapRun>,
    /// 8. Builds of kwop side by side (glibc vs the image's static musl binary).
    #[serde(default)]
    pub builds: Option<builds::BuildsRun>,
    /// 9. Sharding: per replica, 1 to 3 replicas against the unsharded singleton.
    #[serde(default)]
    pub shards: Option<shards::ShardsRun>,
    /// 10. Traces exported against none.
    #[serde(default)]
    pub traced: Option<traced::TracedRun>,
    /// 11. Admission latency at the API server.
    #[serde(default)]
    pub admission: Option<admission::AdmissionRun>,
}

/// The cargo target folder the tests crate was built in (where the test plugins are).
pub fn target_dir() -> PathBuf {
    std::path::Path::new(crate::plugins::GUEST_FOO)
        .ancestors()
        .nth(5)
        .map(std::path::Path::to_path_buf)
        .unwrap_or_else(|| crate::repo_root().join("target"))
}

/// The machine, from /proc.
pub fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_string()))
        .unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
    let load_at_start = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0);
    Machine {
        cpu,
        cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        memory,
        kernel,
        load_at_start,
    }
}
