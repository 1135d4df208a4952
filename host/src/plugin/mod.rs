//! The plugin runtime: compile, validate, sandbox and call reconcile components.
//!
//! Life cycle (as in Spin and Kubewarden's policy-server): one [`PluginEngine`] per process; a
//! plugin file is compiled once (with an on-disk precompile cache keyed by sha256 and engine),
//! linked once ([`LoadedPlugin`] holds the pre-instantiated component), and every reconcile gets a
//! fresh instance in a fresh store with its own deadline and memory limit.

mod bindings;
pub mod cache_view;
pub mod engine;
pub mod guest_error;
mod host_api;
pub mod info;
pub mod loader;
mod output;
pub mod sandbox;

pub use bindings::wit;
pub use cache_view::{read_namespace, CacheView, PrimaryScope, StaticCache};
pub use engine::{EngineConfig, Limits, PluginEngine};
pub use info::PluginInfo;
pub use loader::{LoadError, LoadedPlugin, Session};
pub use sandbox::{CallError, RawResult};
