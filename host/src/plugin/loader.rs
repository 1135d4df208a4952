//! Loading a plugin file: read, hash, compile (or reuse the precompiled cache), link, validate.

use super::call;
use super::engine::PluginEngine;
use super::info::PluginInfo;
use super::limits::{LimitSet, Limits};
use super::sandbox::{self, CallContext, CallError, HostState, RawResult};
use super::wasi::Determinism;
use super::wit;
use crate::kinds::Gvk;
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;
use wasmtime::component::{Component, HasSelf, Linker};

/// Why a plugin file was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Not a WebAssembly component (truncated, corrupt, a core module, not wasm at all).
    #[error("not a valid WebAssembly component: {0}")]
    NotAComponent(String),
    /// A valid component that declares more than the host's sandbox allows (e.g. a table larger
    /// than the pool's slots, more memories than an instance may have).
    #[error("component exceeds the host's sandbox limits: {0}")]
    OverLimits(String),
    /// A component, but not of the `kwop:reconciler@0.1.x` world.
    #[error("component does not implement the kwop:reconciler@0.1.0 world: {0}")]
    WrongWorld(String),
    /// `info()` trapped, looped or ran out of memory.
    #[error("info() failed: {0}")]
    Info(#[from] CallError),
    /// `info()` returned something unusable.
    #[error("info() returned an invalid description: {0}")]
    InvalidInfo(String),
}

impl LoadError {
    /// Short label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            LoadError::Read { .. } => "read",
            LoadError::NotAComponent(_) => "not_a_component",
            LoadError::OverLimits(_) => "over_limits",
            LoadError::WrongWorld(_) => "wrong_world",
            LoadError::Info(_) => "info_failed",
            LoadError::InvalidInfo(_) => "invalid_info",
        }
    }
}

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
    pub grants: Arc<crate::source::grants::Grants>,
    /// A candidate run in shadow beside it (`ReconcilerPlugin.spec.candidate`).
    pub shadow: Option<Arc<crate::shadow::Candidate>>,
    engine: Arc<PluginEngine>,
    pre: wit::ReconcilerPre<HostState>,
    readable: Arc<HashSet<Gvk>>,
    name: Arc<str>,
}

