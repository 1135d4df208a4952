//! One call into a plugin: a fresh store and instance, a deadline, a memory limit, captured output.
//!
//! A fresh instance per call (not a reused one) so nothing leaks from one reconcile into the next
//! and a trap cannot leave an instance half-updated; with the pooling allocator and a pre-linked
//! component this costs microseconds for small guests (see BENCHMARKS.md).

use super::cache_view::CacheView;
use super::engine::{Limits, PluginEngine};
use super::guest_error::{self, GuestOutput};
use super::output::Captured;
use super::wit;
use crate::kinds::Gvk;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store, Trap};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Why a call into a plugin did not return a value.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The deadline passed (e.g. an infinite loop).
    #[error("plugin exceeded its deadline of {0:?}")]
    Deadline(Duration),
    /// The plugin tried to grow memory past its limit.
    #[error("plugin exceeded its memory limit of {limit} bytes (asked for {asked})")]
    OutOfMemory {
        /// The limit.
        limit: usize,
        /// The size it asked for.
        asked: usize,
    },
    /// The plugin trapped (panic, abort, unreachable, out-of-bounds access...).
    #[error("plugin trapped: {0}")]
    Trap(String),
    /// The component could not be instantiated.
    #[error("plugin could not be instantiated: {0}")]
    Instantiate(String),
}

impl CallError {
    /// Short label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            CallError::Deadline(_) => "deadline",
            CallError::OutOfMemory { .. } => "out_of_memory",
            CallError::Trap(_) => "trap",
            CallError::Instantiate(_) => "instantiate",
        }
    }
}

/// What `reconcile` returned, still in WIT types (decoded and fenced by `crate::outcome`).
pub type RawResult = Result<wit::Outcome, wit::Failure>;

/// Memory/table limiter that remembers *why* it refused, so the error says "out of memory"
/// instead of a generic trap.
pub(crate) struct Limiter {
    memory: usize,
    pub(crate) refused: Option<usize>,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory {
            self.refused = Some(desired);
            // An error (not `Ok(false)`) traps at once: most guests abort on a failed grow anyway,
            // and a trap carries the reason.
            wasmtime::bail!("memory limit exceeded");
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

/// Per-call host state: what the guest's imports can reach.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: Limiter,
    pub(crate) cache: Arc<dyn CacheView>,
    pub(crate) readable: Arc<HashSet<Gvk>>,
    pub(crate) plugin: Arc<str>,
    pub(crate) object: String,
    pub(crate) log_budget: u32,
    pub(crate) logs_dropped: u32,
    stdout: Captured,
    stderr: Captured,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// Everything a call needs besides the component.
pub struct CallContext {
    /// The plugin's name, for logs.
    pub plugin: Arc<str>,
    /// `namespace/name` of the object being reconciled, for logs.
    pub object: String,
    /// What the plugin may read.
    pub cache: Arc<dyn CacheView>,
    /// Kinds the plugin declared (reads of others return nothing).
    pub readable: Arc<HashSet<Gvk>>,
}

pub(crate) fn new_store(
    engine: &PluginEngine,
    limits: &Limits,
    ctx: CallContext,
    deadline: Duration,
) -> Store<HostState> {
    let stdout = Captured::new(limits.output_bytes);
    let stderr = Captured::new(limits.output_bytes);
    // No preopened directories, environment, arguments or network: only clocks and random,
    // and the cache and log imports of our own world. argv[0] alone, the same for every plugin:
    // programs expect a program name (Go's `flag` and `klog`, hence `k8s.io/api`, index
    // `os.Args[0]` when they start, and panic without one).
    let wasi = WasiCtx::builder()
        .arg("kwop-plugin")
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build();
    let state = HostState {
        wasi,
        table: ResourceTable::new(),
        limiter: Limiter { memory: limits.memory_bytes, refused: None },
        cache: ctx.cache,
        readable: ctx.readable,
        plugin: ctx.plugin,
        object: ctx.object,
        log_budget: limits.log_lines,
        logs_dropped: 0,
        stdout,
        stderr,
    };
    let mut store = Store::new(&engine.engine, state);
    store.limiter(|s| &mut s.limiter);
    store.set_epoch_deadline(PluginEngine::ticks(deadline));
    store.epoch_deadline_trap();
    store
}

/// Maps a wasmtime error from instantiation or a call to a [`CallError`].
pub(crate) fn classify(
    store: &Store<HostState>,
    err: wasmtime::Error,
    deadline: Duration,
    instantiating: bool,
) -> CallError {
    if let Some(asked) = store.data().limiter.refused {
        return CallError::OutOfMemory { limit: store.data().limiter.memory, asked };
    }
    if err.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        return CallError::Deadline(deadline);
    }
    let msg = format!("{err:#}");
    if instantiating && err.downcast_ref::<Trap>().is_none() {
        CallError::Instantiate(msg)
    } else {
        CallError::Trap(msg)
    }
}

/// Sends what the guest printed to the host's log (see [`guest_error::log_output`]) and returns
/// it, so a trap can be explained in the guest's own words ([`guest_error::explain`]).
pub(crate) fn flush_output(store: &Store<HostState>, max_lines: u32) -> GuestOutput {
    let s = store.data();
    let ((stdout, out_dropped), (stderr, err_dropped)) = (s.stdout.take(), s.stderr.take());
    let out = GuestOutput { stdout, stderr };
    guest_error::log_output(&out, &s.plugin, &s.object, max_lines, [out_dropped, err_dropped]);
    if s.logs_dropped > 0 {
        tracing::warn!(target: guest_error::TARGET, plugin = %s.plugin, object = %s.object, dropped = s.logs_dropped, "plugin log lines over the per-call limit were dropped");
    }
    out
}

/// [`flush_output`], then a trap in `result` rewritten in the guest's own words.
pub(crate) fn finish<T>(
    store: &Store<HostState>,
    max_lines: u32,
    result: Result<T, CallError>,
) -> Result<T, CallError> {
    let out = flush_output(store, max_lines);
    result.map_err(|e| guest_error::explain(e, &out, &store.data().plugin, &store.data().object))
}
