//! Calling a loaded plugin's exports — `reconcile`, `finalize`, `validate`, and 0.3's `mutate` and
//! `convert` — each in a fresh instance under the plugin's limits, whichever contract version it
//! implements.

use super::bindings;
use super::call;
use super::errors::CallError;
use super::loader::LoadedPlugin;
use super::sandbox::{self, CallContext, HostState, RawResult};
use super::v03;
use super::wasi::Determinism;
use super::world::{
    AdmissionRequest, Call, CallSpec, ConversionRequest, Pre, Raw, RawConvert, RawFinalize, RawMutate, RawValidate,
    Request,
};
use std::sync::Arc;
use std::time::Duration;

impl LoadedPlugin {
    /// Runs one reconcile in a fresh instance, under this plugin's limits. The future waits for
    /// admission first; the call itself runs on the plugin runtime.
    pub async fn call(
        &self,
        req: Request,
        spec: CallSpec,
        cache: Arc<dyn crate::plugin::CacheView>,
    ) -> Result<RawResult, CallError> {
        let now = spec.started_at;
        match self.run(Call::Reconcile(req.to_wit(now)), spec, cache, None).await? {
            Raw::Reconcile(r) => Ok(r),
            _ => Err(CallError::Trap("another export answered a reconcile".into())),
        }
    }

    /// Runs `finalize` for a primary being deleted, as [`LoadedPlugin::call`] runs `reconcile`.
    /// Only a 0.2 plugin that declared `finalizes` is asked (anything else is an error here).
    pub async fn finalize(
        &self,
        req: Request,
        spec: CallSpec,
        cache: Arc<dyn crate::plugin::CacheView>,
    ) -> Result<RawFinalize, CallError> {
        if !self.info.finalizes {
            return Err(CallError::Trap(format!("plugin {} does not finalize", self.info.name)));
        }
        let now = spec.started_at;
        match self.run(Call::Finalize(req.to_wit(now)), spec, cache, None).await? {
            Raw::Finalize(r) => Ok(r),
            _ => Err(CallError::Trap("another export answered a finalize".into())),
        }
    }

    /// Runs `validate` for an admission request, within `deadline` if that is shorter than the
    /// plugin's own (the webhook's timeout). Only a 0.2 plugin that declared `validates` is asked.
    pub async fn validate(
        &self,
        req: AdmissionRequest,
        spec: CallSpec,
        cache: Arc<dyn crate::plugin::CacheView>,
        deadline: Option<Duration>,
    ) -> Result<RawValidate, CallError> {
        if !self.info.validates {
            return Err(CallError::Trap(format!("plugin {} does not validate", self.info.name)));
        }
        let now = spec.started_at;
        match self.run(Call::Validate(req, now), spec, cache, deadline).await? {
            Raw::Validate(r) => Ok(r),
            _ => Err(CallError::Trap("another export answered a validate".into())),
        }
    }

    /// Runs `mutate` for an admission request, as [`LoadedPlugin::validate`]. Only a 0.3 plugin
    /// that declared what it `mutates` is asked.
    pub async fn mutate(
        &self,
        req: AdmissionRequest,
        spec: CallSpec,
        cache: Arc<dyn crate::plugin::CacheView>,
        deadline: Option<Duration>,
    ) -> Result<RawMutate, CallError> {
        if self.info.mutates.is_empty() {
            return Err(CallError::Trap(format!("plugin {} does not mutate", self.info.name)));
        }
        let now = spec.started_at;
        match self.run(Call::Mutate(req, now), spec, cache, deadline).await? {
            Raw::Mutate(r) => Ok(r),
            _ => Err(CallError::Trap("another export answered a mutate".into())),
        }
    }

    /// Runs `convert` for one object, in a fresh instance with no cache to read. Only a 0.3
    /// plugin that declared the versions it `converts` is asked.
    pub async fn convert(
        &self,
        req: ConversionRequest,
        spec: CallSpec,
        deadline: Option<Duration>,
    ) -> Result<RawConvert, CallError> {
        if self.info.converts.is_empty() {
            return Err(CallError::Trap(format!("plugin {} does not convert", self.info.name)));
        }
        let cache = Arc::new(crate::plugin::StaticCache::default());
        match self.run(Call::Convert(req), spec, cache, deadline).await? {
            Raw::Convert(r) => Ok(r),
            _ => Err(CallError::Trap("another export answered a convert".into())),
        }
    }

