//! The wasmtime engine shared by every plugin: pooling allocator sized from the limits, epoch
//! interruption, the runtime plugin code runs on, call admission and the in-flight registry.

use super::admission::Admission;
use super::inflight::InFlight;
use super::ticker::Ticker;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

pub use super::limits::Limits;

/// Fault injection for tests: `KWOP_FAULT=stop-epoch` never advances the epoch.
const FAULT_ENV: &str = "KWOP_FAULT";
const FAULT_STOP_EPOCH: &str = "stop-epoch";

/// How often the epoch advances.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);
/// Every this many ticks a running guest yields to the executor and its deadline is checked.
pub(crate) const YIELD_TICKS: u64 = 2;
/// Core instances, memories and tables one component instance may have (JS and Python
/// toolchains produce components with many core instances and tables). The limiter and the pool
/// use the same numbers, so the limiter refuses first, with a clear reason.
pub(crate) const MAX_CORE_INSTANCES: usize = 64;
pub(crate) const MAX_MEMORIES: usize = 8;
pub(crate) const MAX_TABLES: usize = 32;
/// Elements one table may have (the pool's table slot size).
pub(crate) const TABLE_ELEMENTS: usize = 1 << 20;
/// The async stack every call runs on (wasm's own stack, `max_wasm_stack`, lives inside it).
pub const STACK_BYTES: usize = 2 << 20;

/// Engine-wide settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Use the pooling allocator (fast instantiation; reserves virtual memory up front).
    pub pooling: bool,
    /// Instances that may exist at once (bounds concurrent calls across all plugins).
    pub max_instances: u32,
    /// The largest memory limit any plugin may be given (the pool's slot size).
    pub max_memory_bytes: usize,
    /// Bytes of plugin memory all running instances together may hold (`None`: no bound);
    /// calls wait for their share.
    pub memory_budget: Option<usize>,
    /// Where precompiled components are cached; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// Bytes the precompile cache may hold; past it the least recently used entries are deleted
    /// after each write (0: no cap).
    pub cache_max_bytes: u64,
    /// wasmtime's settings for instantiation; the defaults are what `kwop run` uses, the others
    /// exist so the plugin call benchmark can measure what each buys.
    pub tuning: Tuning,
}

/// Instantiation settings of the engine (see [`EngineConfig::tuning`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Initialise linear memory from a copy-on-write image of the data segments instead of
    /// copying them in at each instantiation (wasmtime's `memory_init_cow`).
    pub memory_init_cow: bool,
    /// Initialise table elements on first use (wasmtime's `table_lazy_init`).
    pub table_lazy_init: bool,
    /// Reset the first pages of a reused pooled slot with memset rather than madvise (see [`pool`]).
    pub keep_resident: bool,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning { memory_init_cow: true, table_lazy_init: true, keep_resident: true }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            pooling: true,
            max_instances: 64,
            max_memory_bytes: 1 << 30,
            memory_budget: None,
            cache_dir: default_cache_dir(),
            cache_max_bytes: super::precompiled::DEFAULT_MAX_BYTES,
            tuning: Tuning::default(),
        }
    }
}

/// `$KWOP_CACHE_DIR`, else `$XDG_CACHE_HOME/kwop/precompiled`, else `~/.cache/kwop/precompiled`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("KWOP_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("kwop").join("precompiled"))
}

/// The shared engine, the ticker thread that drives deadlines, and the runtime plugin calls run
/// on: their own threads, so a busy plugin never delays the host's watches, probes or leader
/// election, and a call the host gave up on cannot hold one of the host's threads.
pub struct PluginEngine {
    pub(crate) engine: Engine,
    pub(crate) config: EngineConfig,
    runtime: Option<tokio::runtime::Runtime>,
    /// Instance slots and the memory budget.
    pub admission: Admission,
    /// Calls running now.
    pub calls: Arc<InFlight>,
    /// Advances the epoch while any store exists.
    pub(crate) ticker: Arc<Ticker>,
}

