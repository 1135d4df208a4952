//! What a plugin returns: an [`Outcome`] from `reconcile`, a [`Finalize`] from `finalize`, or a
//! [`Failure`].

use crate::{Delete, Event};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// What should change.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub(crate) apply: Vec<String>,
    pub(crate) delete: Vec<Delete>,
    pub(crate) status: Option<String>,
    pub(crate) events: Vec<Event>,
    pub(crate) requeue_after_ms: Option<u64>,
}

impl Outcome {
    /// Nothing to change.
    pub fn new() -> Self {
        Outcome::default()
    }
    /// Adds a server-side apply intent (any serialisable object with apiVersion, kind, metadata.name).
    pub fn apply<T: Serialize>(mut self, object: &T) -> Result<Self, Failure> {
        let text = serde_json::to_string(object)
            .map_err(|e| Failure::permanent(format!("cannot serialise an intent: {e}")))?;
        self.apply.push(text);
        Ok(self)
    }

    /// The intents to apply, as JSON text (what the host receives).
    pub fn applied(&self) -> &[String] {
        &self.apply
    }
    /// The `i`-th intent parsed as `T` (e.g. a k8s-openapi `ConfigMap`, or `serde_json::Value`);
    /// `None` if there is no such intent or it does not parse as `T`.
    pub fn applied_as<T: DeserializeOwned>(&self, i: usize) -> Option<T> {
        serde_json::from_str(self.apply.get(i)?).ok()
    }
}

/// A reconcile that could not decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What went wrong.
    pub message: String,
    /// Events to record.
    pub events: Vec<Event>,
    /// Retry with backoff?
    pub retry: bool,
}

impl Failure {
    /// A failure worth retrying with backoff.
    pub fn retry(message: impl Into<String>) -> Self {
        Failure { message: message.into(), events: vec![], retry: true }
    }
    /// A failure only a change of the primary can fix (no retry).
    pub fn permanent(message: impl Into<String>) -> Self {
        Failure { message: message.into(), events: vec![], retry: false }
    }
    /// Adds an event.
    pub fn event(mut self, e: Event) -> Self {
        self.events.push(e);
        self
    }
}

/// What `finalize` decided for a primary being deleted: deletions, status and events, and
/// whether the cleanup is complete.
#[derive(Debug, Clone, Default)]
pub struct Finalize {
    pub(crate) delete: Vec<Delete>,
    pub(crate) status: Option<String>,
    pub(crate) events: Vec<Event>,
    pub(crate) done: bool,
    pub(crate) requeue_after_ms: Option<u64>,
}

impl Finalize {
    /// The cleanup is complete once the deletions added are made: the host makes them, removes
    /// its finalizer, and the primary goes.
    pub fn done() -> Self {
        Finalize { done: true, ..Finalize::default() }
    }
    /// Not yet: the host makes the deletions added and calls `finalize` again when an owned
    /// object changes, or after [`Finalize::requeue_after_ms`] (5 s by default).
    pub fn not_yet() -> Self {
        Finalize::default()
    }

    /// Whether the cleanup is complete.
    pub fn is_done(&self) -> bool {
        self.done
    }
}

/// What an [`Outcome`] and a [`Finalize`] share: deletions, the status, events, the requeue hint.
macro_rules! shared {
    ($t:ty, $requeue:literal) => {
        impl $t {
            /// Adds a deletion.
            pub fn delete(mut self, d: Delete) -> Self {
                self.delete.push(d);
                self
            }
            /// Sets the primary's status (the value of its `status` field).
            pub fn status<T: Serialize>(mut self, status: &T) -> Result<Self, Failure> {
                self.status = Some(
                    serde_json::to_string(status)
                        .map_err(|e| Failure::permanent(format!("cannot serialise the status: {e}")))?,
                );
                Ok(self)
            }
            /// Adds an event.
            pub fn event(mut self, e: Event) -> Self {
                self.events.push(e);
                self
            }
            #[doc = $requeue]
            pub fn requeue_after_ms(mut self, ms: u64) -> Self {
                self.requeue_after_ms = Some(ms);
                self
            }
            /// The deletions.
            pub fn deletes(&self) -> &[Delete] {
                &self.delete
            }
            /// The status as JSON, if one is set.
            pub fn status_json(&self) -> Option<Value> {
                serde_json::from_str(self.status.as_deref()?).ok()
            }
            /// The events.
            pub fn events(&self) -> &[Event] {
                &self.events
            }
            /// The requeue hint.
            pub fn requeue_after(&self) -> Option<u64> {
                self.requeue_after_ms
            }
        }
    };
}

shared!(Outcome, "Asks to be reconciled again after `ms` milliseconds.");
shared!(Finalize, "When not done: be called again after `ms` milliseconds.");