    async fn run(
        &self,
        call: Call,
        spec: CallSpec,
        cache: Arc<dyn crate::plugin::CacheView>,
        deadline: Option<Duration>,
    ) -> Result<Raw, CallError> {
        let ctx = CallContext {
            plugin: self.name_arc(),
            object: spec.object,
            cache,
            readable: self.readable_kinds(),
            determinism: Determinism::new(&self.sha256, &spec.uid, &spec.resource_version, spec.started_at),
            clock_read: spec.clock_read,
        };
        let mut limits = self.limits.clone();
        if let Some(d) = deadline {
            limits.deadline = limits.deadline.min(d);
        }
        let (pre, deadline) = (self.pre.clone(), limits.deadline);
        let (r, _) = call::run(self.engine(), &limits, ctx, move |mut store| async move {
            let r = async {
                let fail = |s: &wasmtime::Store<HostState>, e, inst| sandbox::classify(s, e, deadline, inst);
                match pre {
                    Pre::V03(p) => {
                        let i = p.instantiate_async(&mut store).await.map_err(|e| fail(&store, e, true))?;
                        let r = match &call {
                            Call::Reconcile(req) => i
                                .call_reconcile(&mut store, &v03::request(req))
                                .await
                                .map(|r| Raw::Reconcile(v03::outcome(r))),
                            Call::Finalize(req) => i
                                .call_finalize(&mut store, &v03::request(req))
                                .await
                                .map(|r| Raw::Finalize(v03::finalize_outcome(r))),
                            Call::Validate(req, now) => i
                                .call_validate(&mut store, &v03::admission(req, *now))
                                .await
                                .map(|r| Raw::Validate(v03::validated(r))),
                            Call::Mutate(req, now) => i
                                .call_mutate(&mut store, &v03::admission(req, *now))
                                .await
                                .map(|r| Raw::Mutate(v03::mutated(r))),
                            Call::Convert(req) => {
                                i.call_convert(&mut store, &v03::conversion(req)).await.map(Raw::Convert)
                            }
                        };
                        r.map_err(|e| fail(&store, e, false))
                    }
                    Pre::V02(p) => {
                        let i = p.instantiate_async(&mut store).await.map_err(|e| fail(&store, e, true))?;
                        let r = match &call {
                            Call::Reconcile(req) => i.call_reconcile(&mut store, req).await.map(Raw::Reconcile),
                            Call::Finalize(req) => i.call_finalize(&mut store, req).await.map(Raw::Finalize),
                            Call::Validate(req, now) => {
                                i.call_validate(&mut store, &req.to_wit(*now)).await.map(Raw::Validate)
                            }
                            Call::Mutate(..) | Call::Convert(_) => {
                                return Err(CallError::Trap(
                                    "a kwop:reconciler@0.2 plugin neither mutates nor converts".into(),
                                ))
                            }
                        };
                        r.map_err(|e| fail(&store, e, false))
                    }
                    Pre::V01(p) => {
                        let Call::Reconcile(req) = &call else {
                            return Err(CallError::Trap("a kwop:reconciler@0.1 plugin only reconciles".into()));
                        };
                        let i = p.instantiate_async(&mut store).await.map_err(|e| fail(&store, e, true))?;
                        let old = bindings::request_to_v01(req);
                        let r = i.call_reconcile(&mut store, &old).await.map_err(|e| fail(&store, e, false))?;
                        Ok(Raw::Reconcile(bindings::result_from_v01(r)))
                    }
                }
            }
            .await;
            (store, r)
        })
        .await?;
        Ok(r)
    }

    /// [`LoadedPlugin::call`], blocking (for the offline tools): starts now, uid and
    /// resourceVersion from the primary. Not from a plugin-runtime thread or an async context.
    pub fn reconcile(
        &self,
        req: &Request,
        object: String,
        cache: Arc<dyn crate::plugin::CacheView>,
    ) -> Result<RawResult, CallError> {
        self.reconcile_with(req, CallSpec::new(object, &req.primary), cache)
    }

    /// [`LoadedPlugin::reconcile`] with a given call spec (a replay's recorded clock).
    pub fn reconcile_with(
        &self,
        req: &Request,
        spec: CallSpec,
        cache: Arc<dyn crate::plugin::CacheView>,
    ) -> Result<RawResult, CallError> {
        self.engine().block_on(self.call(req.clone(), spec, cache))
    }

    /// [`LoadedPlugin::finalize`], blocking (for the offline tools), as [`LoadedPlugin::reconcile_with`].
    pub fn finalize_with(
        &self,
        req: &Request,
        spec: CallSpec,
        cache: Arc<dyn crate::plugin::CacheView>,
    ) -> Result<RawFinalize, CallError> {
        self.engine().block_on(self.finalize(req.clone(), spec, cache))
    }

    /// [`LoadedPlugin::validate`], blocking (for the offline tools).
    pub fn validate_with(
        &self,
        req: &AdmissionRequest,
        spec: CallSpec,
        cache: Arc<dyn crate::plugin::CacheView>,
    ) -> Result<RawValidate, CallError> {
        self.engine().block_on(self.validate(req.clone(), spec, cache, None))
    }

    /// [`LoadedPlugin::mutate`], blocking (for the offline tools).
    pub fn mutate_with(
        &self,
        req: &AdmissionRequest,
        spec: CallSpec,
        cache: Arc<dyn crate::plugin::CacheView>,
    ) -> Result<RawMutate, CallError> {
        self.engine().block_on(self.mutate(req.clone(), spec, cache, None))
    }
}
