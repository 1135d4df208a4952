//! Loading a plugin file: read, hash, compile (or reuse the precompiled cache), link, validate.

use super::engine::{Limits, PluginEngine};
use super::info::PluginInfo;
use super::sandbox::{self, CallContext, CallError, HostState, RawResult};
use super::wit;
use crate::kinds::Gvk;
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
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
    /// Sandbox limits for its calls.
    pub limits: Limits,
    /// Whether compiling was avoided thanks to the precompile cache.
    pub from_cache: bool,
    engine: Arc<PluginEngine>,
    pre: wit::ReconcilerPre<HostState>,
    readable: Arc<HashSet<Gvk>>,
    name: Arc<str>,
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
    /// Reads and loads a plugin file.
    pub fn load_file(engine: &Arc<PluginEngine>, path: &Path, limits: Limits) -> Result<Self, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read { path: path.into(), source })?;
        Self::load_bytes(engine, &bytes, path, limits)
    }

    /// Loads a plugin from bytes (`source` is only for messages).
    pub fn load_bytes(
        engine: &Arc<PluginEngine>,
        bytes: &[u8],
        source: &Path,
        limits: Limits,
    ) -> Result<Self, LoadError> {
        let sha256 = sha256_hex(bytes);
        let started = Instant::now();
        let (component, from_cache) = compile(engine, bytes, &sha256)?;
        let mut linker: Linker<HostState> = Linker::new(&engine.engine);
        // Linking the host's own functions into a fresh linker cannot fail (no duplicate names).
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| LoadError::WrongWorld(format!("{e:#}")))?;
        wit::Reconciler::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)
            .map_err(|e| LoadError::WrongWorld(format!("{e:#}")))?;
        let instance_pre = linker.instantiate_pre(&component).map_err(|e| LoadError::WrongWorld(format!("{e:#}")))?;
        let pre = wit::ReconcilerPre::new(instance_pre).map_err(|e| LoadError::WrongWorld(format!("{e:#}")))?;

        let mut plugin = LoadedPlugin {
            info: PluginInfo {
                name: String::new(),
                version: String::new(),
                primary: Gvk::new("", "", ""),
                owns: vec![],
                reads: vec![],
            },
            sha256,
            source: source.to_path_buf(),
            limits,
            from_cache,
            engine: engine.clone(),
            pre,
            readable: Arc::new(HashSet::new()),
            name: Arc::from("(loading)"),
        };
        let raw = plugin.call_info()?;
        plugin.info = PluginInfo::from_wit(raw).map_err(LoadError::InvalidInfo)?;
        plugin.readable = Arc::new(plugin.info.readable().cloned().collect());
        plugin.name = Arc::from(plugin.info.name.as_str());
        tracing::debug!(plugin = %plugin.info.name, sha256 = %plugin.sha256, from_cache, elapsed_ms = started.elapsed().as_millis() as u64, "plugin loaded");
        Ok(plugin)
    }

    fn call_info(&self) -> Result<wit::PluginInfo, CallError> {
        let ctx = CallContext {
            plugin: Arc::from(self.source.display().to_string()),
            object: "-".into(),
            cache: Arc::new(super::StaticCache::default()),
            readable: Arc::new(HashSet::new()),
        };
        let deadline = self.limits.info_deadline;
        let mut store = sandbox::new_store(&self.engine, &self.limits, ctx, deadline);
        let result = (|| {
            let instance =
                self.pre.instantiate(&mut store).map_err(|e| sandbox::classify(&store, e, deadline, true))?;
            instance.call_info(&mut store).map_err(|e| sandbox::classify(&store, e, deadline, false))
        })();
        sandbox::finish(&store, self.limits.log_lines, result)
    }

    /// Runs one reconcile in a fresh instance. Blocking: call it from a blocking thread.
    pub fn reconcile(
        &self,
        req: &wit::Request,
        object: String,
        cache: Arc<dyn crate::plugin::CacheView>,
    ) -> Result<RawResult, CallError> {
        let ctx = CallContext { plugin: self.name.clone(), object, cache, readable: self.readable.clone() };
        let deadline = self.limits.deadline;
        let mut store = sandbox::new_store(&self.engine, &self.limits, ctx, deadline);
        let result = (|| {
            let instance =
                self.pre.instantiate(&mut store).map_err(|e| sandbox::classify(&store, e, deadline, true))?;
            instance.call_reconcile(&mut store, req).map_err(|e| sandbox::classify(&store, e, deadline, false))
        })();
        sandbox::finish(&store, self.limits.log_lines, result)
    }

    /// An instance kept for several calls (see [`Session`]).
    pub fn session(&self) -> Result<Session<'_>, CallError> {
        let ctx = CallContext {
            plugin: self.name.clone(),
            object: "-".into(),
            cache: Arc::new(super::StaticCache::default()),
            readable: self.readable.clone(),
        };
        let deadline = self.limits.deadline;
        let mut store = sandbox::new_store(&self.engine, &self.limits, ctx, deadline);
        let instance = self.pre.instantiate(&mut store).map_err(|e| sandbox::classify(&store, e, deadline, true))?;
        Ok(Session { plugin: self, store, instance, poisoned: false })
    }
}

