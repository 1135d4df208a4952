//! A kept instance for several calls, to measure what reuse would save (never used for reconciles).

use super::bindings::{self, v01, v02, v03};
use super::errors::CallError;
use super::loader::LoadedPlugin;
use super::sandbox::{self, CallContext, HostState, RawResult};
use super::wasi::Determinism;
use super::world::{Pre, Request};
use std::sync::Arc;
use std::time::SystemTime;

impl LoadedPlugin {
    /// An instance kept for several calls (see [`Session`]).
    pub fn session(&self) -> Result<Session<'_>, CallError> {
        let ctx = CallContext {
            plugin: self.name_arc(),
            object: "-".into(),
            cache: Arc::new(super::StaticCache::default()),
            readable: self.readable_kinds(),
            determinism: Determinism::new(&self.sha256, "", "", SystemTime::now()),
            clock_read: None,
        };
        let deadline = self.limits.deadline;
        let mut store = sandbox::new_store(self.engine(), &self.limits, ctx);
        let instance = self
            .engine()
            .block_on(instantiate(&self.pre, &mut store))
            .map_err(|e| sandbox::classify(&store, e, deadline, true))?;
        Ok(Session { plugin: self, store, instance, poisoned: false })
    }
}

enum Instance {
    V01(v01::Reconciler),
    V02(v02::Reconciler),
    V03(v03::Reconciler),
}

async fn instantiate(pre: &Pre, store: &mut wasmtime::Store<HostState>) -> wasmtime::Result<Instance> {
    Ok(match pre {
        Pre::V01(p) => Instance::V01(p.instantiate_async(store).await?),
        Pre::V02(p) => Instance::V02(p.instantiate_async(store).await?),
        Pre::V03(p) => Instance::V03(p.instantiate_async(store).await?),
    })
}

/// One instance reused across calls: no instantiation cost, but guest memory (globals, heap)
/// carries over from call to call. The host does not use it for reconciles — a fresh instance per
/// reconcile is the isolation guarantee — it exists to measure what reuse would save (see
/// BENCHMARKS.md). It runs on the calling thread, outside the engine's admission. After a trap
/// the instance is poisoned and refuses further calls.
pub struct Session<'a> {
    plugin: &'a LoadedPlugin,
    store: wasmtime::Store<HostState>,
    instance: Instance,
    poisoned: bool,
}

impl Session<'_> {
    /// One reconcile in the kept instance, with a fresh deadline.
    pub fn reconcile(
        &mut self,
        req: &Request,
        cache: Arc<dyn crate::plugin::CacheView>,
    ) -> Result<RawResult, CallError> {
        if self.poisoned {
            return Err(CallError::Trap("instance is poisoned by an earlier trap".into()));
        }
        let deadline = self.plugin.limits.deadline;
        self.store.data_mut().cache = cache;
        sandbox::restart_deadline(&mut self.store, deadline);
        let req = req.to_wit(SystemTime::now());
        let store = &mut self.store;
        let r = match &self.instance {
            Instance::V03(i) => self
                .plugin
                .engine()
                .block_on(i.call_reconcile(store, &super::v03::request(&req)))
                .map(super::v03::outcome),
            Instance::V02(i) => self.plugin.engine().block_on(i.call_reconcile(store, &req)),
            Instance::V01(i) => self
                .plugin
                .engine()
                .block_on(i.call_reconcile(store, &bindings::request_to_v01(&req)))
                .map(bindings::result_from_v01),
        }
        .map_err(|e| sandbox::classify(&self.store, e, deadline, false));
        self.poisoned = r.is_err();
        sandbox::finish(&self.store, self.plugin.limits.log_lines, r)
    }
}
