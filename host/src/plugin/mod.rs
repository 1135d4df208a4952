//! The plugin runtime: compile, validate, sandbox and call reconcile components.
//!
//! Life cycle (as in Spin and Kubewarden's policy-server): one [`PluginEngine`] per process; a
//! plugin file is compiled once (with an on-disk precompile cache keyed by sha256 and engine),
//! linked once ([`LoadedPlugin`] holds the pre-instantiated component), and every call gets a
//! fresh instance in a fresh store, admitted against the host's instance slots and memory budget,
//! under its plugin's deadline and memory limit, with deterministic WASI ([`wasi`]).
//!
//! Floor 2 of 0–15 (`docs/ARCHITECTURE.md`). May use: `vocab`. Used by: `admission`, `cli`,
//! `controller`, `hotswap`, `offline`, `outcome`, `shadow`, `source`, `telemetry`, `watch`.

pub mod admission;
mod beside;
mod bindings;
pub mod cache_view;
mod call;
mod compile;
pub mod engine;
mod errors;
mod exports;
pub mod guest_error;
mod host_api;
pub mod inflight;
mod info;
pub mod limits;
pub mod loader;
mod output;
pub mod precompiled;
pub mod sandbox;
mod session;
pub mod ticker;
mod v03;
pub mod wasi;
pub mod world;

pub use beside::{Shadow, ShadowCall};
pub use bindings::wit;
pub use cache_view::{read_namespace, CacheView, PrimaryScope, QueryTooLarge, StaticCache};
pub use engine::{EngineConfig, PluginEngine, Tuning};
pub use errors::{CallError, LoadError};
pub use limits::{LimitSet, Limits};
pub use loader::{Compiled, LoadedPlugin};
pub use sandbox::RawResult;
pub use session::Session;
pub use world::{
    AdmissionRequest, CallSpec, ConversionRequest, Mutation, Operation, RawConvert, RawFinalize, RawMutate,
    RawValidate, Request, World,
};