/// A component compiled and linked against the host's world, whose `info()` has not run yet.
pub struct Compiled {
    sha256: String,
    source: PathBuf,
    from_cache: bool,
    pre: wit::ReconcilerPre<HostState>,
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

/// What one reconcile call is about besides its request: the object (for logs) and what makes
/// the call deterministic (see `plugin::wasi`).
#[derive(Debug, Clone)]
pub struct CallSpec {
    /// `namespace/name` of the primary, for logs.
    pub object: String,
    /// The primary's uid (seeds the call's random bytes).
    pub uid: String,
    /// The primary's resourceVersion (seeds the call's random bytes).
    pub resource_version: String,
    /// The instant the plugin's wall clock shows for the whole call: the reconcile's start.
    /// [`CallSpec::new`] sets it to now; a replay sets the recorded one.
    pub started_at: SystemTime,
    /// Set if the plugin reads its wall clock during the call (`None`: nobody asks).
    pub clock_read: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl CallSpec {
    /// A call about `object` (uid and resourceVersion read from the primary JSON), starting now.
    pub fn new(object: String, primary_json: &str) -> Self {
        #[derive(serde::Deserialize, Default)]
        struct Meta {
            #[serde(default)]
            uid: String,
            #[serde(default, rename = "resourceVersion")]
            resource_version: String,
        }
        #[derive(serde::Deserialize, Default)]
        struct Obj {
            #[serde(default)]
            metadata: Meta,
        }
        let m = serde_json::from_str::<Obj>(primary_json).unwrap_or_default().metadata;
        CallSpec {
            object,
            uid: m.uid,
            resource_version: m.resource_version,
            started_at: SystemTime::now(),
            clock_read: None,
        }
    }
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
        // Linking the host's own functions into a fresh linker cannot fail (no duplicate names).
        super::wasi::add_to_linker(&mut linker).map_err(|e| LoadError::WrongWorld(format!("{e:#}")))?;
        wit::Reconciler::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)
            .map_err(|e| LoadError::WrongWorld(format!("{e:#}")))?;
        let instance_pre = linker.instantiate_pre(&component).map_err(|e| LoadError::WrongWorld(format!("{e:#}")))?;
        let pre = wit::ReconcilerPre::new(instance_pre).map_err(|e| LoadError::WrongWorld(format!("{e:#}")))?;
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
                let i = pre2
                    .instantiate_async(&mut store)
                    .await
                    .map_err(|e| sandbox::classify(&store, e, deadline, true))?;
                i.call_info(&mut store).await.map_err(|e| sandbox::classify(&store, e, deadline, false))
            }
            .await;
            (store, r)
        })
        .await?;
        let info = PluginInfo::from_wit(raw).map_err(LoadError::InvalidInfo)?;
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
            grants: Arc::new(crate::source::grants::Grants::from_info(&info)),
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

    /// Runs one reconcile in a fresh instance, under this plugin's limits. The future waits for
    /// admission first; the call itself runs on the plugin runtime.
    pub async fn call(
        &self,
        req: wit::Request,
        spec: CallSpec,
        cache: Arc<dyn crate::plugin::CacheView>,
    ) -> Result<RawResult, CallError> {
        let ctx = CallContext {
            plugin: self.name.clone(),
            object: spec.object,
            cache,
            readable: self.readable.clone(),
            determinism: Determinism::new(&self.sha256, &spec.uid, &spec.resource_version, spec.started_at),
            clock_read: spec.clock_read,
        };
        let (pre, deadline) = (self.pre.clone(), self.limits.deadline);
        let (r, _) = call::run(&self.engine, &self.limits, ctx, move |mut store| async move {
            let r = async {
                let i = pre
                    .instantiate_async(&mut store)
                    .await
                    .map_err(|e| sandbox::classify(&store, e, deadline, true))?;
                i.call_reconcile(&mut store, &req).await.map_err(|e| sandbox::classify(&store, e, deadline, false))
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
        req: &wit::Request,
        object: String,
        cache: Arc<dyn crate::plugin::CacheView>,
    ) -> Result<RawResult, CallError> {
        self.reconcile_with(req, CallSpec::new(object, &req.primary), cache)
    }

    /// [`LoadedPlugin::reconcile`] with a given call spec (a replay's recorded clock).
    pub fn reconcile_with(
        &self,
        req: &wit::Request,
        spec: CallSpec,
        cache: Arc<dyn crate::plugin::CacheView>,
    ) -> Result<RawResult, CallError> {
        self.engine.block_on(self.call(req.clone(), spec, cache))
    }

    /// An instance kept for several calls (see [`Session`]).
    pub fn session(&self) -> Result<Session<'_>, CallError> {
        let ctx = CallContext {
            plugin: self.name.clone(),
            object: "-".into(),
            cache: Arc::new(super::StaticCache::default()),
            readable: self.readable.clone(),
            determinism: Determinism::new(&self.sha256, "", "", SystemTime::now()),
            clock_read: None,
        };
        let deadline = self.limits.deadline;
        let mut store = sandbox::new_store(&self.engine, &self.limits, ctx);
        let instance = self
            .engine
            .block_on(self.pre.instantiate_async(&mut store))
            .map_err(|e| sandbox::classify(&store, e, deadline, true))?;
        Ok(Session { plugin: self, store, instance, poisoned: false })
    }
}

/// One instance reused across calls: no instantiation cost, but guest memory (globals, heap)
/// carries over from call to call. The host does not use it for reconciles — a fresh instance per
/// reconcile is the isolation guarantee — it exists to measure what reuse would save (see
/// BENCHMARKS.md). It runs on the calling thread, outside the engine's admission. After a trap
/// the instance is poisoned and refuses further calls.
pub struct Session<'a> {
    plugin: &'a LoadedPlugin,
    store: wasmtime::Store<HostState>,
    instance: wit::Reconciler,
    poisoned: bool,
}

