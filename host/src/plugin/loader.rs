//! Loading a plugin file: read, hash, compile (or reuse the precompiled cache), link, validate.

use super::bindings::{self, v01, v02, v03};
use super::call;
use super::compile::compile;
use super::engine::PluginEngine;
use super::errors::{CallError, LoadError};
use super::limits::{LimitSet, Limits};
use super::sandbox::{self, CallContext, HostState};
use super::wasi::Determinism;
use super::world::{Pre, World};
use crate::vocab::{Gvk, PluginInfo};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;
use wasmtime::component::{HasSelf, Linker};

/// A compiled, linked and validated plugin: ready to reconcile.
pub struct LoadedPlugin {
    /// What the plugin said about itself.
    pub info: PluginInfo,
    /// sha256 of the component file, hex.
    pub sha256: String,
    /// Where it came from.
    pub source: PathBuf,
    /// Sandbox limits for its calls (its own, by name).
    pub limits: Limits,
    /// Whether compiling was avoided thanks to the precompile cache.
    pub from_cache: bool,
    /// What it may touch: its own declaration in folder mode, what the admin granted for a
    /// ReconcilerPlugin (checked against the declaration before it starts).
    pub grants: Arc<crate::vocab::grants::Grants>,
    /// A candidate run in shadow beside it (`ReconcilerPlugin.spec.candidate`).
    pub shadow: Option<Arc<dyn super::Shadow>>,
    engine: Arc<PluginEngine>,
    pub(crate) pre: Pre,
    readable: Arc<HashSet<Gvk>>,
    name: Arc<str>,
}

/// A component compiled and linked against the host's world, whose `info()` has not run yet.
pub struct Compiled {
    sha256: String,
    source: PathBuf,
    from_cache: bool,
    pre: Pre,
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin").field("info", &self.info).field("sha256", &self.sha256).finish()
    }
}

