//! Events on primary objects: the plugin's own, and the host's reasons below.
//!
//! Policy (so a resync of an in-sync world writes nothing, not even events): a plugin's Normal
//! events are recorded only when the reconcile wrote something; Warning events are recorded, but
//! the same (object, reason, message) at most once per [`WARNING_REPEAT`].

use crate::outcome::{EventSpec, Severity};
use crate::watch::ObjectKey;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::DynamicObject;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::Client;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The plugin failed to run (trap, deadline, out of memory).
pub const REASON_PLUGIN_FAILED: &str = "ReconcilePluginFailed";
/// The plugin reported a failure that carried no Warning event of its own (e.g. a JavaScript
/// error thrown through `wit/js/kwop.js`): the host records one with the failure's message, so a
/// failed reconcile is never silent on the primary.
pub const REASON_RECONCILE_FAILED: &str = "ReconcileFailed";
/// The host refused the plugin's outcome (write fence).
pub const REASON_OUTCOME_REJECTED: &str = "OutcomeRejected";
/// The API server refused a write (e.g. 422: the plugin produced an invalid object).
pub const REASON_WRITE_FAILED: &str = "WriteFailed";

/// How long an identical Warning is not repeated on the same object.
pub const WARNING_REPEAT: Duration = Duration::from_secs(300);

/// Records events for one plugin.
pub struct EventSink {
    recorder: Recorder,
    recent: Mutex<HashMap<(ObjectKey, String, String), Instant>>,
}

impl EventSink {
    /// A sink reporting as `kwop-<plugin>` from `instance` (pod or host name).
    pub fn new(client: Client, controller: String, instance: Option<String>) -> Self {
        let reporter = Reporter { controller, instance };
        EventSink { recorder: Recorder::new(client, reporter), recent: Mutex::new(HashMap::new()) }
    }

    /// The events of `events` that the policy above lets through, ready to publish.
    pub fn select(&self, primary: &DynamicObject, events: &[EventSpec], wrote: bool) -> Vec<Event> {
        let key = ObjectKey::of(primary);
        events
            .iter()
            .filter(|e| match e.severity {
                Severity::Normal => wrote,
                Severity::Warning => self.first_in_window(&key, e),
            })
            .map(|e| Event {
                type_: match e.severity {
                    Severity::Normal => EventType::Normal,
                    Severity::Warning => EventType::Warning,
                },
                reason: e.reason.clone(),
                note: Some(e.message.clone()),
                action: "Reconcile".into(),
                secondary: None,
            })
            .collect()
    }

    /// Publishes events selected by [`EventSink::select`]. Failures are logged, never returned:
    /// an event is never a reason to fail or retry a reconcile. Returns how many were published.
    pub async fn publish(&self, reference: &ObjectReference, events: &[Event]) -> usize {
        let mut published = 0;
        for ev in events {
            match self.recorder.publish(ev, reference).await {
                Ok(()) => published += 1,
                Err(err) => tracing::warn!(
                    object = %format!("{}/{}", reference.namespace.as_deref().unwrap_or(""), reference.name.as_deref().unwrap_or("")),
                    reason = %ev.reason,
                    "could not record event: {err}"
                ),
            }
        }
        published
    }

    fn first_in_window(&self, key: &ObjectKey, e: &EventSpec) -> bool {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if recent.len() > 10_000 {
            recent.retain(|_, t| now.duration_since(*t) < WARNING_REPEAT);
        }
        let k = (key.clone(), e.reason.clone(), e.message.clone());
        match recent.get(&k) {
            Some(t) if now.duration_since(*t) < WARNING_REPEAT => false,
            _ => {
                recent.insert(k, now);
                true
            }
        }
    }

    /// Forgets dedupe state of a deleted object.
    pub fn forget(&self, key: &ObjectKey) {
        self.recent.lock().unwrap_or_else(|p| p.into_inner()).retain(|(k, _, _), _| k != key);
    }
}
