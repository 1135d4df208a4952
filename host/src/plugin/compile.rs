//! Compiling a component, or taking it from the precompile cache; telling components from modules.

use super::engine::PluginEngine;
use super::errors::LoadError;
use wasmtime::component::Component;

/// Compiles a component, or deserializes it from the precompile cache.
///
/// The cache entry is named by the component's sha256 and the engine's compatibility hash, and is
/// verified on read: a truncated or tampered cache file is recompiled, never loaded
/// (`plugin::precompiled`).
pub(crate) fn compile(engine: &PluginEngine, bytes: &[u8], sha256: &str) -> Result<(Component, bool), LoadError> {
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
