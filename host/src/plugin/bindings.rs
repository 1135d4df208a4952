//! The one place that generates host bindings from `wit/`: one module per contract version the
//! host serves (`kwop:reconciler@0.1.x`, `@0.2.x` and `@0.3.x`), and the conversions from 0.1's
//! values to 0.2's, which the rest of the host works with (0.3's: `plugin::v03`).

/// `kwop:reconciler@0.1.0` (`wit/reconciler.wit`).
pub mod v01 {
    wasmtime::component::bindgen!({
        path: "../wit/reconciler.wit",
        world: "reconciler",
        // Exports are called asynchronously: every call runs on a fiber that yields at epoch
        // ticks and can be dropped at its deadline (see `plugin::call`).
        exports: { default: async },
        // A query over its bound fails the call (the WIT type has no error case to return).
        imports: { "kwop:reconciler/cache.query": trappable },
    });
}

/// `kwop:reconciler@0.2.0` (`wit/v0.2/reconciler.wit`).
pub mod v02 {
    wasmtime::component::bindgen!({
        path: "../wit/v0.2/reconciler.wit",
        world: "reconciler",
        exports: { default: async },
        imports: { "kwop:reconciler/cache.query": trappable },
    });
}

/// `kwop:reconciler@0.3.0` (`wit/v0.3/reconciler.wit`).
pub mod v03 {
    wasmtime::component::bindgen!({
        path: "../wit/v0.3/reconciler.wit",
        world: "reconciler",
        exports: { default: async },
    });
}

/// The contract's values as the host handles them: 0.2's (a superset of 0.1's).
pub mod wit {
    pub use super::v02::kwop::reconciler::types::{
        AdmissionRequest, Event, EventType, Failure, FinalizeOutcome, Gvk, Instant, ObjectRef, Operation, Outcome,
        OwnedKind, PluginInfo, Request, Violation,
    };
}

use super::bindings::v01::kwop::reconciler::types as old;

fn gvk(g: old::Gvk) -> wit::Gvk {
    wit::Gvk { group: g.group, version: g.version, kind: g.kind }
}

fn event(e: old::Event) -> wit::Event {
    let severity = match e.severity {
        old::EventType::Normal => wit::EventType::Normal,
        old::EventType::Warning => wit::EventType::Warning,
    };
    wit::Event { severity, reason: e.reason, message: e.message }
}

/// A 0.1 `info()`: every owned kind in the primary's namespace, no finalizer.
pub(crate) fn info_from_v01(i: old::PluginInfo) -> wit::PluginInfo {
    wit::PluginInfo {
        name: i.name,
        version: i.version,
        primary: gvk(i.primary),
        owns: i.owns.into_iter().map(|k| wit::OwnedKind { kind: gvk(k), across_namespaces: false }).collect(),
        reads: i.reads.into_iter().map(gvk).collect(),
        finalizes: false,
        validates: false,
    }
}

/// A 0.2 request for a 0.1 plugin: the same, without `now` (its wall clock still reads it).
pub(crate) fn request_to_v01(r: &wit::Request) -> old::Request {
    old::Request { primary: r.primary.clone(), owned: r.owned.clone() }
}

/// A 0.1 `reconcile` result.
pub(crate) fn result_from_v01(r: Result<old::Outcome, old::Failure>) -> Result<wit::Outcome, wit::Failure> {
    match r {
        Ok(o) => Ok(wit::Outcome {
            apply: o.apply,
            delete: o
                .delete
                .into_iter()
                .map(|d| wit::ObjectRef { gvk: gvk(d.gvk), namespace: d.namespace, name: d.name })
                .collect(),
            status: o.status,
            events: o.events.into_iter().map(event).collect(),
            requeue_after_ms: o.requeue_after_ms,
        }),
        Err(f) => {
            Err(wit::Failure { message: f.message, events: f.events.into_iter().map(event).collect(), retry: f.retry })
        }
    }
}
