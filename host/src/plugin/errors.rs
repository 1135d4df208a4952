//! The runtime's two errors: why a plugin file was not loaded, and why a call into a loaded
//! plugin did not return a value. Every part of the runtime reports with them, so they depend on
//! none of those parts.

use std::path::PathBuf;
use std::time::Duration;

/// Why a call into a plugin did not return a value.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The deadline passed (e.g. an infinite loop).
    #[error("plugin exceeded its deadline of {0:?}")]
    Deadline(Duration),
    /// The plugin tried to grow its memories and tables past its limit.
    #[error("plugin exceeded its memory limit of {limit} bytes (asked for {asked})")]
    OutOfMemory {
        /// The limit.
        limit: usize,
        /// What its memories and tables would have added up to.
        asked: usize,
    },
    /// The plugin trapped (panic, abort, unreachable, out-of-bounds access, a sleep, an
    /// over-size cache query...).
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
    /// A component, but not of the `kwop:reconciler@0.1.x` or `@0.2.x` world.
    #[error("component does not implement the kwop:reconciler world (0.2.x or 0.1.x): {0}")]
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