impl Session<'_> {
    /// One reconcile in the kept instance, with a fresh deadline.
    pub fn reconcile(
        &mut self,
        req: &wit::Request,
        cache: Arc<dyn crate::plugin::CacheView>,
    ) -> Result<RawResult, CallError> {
        if self.poisoned {
            return Err(CallError::Trap("instance is poisoned by an earlier trap".into()));
        }
        let deadline = self.plugin.limits.deadline;
        self.store.data_mut().cache = cache;
        sandbox::restart_deadline(&mut self.store, deadline);
        let r = self
            .plugin
            .engine
            .block_on(self.instance.call_reconcile(&mut self.store, req))
            .map_err(|e| sandbox::classify(&self.store, e, deadline, false));
        self.poisoned = r.is_err();
        sandbox::finish(&self.store, self.plugin.limits.log_lines, r)
    }
}

/// Compiles a component, or deserializes it from the precompile cache.
///
/// The cache entry is named by the component's sha256 and the engine's compatibility hash, and is
/// verified on read: a truncated or tampered cache file is recompiled, never loaded
/// (`plugin::precompiled`).
fn compile(engine: &PluginEngine, bytes: &[u8], sha256: &str) -> Result<(Component, bool), LoadError> {
    let check_component = || match wasmparser_kind(bytes) {
        Some(true) => Ok(()),
        Some(false) => Err(LoadError::NotAComponent(
            "this is a core WebAssembly module; build a component (e.g. wasm32-wasip2, or `wasm-tools component new`)"
                .into(),
        )),
        None => Err(LoadError::NotAComponent("file does not start with the WebAssembly magic number".into())),
    };
    check_component()?;
    let Some(cache) = engine.precompile_cache() else {
        let c = Component::new(&engine.engine, bytes).map_err(not_loadable)?;
        return Ok((c, false));
    };
    let key = format!("{sha256}-{}", engine.compat_key());
    if let Some(compiled) = cache.get(&key) {
        match deserialize(engine, &compiled) {
            Ok(c) => return Ok((c, true)),
            Err(e) => {
                tracing::warn!(dir = %cache.dir().display(), %key, "precompiled cache entry unusable, recompiling: {e:#}")
            }
        }
    }
    let compiled = engine.engine.precompile_component(bytes).map_err(not_loadable)?;
    if let Err(e) = cache.put(&key, &compiled) {
        tracing::warn!(dir = %cache.dir().display(), "cannot write the precompile cache (continuing without): {e}");
    }
    let c = deserialize(engine, &compiled).map_err(not_loadable)?;
    Ok((c, false))
}

/// A compile or load error: over the host's limits (the pooling allocator refuses what a module
/// declares; wasmtime has no typed error for it), or not a usable component.
fn not_loadable(e: wasmtime::Error) -> LoadError {
    let msg = format!("{e:#}");
    if msg.contains("pooling allocator") {
        LoadError::OverLimits(msg)
    } else {
        LoadError::NotAComponent(msg)
    }
}

#[allow(unsafe_code)]
fn deserialize(engine: &PluginEngine, compiled: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `compiled` is either what `precompile_component` just produced in this process, or
    // a cache file whose sha256 matches the sidecar we wrote next to it after compiling it with an
    // engine of the same compatibility hash (part of the file name). wasmtime additionally checks
    // the header and engine settings. The cache folder belongs to the host.
    unsafe { Component::deserialize(&engine.engine, compiled) }
}

/// `Some(true)` for a component, `Some(false)` for a core module, `None` for not wasm.
fn wasmparser_kind(bytes: &[u8]) -> Option<bool> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return None;
    }
    // Layer field: 0 = core module, 1 = component (version 0x0d).
    Some(bytes[6..8] == [1, 0])
}
