//! Events on primary objects: the plugin's own, and the host's reasons below.
//!
//! Policy (so a resync of an in-sync world writes nothing, not even events): a plugin's Normal
//! events are recorded only when the reconcile wrote something; Warning events are recorded, but
//! the same (object, reason, message) at most once per [`WARNING_REPEAT`]. On top of that, as
//! client-go's spam filter, each object gets a bucket of [`SPAM_BURST`] events refilled by one
//! per [`SPAM_REFILL`], so a Warning whose text changes at every retry cannot flood the events
//! API. Messages are cut to the events API's 1 KiB `note`. Events are written by `events.rs`
//! (a changed message is a new event; the reconcile's trace id is an annotation).
//!
//! Floor 8 of 0–15 (`docs/ARCHITECTURE.md`). May use: `leader`, `outcome`, `telemetry`, `watch`. Used by:
//! `controller`, `source` (events on ReconcilerPlugins).

pub mod events;

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
/// `finalize` failed (a trap, a failure without a Warning of its own, or a refused outcome): the
/// primary's deletion waits.
pub const REASON_FINALIZE_FAILED: &str = "FinalizeFailed";

/// Publishes one Warning event about `reference` as `kwop` itself, in the background: matters of
/// the host's, not of a plugin's reconcile (a pin ignored, a swap refused). Failures are logged.
pub fn host_warning(client: &Client, reference: ObjectReference, reason: &str, note: &str) {
    let recorder = Recorder::new(client.clone(), "kwop".into());
    let ev = Event {
        type_: EventType::Warning,
        reason: reason.into(),
        note: Some(truncate(note, NOTE_MAX)),
        action: "Load".into(),
        secondary: None,
    };
    tokio::spawn(async move {
        if let Err(e) = recorder.publish(&ev, &reference).await {
            tracing::debug!(reason = %ev.reason, "event not recorded: {e}");
        }
    });
}

/// How long an identical Warning is not repeated on the same object.
pub const WARNING_REPEAT: Duration = Duration::from_secs(300);
/// Events one object may get at once (client-go's `EventSourceObjectSpamFilter`: 25).
pub const SPAM_BURST: f64 = 25.0;
/// Then one more per this long (client-go: one per 5 minutes).
pub const SPAM_REFILL: Duration = Duration::from_secs(300);
/// The events API refuses a `note` longer than this.
pub const NOTE_MAX: usize = 1024;

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Records events for one plugin.
pub struct EventSink {
    publisher: events::Publisher,
    recent: Mutex<HashMap<(ObjectKey, String, String), Instant>>,
    buckets: Mutex<HashMap<ObjectKey, Bucket>>,
}

/// `text` cut to at most `max` bytes on a character boundary, marked with "…" when cut.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

impl EventSink {
    /// A sink reporting as `kwop-<plugin>` from `instance` (pod or host name).
    pub fn new(client: Client, controller: String, instance: Option<String>) -> Self {
        let reporter = Reporter { controller, instance };
        EventSink {
            publisher: events::Publisher::new(client, reporter),
            recent: Mutex::new(HashMap::new()),
            buckets: Mutex::new(HashMap::new()),
        }
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
            .filter(|e| {
                let ok = self.take_token(&key);
                if !ok {
                    tracing::debug!(object = %key, reason = %e.reason, "event dropped: over the per-object rate");
                }
                ok
            })
            .map(|e| Event {
                type_: match e.severity {
                    Severity::Normal => EventType::Normal,
                    Severity::Warning => EventType::Warning,
                },
                reason: e.reason.clone(),
                note: Some(truncate(&e.message, NOTE_MAX)),
                action: "Reconcile".into(),
                secondary: None,
            })
            .collect()
    }

    /// Publishes events selected by [`EventSink::select`], with the trace id of the reconcile
    /// that decided them (Warning events carry it as an annotation). Failures are logged, never
    /// returned: an event is never a reason to fail or retry a reconcile. Returns how many were
    /// published.
    pub async fn publish(&self, reference: &ObjectReference, events: &[Event], trace_id: Option<&str>) -> usize {
        let mut published = 0;
        for ev in events {
            let annotations: Vec<(&str, &str)> = match (trace_id, ev.type_) {
                (Some(id), EventType::Warning) => vec![(crate::telemetry::traces::TRACE_ANNOTATION, id)],
                _ => vec![],
            };
            match self.publisher.publish(ev, reference, &annotations).await {
                Ok(()) => published += 1,
                Err(err) if crate::leader::gate::NotLeader::is(&err) => {
                    tracing::debug!(reason = %ev.reason, "event not recorded: {err}")
                }
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

    fn take_token(&self, key: &ObjectKey) -> bool {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let refill = |b: &Bucket| {
            (b.tokens + now.duration_since(b.at).as_secs_f64() / SPAM_REFILL.as_secs_f64()).min(SPAM_BURST)
        };
        if buckets.len() > 10_000 {
            // Full buckets carry no information.
            buckets.retain(|_, b| refill(b) < SPAM_BURST);
        }
        let b = buckets.entry(key.clone()).or_insert(Bucket { tokens: SPAM_BURST, at: now });
        b.tokens = refill(b);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Forgets dedupe state of a deleted object.
    pub fn forget(&self, key: &ObjectKey) {
        self.recent.lock().unwrap_or_else(|p| p.into_inner()).retain(|(k, _, _), _| k != key);
        self.buckets.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_cut_on_a_character_boundary_to_the_events_limit() {
        let long = "é".repeat(1000);
        let t = truncate(&long, NOTE_MAX);
        assert!(t.len() <= NOTE_MAX && t.ends_with('…'), "{}", t.len());
        assert_eq!(truncate("short", NOTE_MAX), "short");
    }
}
