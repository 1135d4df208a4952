//! The one place that generates host bindings from `wit/`.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "reconciler",
});

/// The generated types, under a short name.
pub mod wit {
    pub use super::kwop::reconciler::cache;
    pub use super::kwop::reconciler::log;
    pub use super::kwop::reconciler::types::{Event, EventType, Failure, Gvk, ObjectRef, Outcome, PluginInfo, Request};
    pub use super::{Reconciler, ReconcilerPre};
}
