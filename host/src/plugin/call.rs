//! One call into a plugin, `info()` or `reconcile`: admission (an instance slot and the call's
//! memory out of the host budget), a fresh store on the plugin runtime, the deadline, and its
//! backstop.
//!
//! Two mechanisms end a call at its deadline: the store's epoch callback traps the guest at the
//! first tick past it (wasm code), and — should the call be inside the host when the deadline
//! passes — the caller stops waiting at deadline + [`CALL_GRACE`], aborts the call's task and
//! releases its admission. Either way no caller, worker or permit is held past deadline + grace;
//! a task that cannot even be aborted stays in the in-flight registry as *stuck* (`/healthz`).

use super::engine::PluginEngine;
use super::errors::CallError;
use super::inflight::{CallHandle, CALL_GRACE};
use super::limits::Limits;
use super::sandbox::{self, CallContext, HostState};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::Store;

/// What a finished call used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallStats {
    /// From the first instruction (instantiation) to the end.
    pub elapsed: Duration,
    /// The most its memories and tables held at once.
    pub peak_memory: usize,
}

/// Aborts the call's task (and marks it abandoned) unless the call finished.
struct Abandon {
    task: tokio::task::AbortHandle,
    call: CallHandle,
    finished: bool,
}

impl Drop for Abandon {
    fn drop(&mut self) {
        if !self.finished {
            self.call.abandon();
            self.task.abort();
        }
    }
}

/// Runs `body` with a fresh store under `limits`. `body` gets the store and gives it back with
/// its result (it classifies its own errors: it has the store).
pub(crate) async fn run<T, F, Fut>(
    engine: &Arc<PluginEngine>,
    limits: &Limits,
    ctx: CallContext,
    body: F,
) -> Result<(T, CallStats), CallError>
where
    T: Send + 'static,
    F: FnOnce(Store<HostState>) -> Fut + Send + 'static,
    Fut: Future<Output = (Store<HostState>, Result<T, CallError>)> + Send + 'static,
{
    // Waiting for admission does not count against the deadline.
    let _admitted =
        engine.admission.admit(limits.memory_bytes).await.map_err(|e| CallError::Instantiate(e.to_string()))?;
    let registration = engine.calls.register(ctx.plugin.clone(), ctx.object.clone(), limits.deadline);
    let call = registration.handle();
    let store = sandbox::new_store(engine, limits, ctx);
    let log_lines = limits.log_lines;
    // The caller's span follows the call onto the plugin runtime (the cache reads' spans nest in
    // it) and gets the call's duration and memory peak, if it has those fields (`plugin.call`).
    let span = tracing::Span::current();
    let task = engine.handle().spawn(tracing::Instrument::instrument(
        async move {
            // Leaves the in-flight registry when this task really ends (or is dropped by an abort).
            let _registration = registration;
            let started = Instant::now();
            let (store, result) = body(store).await;
            // The guest's output is logged, and a trap is told in the guest's own words.
            let result = sandbox::finish(&store, log_lines, result);
            (result, CallStats { elapsed: started.elapsed(), peak_memory: store.data().limiter.peak })
        },
        span.clone(),
    ));
    let mut abandon = Abandon { task: task.abort_handle(), call, finished: false };
    let outcome = tokio::time::timeout(limits.deadline + CALL_GRACE, task).await;
    abandon.finished = outcome.is_ok();
    match outcome {
        Ok(Ok((result, stats))) => {
            span.record("duration_ms", stats.elapsed.as_secs_f64() * 1000.0);
            span.record("memory_peak_bytes", stats.peak_memory as u64);
            result.map(|v| (v, stats))
        }
        Ok(Err(e)) => Err(CallError::Trap(format!("host task failed: {e}"))),
        Err(_) => {
            tracing::warn!(deadline = ?limits.deadline, "plugin call still running past its deadline and grace; abandoned");
            Err(CallError::Deadline(limits.deadline))
        }
    }
}