impl Drop for PluginEngine {
    fn drop(&mut self) {
        // Dropping a runtime waits for its tasks, which is not allowed inside another runtime.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// The pooling allocator's configuration for `config`, checked against the limits: a memory
/// slot holds the largest per-plugin limit, every instance can have [`MAX_MEMORIES`] memories and
/// [`MAX_TABLES`] tables of [`TABLE_ELEMENTS`], and there is an async stack per instance.
pub(crate) fn pool(config: &EngineConfig) -> PoolingAllocationConfig {
    let n = config.max_instances;
    let mut p = PoolingAllocationConfig::default();
    p.total_component_instances(n)
        .total_core_instances(n * 32)
        // Most components have one or two memories (the wasip1 adapter brings its own); a pool
        // with room for every instance to use all its memories would reserve terabytes of
        // address space. An instantiation that finds the pool full fails and is retried.
        .total_memories(n * 4)
        .total_tables(n * 32)
        .total_stacks(n)
        .max_core_instances_per_component(MAX_CORE_INSTANCES as u32)
        .max_memories_per_component(MAX_MEMORIES as u32)
        .max_tables_per_component(MAX_TABLES as u32)
        // wasmtime's default is one memory and one table per core module: a module with two
        // memories (multi-memory) would not even instantiate.
        .max_memories_per_module(MAX_MEMORIES as u32)
        .max_tables_per_module(MAX_TABLES as u32)
        .max_memory_size(config.max_memory_bytes)
        .table_elements(TABLE_ELEMENTS)
        .max_component_instance_size(4 << 20)
        .max_core_instance_size(4 << 20)
        // Keep little memory resident between instances: plugins are many and idle.
        .max_unused_warm_slots(n / 4);
    if config.tuning.keep_resident {
        // ...but reset the first pages of a reused slot with memset instead of madvise:
        // a madvise per instance costs TLB shootdowns on every core (profiled: ~8% of the
        // host's CPU in steady state), and small plugins live within these pages.
        p.linear_memory_keep_resident(256 << 10).table_keep_resident(64 << 10);
    }
    p
}

impl PluginEngine {
    /// Builds the engine, its runtime and the epoch ticker (a thread that ends with the engine).
    pub fn new(config: EngineConfig) -> anyhow::Result<Arc<Self>> {
        let mut c = Config::new();
        c.wasm_component_model(true);
        c.wasm_multi_memory(true);
        // Deadlines: the ticker bumps the epoch; the store's callback yields or interrupts.
        c.epoch_interruption(true);
        c.async_stack_size(STACK_BYTES);
        c.memory_init_cow(config.tuning.memory_init_cow);
        c.table_lazy_init(config.tuning.table_lazy_init);
        if config.pooling {
            c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool(&config)));
        }
        let engine = Engine::new(&c).map_err(|e| anyhow::anyhow!("{e:#}"))?;
        let weak = engine.weak();
        let ticker = if std::env::var_os(FAULT_ENV).is_some_and(|v| v == FAULT_STOP_EPOCH) {
            // Fault injection (tests): the interruption machinery broken, so a looping plugin
            // really gets stuck and `/healthz` must say so.
            tracing::warn!("{FAULT_ENV}={FAULT_STOP_EPOCH}: the epoch never advances, deadlines are not enforced inside plugin code (fault injection for tests; never set it in production)");
            Ticker::stopped()
        } else {
            Ticker::start(weak, EPOCH_TICK)?
        };
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).max(2);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("kwop-plugin")
            .enable_all()
            .build()?;
        let instances = config.max_instances as usize;
        let budget = config.memory_budget;
        Ok(Arc::new(PluginEngine {
            engine,
            config,
            runtime: Some(runtime),
            admission: Admission::new(instances, budget, STACK_BYTES),
            calls: Arc::new(InFlight::default()),
            ticker,
        }))
    }

    pub(crate) fn handle(&self) -> tokio::runtime::Handle {
        match &self.runtime {
            Some(rt) => rt.handle().clone(),
            // Only `drop` takes the runtime.
            None => tokio::runtime::Handle::current(),
        }
    }

    /// Blocks the calling thread on `f`, inside the plugin runtime's context (for the offline
    /// tools and benchmarks). Panics inside an async context, as `Handle::block_on` does.
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.handle().block_on(f)
    }

    /// The precompile cache, when there is one.
    pub(crate) fn precompile_cache(&self) -> Option<super::precompiled::PrecompileCache> {
        let dir = self.config.cache_dir.as_ref()?;
        Some(super::precompiled::PrecompileCache::new(dir, self.config.cache_max_bytes))
    }

    /// A key naming this engine's compiled-code compatibility, for the precompile cache.
    pub(crate) fn compat_key(&self) -> String {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut h);
        format!("{:016x}", h.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_holds_what_the_limits_allow() {
        let cfg = EngineConfig { max_memory_bytes: 256 << 20, ..EngineConfig::default() };
        let text = format!("{:?}", pool(&cfg));
        // One memory may use a plugin's whole limit; the limiter refuses tables before the pool.
        assert!(text.contains(&format!("max_memory_size: {}", 256 << 20)), "{text}");
        assert!(text.contains(&format!("table_elements: {TABLE_ELEMENTS}")), "{text}");
        assert!(text.contains(&format!("max_memories_per_module: {MAX_MEMORIES}")), "{text}");
        assert!(text.contains(&format!("max_tables_per_module: {MAX_TABLES}")), "{text}");
        assert!(text.contains(&format!("stack_size: {STACK_BYTES}")), "{text}");
        assert!(text.contains(&format!("total_stacks: {}", cfg.max_instances)), "{text}");
        // Admission slots and the pool's component instances are the same number.
        assert!(text.contains(&format!("total_component_instances: {}", cfg.max_instances)), "{text}");
    }
}