/// One instance reused across calls: no instantiation cost, but guest memory (globals, heap)
/// carries over from call to call. The host does not use it for reconciles — a fresh instance per
/// reconcile is the isolation guarantee — it exists to measure what reuse would save (see
/// BENCHMARKS.md). After a trap the instance is poisoned and refuses further calls.
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
        self.store.set_epoch_deadline(PluginEngine::ticks(deadline));
        let r = self
            .instance
            .call_reconcile(&mut self.store, req)
            .map_err(|e| sandbox::classify(&self.store, e, deadline, false));
        self.poisoned = r.is_err();
        sandbox::finish(&self.store, self.plugin.limits.log_lines, r)
    }
}

/// Compiles a component, or deserializes it from the precompile cache.
///
/// The cache file is named by the component's sha256 and the engine's compatibility hash, and a
/// sidecar holds the sha256 of the compiled bytes: a truncated or tampered cache file is
/// recompiled, never loaded.
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
    let Some(dir) = engine.config.cache_dir.as_ref() else {
        let c = Component::new(&engine.engine, bytes).map_err(|e| LoadError::NotAComponent(format!("{e:#}")))?;
        return Ok((c, false));
    };
    let key = format!("{sha256}-{}", engine.compat_key());
    let (path, sum_path) = (dir.join(format!("{key}.cwasm")), dir.join(format!("{key}.sha256")));
    if let (Ok(compiled), Ok(sum)) = (std::fs::read(&path), std::fs::read_to_string(&sum_path)) {
        if sha256_hex(&compiled) == sum.trim() {
            match deserialize(engine, &compiled) {
                Ok(c) => return Ok((c, true)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), "precompiled cache entry unusable, recompiling: {e:#}")
                }
            }
        } else {
            tracing::warn!(path = %path.display(), "precompiled cache entry is corrupt, recompiling");
        }
    }
    let compiled = engine.engine.precompile_component(bytes).map_err(|e| LoadError::NotAComponent(format!("{e:#}")))?;
    if let Err(e) = write_atomically(dir, &path, &compiled)
        .and_then(|_| write_atomically(dir, &sum_path, sha256_hex(&compiled).as_bytes()))
    {
        tracing::warn!(dir = %dir.display(), "cannot write the precompile cache (continuing without): {e}");
    }
    let c = deserialize(engine, &compiled).map_err(|e| LoadError::NotAComponent(format!("{e:#}")))?;
    Ok((c, false))
}

#[allow(unsafe_code)]
fn deserialize(engine: &PluginEngine, compiled: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `compiled` is either what `precompile_component` just produced in this process, or
    // a cache file whose sha256 matches the sidecar we wrote next to it after compiling it with an
    // engine of the same compatibility hash (part of the file name). wasmtime additionally checks
    // the header and engine settings. The cache folder belongs to the host.
    unsafe { Component::deserialize(&engine.engine, compiled) }
}

fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// `Some(true)` for a component, `Some(false)` for a core module, `None` for not wasm.
fn wasmparser_kind(bytes: &[u8]) -> Option<bool> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return None;
    }
    // Layer field: 0 = core module, 1 = component (version 0x0d).
    Some(bytes[6..8] == [1, 0])
}
