//! A plugin's outcome, decoded from WIT and checked by the write fence before anything is written.
//!
//! `decode` turns the raw WIT outcome into typed intents (JSON parses, required fields, size caps);
//! `fence` checks them against what the plugin declared and what the cluster holds. Either step
//! rejects the *whole* outcome: nothing of a rejected outcome is ever written.

pub mod decode;
pub mod fence;

use crate::vocab::Gvk;
use serde::Serialize;
use serde_json::Value;
use std::time::Duration;

pub use decode::{decode, decode_failure, decode_finalize, OutcomeLimits};
pub use fence::{fence, FenceContext};

/// Event severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Severity {
    /// Informational.
    Normal,
    /// Needs attention.
    Warning,
}

/// An event to record on the primary.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct EventSpec {
    /// Normal or Warning.
    #[serde(rename = "type")]
    pub severity: Severity,
    /// PascalCase reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

/// A server-side apply intent, with its identity resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Intent {
    /// Its kind.
    pub gvk: Gvk,
    /// Its namespace as the plugin gave it (`None` = not given).
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// The object as the plugin returned it.
    pub body: Value,
}

/// An object to delete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObjRef {
    /// Its kind.
    #[serde(skip)]
    pub gvk: Gvk,
    /// `apiVersion`, for output.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// Kind, for output.
    pub kind: String,
    /// Namespace as the plugin gave it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

/// A decoded outcome.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Outcome {
    /// Apply intents.
    pub apply: Vec<Intent>,
    /// Deletions.
    pub delete: Vec<ObjRef>,
    /// The primary's desired status.
    pub status: Option<Value>,
    /// Events.
    pub events: Vec<EventSpec>,
    /// Requeue hint.
    pub requeue_after: Option<Duration>,
}

/// What `finalize` decided for a primary being deleted.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FinalizeOutcome {
    /// Deletions.
    pub delete: Vec<ObjRef>,
    /// The primary's desired status.
    pub status: Option<Value>,
    /// Events.
    pub events: Vec<EventSpec>,
    /// The cleanup is complete once the deletions are made.
    pub done: bool,
    /// When not done: call again after this long.
    pub requeue_after: Duration,
}

impl FinalizeOutcome {
    /// The JSON form printed by `kwop plugin reconcile` for a primary being deleted.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "delete": self.delete,
            "status": self.status,
            "events": self.events,
            "done": self.done,
            "requeueAfterMs": (!self.done).then_some(self.requeue_after.as_millis() as u64),
        })
    }

    /// The same deletions, status and events as an ordinary outcome (for the write fence).
    pub fn as_outcome(&self) -> Outcome {
        Outcome {
            apply: Vec::new(),
            delete: self.delete.clone(),
            status: self.status.clone(),
            events: self.events.clone(),
            requeue_after: None,
        }
    }
}

/// A plugin's reported failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginFailure {
    /// What went wrong.
    pub message: String,
    /// Retry with backoff?
    pub retry: bool,
    /// Events to record.
    pub events: Vec<EventSpec>,
}

/// Why an outcome was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Rejection {
    /// Metric label.
    pub reason: RejectReason,
    /// What exactly was wrong, for the event and the log.
    pub message: String,
}

/// Categories of refusal (metric labels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// Not JSON, not an object, or a required field missing.
    Malformed,
    /// Over a size or count limit.
    TooLarge,
    /// A kind the plugin did not declare in `owns`.
    UndeclaredKind,
    /// Outside the primary's namespace (or a scope mismatch).
    WrongNamespace,
    /// The object is controlled by someone else, or by no one.
    NotControlled,
    /// The plugin set something only the host may set.
    Forbidden,
}

impl RejectReason {
    /// Metric label.
    pub fn label(self) -> &'static str {
        match self {
            RejectReason::Malformed => "malformed",
            RejectReason::TooLarge => "too_large",
            RejectReason::UndeclaredKind => "undeclared_kind",
            RejectReason::WrongNamespace => "wrong_namespace",
            RejectReason::NotControlled => "not_controlled",
            RejectReason::Forbidden => "forbidden",
        }
    }
}

pub(crate) fn reject(reason: RejectReason, message: impl Into<String>) -> Rejection {
    Rejection { reason, message: message.into() }
}

impl Outcome {
    /// The JSON form printed by `kwop plugin reconcile` (see the README's contract).
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "apply": self.apply.iter().map(|i| i.body.clone()).collect::<Vec<_>>(),
            "delete": self.delete,
            "status": self.status,
            "events": self.events,
            "requeueAfterMs": self.requeue_after.map(|d| d.as_millis() as u64),
        })
    }
}

impl PluginFailure {
    /// The JSON form printed by `kwop plugin reconcile` when the plugin fails.
    pub fn to_json(&self) -> Value {
        serde_json::json!({ "error": { "message": self.message, "retry": self.retry, "events": self.events } })
    }
}
