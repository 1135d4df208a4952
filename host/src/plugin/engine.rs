//! The wasmtime engine shared by every plugin: pooling allocator, epoch interruption, limits.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch advances. Deadlines are rounded up to whole ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Per-plugin sandbox limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of one `reconcile` call (instantiation included).
    pub deadline: Duration,
    /// Budget of the `info` call when a plugin is loaded.
    pub info_deadline: Duration,
    /// Linear memory one instance may use, in bytes.
    pub memory_bytes: usize,
    /// Bytes of stdout/stderr kept per call (the rest is dropped and counted).
    pub output_bytes: usize,
    /// Log lines a plugin may emit per call through the `log` import.
    pub log_lines: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_secs(1),
            info_deadline: Duration::from_secs(1),
            memory_bytes: 64 << 20,
            output_bytes: 16 << 10,
            log_lines: 64,
        }
    }
}

/// Engine-wide settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Use the pooling allocator (fast instantiation; reserves virtual memory up front).
    pub pooling: bool,
    /// Instances that may exist at once (bounds concurrent reconciles across all plugins).
    pub max_instances: u32,
    /// The largest memory any plugin may be given (the pool's slot size).
    pub max_memory_bytes: usize,
    /// Where precompiled components are cached; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig { pooling: true, max_instances: 64, max_memory_bytes: 1 << 30, cache_dir: default_cache_dir() }
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

/// The shared engine plus the ticker thread that drives deadlines.
pub struct PluginEngine {
    pub(crate) engine: Engine,
    pub(crate) config: EngineConfig,
}

impl PluginEngine {
    /// Builds the engine and starts the epoch ticker (a thread that ends with the engine).
    pub fn new(config: EngineConfig) -> anyhow::Result<Arc<Self>> {
        let mut c = Config::new();
        c.wasm_component_model(true);
        // Deadlines: the ticker bumps the epoch; a store past its deadline traps (Trap::Interrupt).
        c.epoch_interruption(true);
        if config.pooling {
            let mut p = PoolingAllocationConfig::default();
            let n = config.max_instances;
            // Components from JS/Python toolchains hold many core instances, tables and memories.
            p.total_component_instances(n)
                .total_core_instances(n * 32)
                .total_memories(n * 4)
                .total_tables(n * 32)
                .total_stacks(n)
                .max_core_instances_per_component(64)
                .max_memories_per_component(8)
                .max_tables_per_component(32)
                .max_memory_size(config.max_memory_bytes)
                .table_elements(1 << 20)
                .max_component_instance_size(4 << 20)
                .max_core_instance_size(4 << 20)
                // Keep little memory resident between instances: plugins are many and idle.
                .max_unused_warm_slots(n / 4)
                // ...but reset the first pages of a reused slot with memset instead of madvise:
                // a madvise per instance costs TLB shootdowns on every core (profiled: ~8% of the
                // host's CPU in steady state), and small plugins live within these pages.
                .linear_memory_keep_resident(256 << 10)
                .table_keep_resident(64 << 10);
            c.allocation_strategy(InstanceAllocationStrategy::Pooling(p));
        }
        let engine = Engine::new(&c).map_err(|e| anyhow::anyhow!("{e:#}"))?;
        let weak = engine.weak();
        std::thread::Builder::new().name("kwop-epoch".into()).spawn(move || loop {
            std::thread::sleep(EPOCH_TICK);
            match weak.upgrade() {
                Some(e) => e.increment_epoch(),
                None => return,
            }
        })?;
        Ok(Arc::new(PluginEngine { engine, config }))
    }

    /// Epoch ticks for a wall-clock budget (at least one).
    pub(crate) fn ticks(d: Duration) -> u64 {
        (d.as_micros().div_ceil(EPOCH_TICK.as_micros())).max(1) as u64
    }

    /// A key naming this engine's compiled-code compatibility, for the precompile cache.
    pub(crate) fn compat_key(&self) -> String {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut h);
        format!("{:016x}", h.finish())
    }
}