/// sha256 hex of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl LoadedPlugin {
    /// Reads and loads a plugin file (blocking: compiles, then runs `info()`).
    pub fn load_file(engine: &Arc<PluginEngine>, path: &Path, limits: impl Into<LimitSet>) -> Result<Self, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read { path: path.into(), source })?;
        Self::load_bytes(engine, &bytes, path, limits)
    }

    /// Loads a plugin from bytes (`source` is only for messages). Blocking; not from a
    /// plugin-runtime thread or inside an async context.
    pub fn load_bytes(
        engine: &Arc<PluginEngine>,
        bytes: &[u8],
        source: &Path,
        limits: impl Into<LimitSet>,
    ) -> Result<Self, LoadError> {
        let compiled = Self::compile(engine, bytes, source)?;
        let limits = limits.into();
        engine.block_on(Self::from_compiled(engine, compiled, &limits))
    }

    /// Compiles (or reuses the precompiled cache) and links against the host's world. Blocking
    /// and CPU-bound: call it from a blocking thread.
    pub fn compile(engine: &Arc<PluginEngine>, bytes: &[u8], source: &Path) -> Result<Compiled, LoadError> {
        let sha256 = sha256_hex(bytes);
        let (component, from_cache) = compile(engine, bytes, &sha256)?;
        let mut linker: Linker<HostState> = Linker::new(&engine.engine);
        // Linking the host's own functions into a fresh linker cannot fail (no duplicate names:
        // the two versions' imports are distinct instances).
        let wrong = |e: wasmtime::Error| LoadError::WrongWorld(format!("{e:#}"));
        super::wasi::add_to_linker(&mut linker).map_err(wrong)?;
        v01::Reconciler::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s).map_err(wrong)?;
        v02::Reconciler::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s).map_err(wrong)?;
        v03::Reconciler::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s).map_err(wrong)?;
        let instance_pre = linker.instantiate_pre(&component).map_err(wrong)?;
        // The newest world first; an older one only if the component is not of the newer.
        let pre = match v03::ReconcilerPre::new(instance_pre.clone()) {
            Ok(p) => Pre::V03(p),
            Err(e3) => match v02::ReconcilerPre::new(instance_pre.clone()) {
                Ok(p) => Pre::V02(p),
                Err(e2) => match v01::ReconcilerPre::new(instance_pre) {
                    Ok(p) => Pre::V01(p),
                    Err(e1) => {
                        return Err(LoadError::WrongWorld(format!("as 0.3: {e3:#}; as 0.2: {e2:#}; as 0.1: {e1:#}")));
                    }
                },
            },
        };
        Ok(Compiled { sha256, source: source.to_path_buf(), from_cache, pre })
    }

    /// Runs `info()` under the ceiling of `limits` (the name is not known before), then checks
    /// what it used against the plugin's own limits: `info()` obeys them as `reconcile` does.
    pub async fn from_compiled(
        engine: &Arc<PluginEngine>,
        compiled: Compiled,
        limits: &LimitSet,
    ) -> Result<Self, LoadError> {
        let Compiled { sha256, source, from_cache, pre } = compiled;
        let ceiling = limits.ceiling();
        let ctx = CallContext {
            plugin: Arc::from(source.display().to_string()),
            object: "-".into(),
            cache: Arc::new(super::StaticCache::default()),
            readable: Arc::new(HashSet::new()),
            determinism: Determinism::new(&sha256, "", "", SystemTime::now()),
            clock_read: None,
        };
        let (pre2, deadline) = (pre.clone(), ceiling.deadline);
        let (raw, stats) = call::run(engine, &ceiling, ctx, move |mut store| async move {
            let r = async {
                let fail = |s: &wasmtime::Store<HostState>, e, inst| sandbox::classify(s, e, deadline, inst);
                match pre2 {
                    Pre::V03(p) => {
                        let i = p.instantiate_async(&mut store).await.map_err(|e| fail(&store, e, true))?;
                        let info = i.call_info(&mut store).await.map_err(|e| fail(&store, e, false))?;
                        Ok(super::v03::info(info))
                    }
                    Pre::V02(p) => {
                        let i = p.instantiate_async(&mut store).await.map_err(|e| fail(&store, e, true))?;
                        let info = i.call_info(&mut store).await.map_err(|e| fail(&store, e, false))?;
                        Ok(PluginInfo::from_wit(info))
                    }
                    Pre::V01(p) => {
                        let i = p.instantiate_async(&mut store).await.map_err(|e| fail(&store, e, true))?;
                        let info = i.call_info(&mut store).await.map_err(|e| fail(&store, e, false))?;
                        Ok(PluginInfo::from_wit(bindings::info_from_v01(info)))
                    }
                }
            }
            .await;
            (store, r)
        })
        .await?;
        let info = raw.map_err(LoadError::InvalidInfo)?;
        let own = limits.for_plugin(&info.name).clone();
        if stats.elapsed > own.deadline {
            return Err(LoadError::Info(CallError::Deadline(own.deadline)));
        }
        if stats.peak_memory > own.memory_bytes {
            return Err(LoadError::Info(CallError::OutOfMemory { limit: own.memory_bytes, asked: stats.peak_memory }));
        }
        engine.admission.check(own.memory_bytes).map_err(|e| LoadError::InvalidInfo(e.to_string()))?;
        tracing::debug!(plugin = %info.name, %sha256, from_cache, info_ms = stats.elapsed.as_millis() as u64, "plugin loaded");
        Ok(LoadedPlugin {
            readable: Arc::new(info.readable().cloned().collect()),
            grants: Arc::new(crate::vocab::grants::Grants::from_info(&info)),
            name: Arc::from(info.name.as_str()),
            shadow: None,
            info,
            sha256,
            source,
            limits: own,
            from_cache,
            engine: engine.clone(),
            pre,
        })
    }

    /// The same component under other grants, without a candidate (one is attached at the next
    /// load): how a reload that failed still takes the admin's new grants into effect.
    pub fn with_grants(&self, grants: Arc<crate::vocab::grants::Grants>) -> LoadedPlugin {
        LoadedPlugin {
            info: self.info.clone(),
            sha256: self.sha256.clone(),
            source: self.source.clone(),
            limits: self.limits.clone(),
            from_cache: self.from_cache,
            grants,
            shadow: None,
            engine: self.engine.clone(),
            pre: self.pre.clone(),
            readable: self.readable.clone(),
            name: self.name.clone(),
        }
    }

    pub(crate) fn name_arc(&self) -> Arc<str> {
        self.name.clone()
    }

    pub(crate) fn readable_kinds(&self) -> Arc<HashSet<Gvk>> {
        self.readable.clone()
    }

    pub(crate) fn engine(&self) -> &Arc<PluginEngine> {
        &self.engine
    }

    /// The component's digest as `sha256:…` (for traces and `kwop explain`).
    pub fn digest(&self) -> String {
        format!("sha256:{}", self.sha256.trim_start_matches("sha256:"))
    }

    /// The contract version this component implements.
    pub fn world(&self) -> World {
        match self.pre {
            Pre::V01(_) => World::V01,
            Pre::V02(_) => World::V02,
            Pre::V03(_) => World::V03,
        }
    }
}
