//! The one place that generates host bindings from `wit/`.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "reconciler",
    // Exports are called asynchronously: every call runs on a fiber that yields at epoch ticks
    // and can be dropped at its deadline (see `plugin::call`).
    exports: { default: async },
    // A query over its bound fails the call (the WIT type has no error case to return).
    imports: { "kwop:reconciler/cache.query": trappable },
});

/// The generated types, under a short name.
pub mod wit {
    pub use super::kwop::reconciler::cache;
    pub use super::kwop::reconciler::log;
    pub use super::kwop::reconciler::types::{Event, EventType, Failure, Gvk, ObjectRef, Outcome, PluginInfo, Request};
    pub use super::{Reconciler, ReconcilerPre};
}
