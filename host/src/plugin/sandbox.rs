//! The per-call store: a fresh instance's host state, its memory limiter, its deadline, its
//! captured output, and how a failed call is classified.
//!
//! A fresh instance per call (not a reused one) so nothing leaks from one reconcile into the next
//! and a trap cannot leave an instance half-updated; with the pooling allocator and a pre-linked
//! component this costs microseconds for small guests (see BENCHMARKS.md).

use super::cache_view::CacheView;
use super::errors::CallError;
use super::engine::{PluginEngine, MAX_CORE_INSTANCES, MAX_MEMORIES, MAX_TABLES, TABLE_ELEMENTS, YIELD_TICKS};
use super::guest_error::{self, GuestOutput};
use super::limits::{Limits, TABLE_ELEMENT_BYTES};
use super::output::Captured;
use super::wasi::{self, Determinism};
use super::wit;
use crate::vocab::Gvk;
use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store, Trap, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// What `reconcile` returned, still in WIT types (decoded and fenced by `crate::outcome`).
pub type RawResult = Result<wit::Outcome, wit::Failure>;

/// Counts every byte of every linear memory and table of the instance against one limit (a
/// component may have several memories and large tables), and remembers *why* it refused, so
/// the error says "out of memory" instead of a generic trap.
pub(crate) struct Limiter {
    pub(crate) limit: usize,
    pub(crate) used: usize,
    pub(crate) peak: usize,
    pub(crate) refused: Option<usize>,
}

impl Limiter {
    fn grow(&mut self, delta: usize) -> wasmtime::Result<bool> {
        let next = self.used.saturating_add(delta);
        if next > self.limit {
            self.refused = Some(next);
            // An error (not `Ok(false)`) traps at once: most guests abort on a failed grow anyway,
            // and a trap carries the reason.
            wasmtime::bail!("memory limit exceeded");
        }
        self.used = next;
        self.peak = self.peak.max(next);
        Ok(true)
    }
}

impl ResourceLimiter for Limiter {
    // Called for the initial size of every memory and table at instantiation too.
    fn memory_growing(&mut self, current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        self.grow(desired.saturating_sub(current))
    }

    fn table_growing(&mut self, current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        if desired > TABLE_ELEMENTS {
            // The pool's slots hold this many elements; say so rather than fail in the pool.
            self.refused = Some(desired.saturating_mul(TABLE_ELEMENT_BYTES));
            wasmtime::bail!("table of {desired} elements exceeds the host's {TABLE_ELEMENTS}");
        }
        self.grow(desired.saturating_sub(current).saturating_mul(TABLE_ELEMENT_BYTES))
    }

    fn instances(&self) -> usize {
        MAX_CORE_INSTANCES
    }
    fn tables(&self) -> usize {
        MAX_TABLES
    }
    fn memories(&self) -> usize {
        MAX_MEMORIES
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
    /// Largest result of one `cache.query`.
    pub(crate) query_bytes: usize,
    /// Bytes of cache reads left for this call.
    pub(crate) read_budget: usize,
    /// When the call must end (checked at every epoch tick).
    pub(crate) deadline_at: Instant,
    stdout: Captured,
    stderr: Captured,
    /// Keeps the epoch ticking while this store exists (`ticker`).
    _ticking: super::ticker::Ticking,
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
    /// The call's fixed clock and random seed.
    pub determinism: Determinism,
    /// Set when the plugin reads the wall clock (a memoized reconcile must not depend on it).
    pub clock_read: Option<Arc<AtomicBool>>,
}

pub(crate) fn new_store(engine: &PluginEngine, limits: &Limits, ctx: CallContext) -> Store<HostState> {
    let stdout = Captured::new(limits.output_bytes);
    let stderr = Captured::new(limits.output_bytes);
    let state = HostState {
        wasi: wasi::ctx(&ctx.determinism, ctx.clock_read, limits, stdout.clone(), stderr.clone()),
        table: ResourceTable::new(),
        limiter: Limiter { limit: limits.memory_bytes, used: 0, peak: 0, refused: None },
        cache: ctx.cache,
        readable: ctx.readable,
        plugin: ctx.plugin,
        object: ctx.object,
        log_budget: limits.log_lines,
        logs_dropped: 0,
        query_bytes: limits.query_bytes,
        read_budget: limits.read_bytes,
        deadline_at: Instant::now() + limits.deadline,
        stdout,
        stderr,
        _ticking: engine.ticker.hold(),
    };
    let mut store = Store::new(&engine.engine, state);
    store.limiter(|s| &mut s.limiter);
    // Every few ticks the guest yields to the executor (so a busy plugin shares its thread) and
    // the deadline is checked; past it the call traps with `Trap::Interrupt`.
    store.set_epoch_deadline(YIELD_TICKS);
    store.epoch_deadline_callback(|ctx| {
        if Instant::now() >= ctx.data().deadline_at {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::Yield(YIELD_TICKS))
        }
    });
    store
}

/// Restarts the deadline of a kept store (see `Session`).
pub(crate) fn restart_deadline(store: &mut Store<HostState>, deadline: Duration) {
    store.data_mut().deadline_at = Instant::now() + deadline;
    store.set_epoch_deadline(YIELD_TICKS);
}

/// Maps a wasmtime error from instantiation or a call to a [`CallError`].
pub(crate) fn classify(
    store: &Store<HostState>,
    err: wasmtime::Error,
    deadline: Duration,
    instantiating: bool,
) -> CallError {
    if let Some(asked) = store.data().limiter.refused {
        return CallError::OutOfMemory { limit: store.data().limiter.limit, asked };
    }
    if err.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        return CallError::Deadline(deadline);
    }
    let msg = format!("{err:#}");
    if instantiating && err.downcast_ref::<Trap>().is_none() && !msg.contains(wasi::CANNOT_SLEEP) {
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
