//! What one reconcile did, noted as it goes for the flight recorder (`telemetry::flight`): the
//! reconcile's future runs inside [`scope`], and any step of it (`reconcile`, `writes`,
//! `finalizing`, `report`) adds to the note with [`note`] — no note outside a reconcile (e.g. a
//! write of the ReconcilerPlugin source) and nothing to thread through every signature.

use crate::telemetry::flight::{Flight, Obj, Verdict, WriteNote};
use std::cell::RefCell;
use std::future::Future;

tokio::task_local! {
    static NOTE: RefCell<Option<Flight>>;
}

/// Runs one reconcile with `flight` as its note; gives back what was noted (`None` when the
/// reconcile asked for nothing to be kept: [`discard`]).
pub(super) async fn scope<T>(flight: Flight, fut: impl Future<Output = T>) -> (T, Option<Flight>) {
    NOTE.scope(RefCell::new(Some(flight)), async move {
        let out = fut.await;
        let kept = NOTE.with(|n| n.borrow_mut().take());
        (out, kept)
    })
    .await
}

/// Adds to the current reconcile's note (nothing outside a reconcile).
pub(super) fn note(f: impl FnOnce(&mut Flight)) {
    let _ = NOTE.try_with(|n| {
        if let Some(flight) = n.borrow_mut().as_mut() {
            f(flight)
        }
    });
}

/// Sets how the reconcile ended.
pub(super) fn verdict(v: Verdict) {
    note(|f| f.verdict = v);
}

/// Keeps nothing of this reconcile (the primary is gone).
pub(super) fn discard() {
    let _ = NOTE.try_with(|n| n.borrow_mut().take());
}

/// Notes one write.
pub(super) fn write(verb: &str, object: Obj, result: &str, why: Option<String>) {
    note(|f| f.writes.push(WriteNote { verb: verb.into(), object, result: result.into(), why }));
}

/// An object as the recorder names it.
pub(super) fn obj(kind: &str, namespace: Option<&str>, name: &str) -> Obj {
    Obj { kind: kind.to_string(), namespace: namespace.map(str::to_string), name: name.to_string() }
}
