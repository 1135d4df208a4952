//! WIT outcome → typed outcome: JSON parsing, required fields, size and count caps.

use super::{
    reject, EventSpec, FinalizeOutcome, Intent, ObjRef, Outcome, PluginFailure, RejectReason, Rejection, Severity,
};
use crate::plugin::wit;
use crate::vocab::{tracking, Gvk};
use serde_json::Value;
use std::collections::HashSet;
use std::time::Duration;

/// Caps on what one outcome may contain.
#[derive(Debug, Clone)]
pub struct OutcomeLimits {
    /// Apply intents + deletions.
    pub max_objects: usize,
    /// Bytes of one object's JSON (etcd refuses objects over ~1.5 MiB).
    pub max_object_bytes: usize,
    /// Bytes of all JSON in the outcome.
    pub max_total_bytes: usize,
    /// Events per outcome.
    pub max_events: usize,
    /// Longest requeue hint honoured; longer ones are clamped.
    pub max_requeue: Duration,
}

impl Default for OutcomeLimits {
    fn default() -> Self {
        OutcomeLimits {
            max_objects: 100,
            max_object_bytes: 1 << 20,
            max_total_bytes: 4 << 20,
            max_events: 16,
            max_requeue: Duration::from_secs(24 * 3600),
        }
    }
}

/// Shortest requeue hint honoured: a plugin cannot make the host spin.
pub const MIN_REQUEUE: Duration = Duration::from_millis(100);
/// Longest event reason (the Events API's limit).
pub const MAX_REASON: usize = 128;
/// Longest event message kept (longer ones are cut, the Events API's limit is 1 KiB).
pub const MAX_MESSAGE: usize = 1024;

/// Decodes and sanity-checks a successful outcome.
pub fn decode(raw: wit::Outcome, limits: &OutcomeLimits) -> Result<Outcome, Rejection> {
    let count = raw.apply.len() + raw.delete.len();
    if count > limits.max_objects {
        return Err(reject(
            RejectReason::TooLarge,
            format!("outcome has {count} objects; the limit is {}", limits.max_objects),
        ));
    }
    let total: usize = raw.apply.iter().map(String::len).sum::<usize>() + raw.status.as_ref().map_or(0, String::len);
    if total > limits.max_total_bytes {
        return Err(reject(
            RejectReason::TooLarge,
            format!("outcome is {total} bytes of JSON; the limit is {}", limits.max_total_bytes),
        ));
    }
    let mut seen = HashSet::new();
    let mut apply = Vec::with_capacity(raw.apply.len());
    for (i, text) in raw.apply.iter().enumerate() {
        if text.len() > limits.max_object_bytes {
            return Err(reject(
                RejectReason::TooLarge,
                format!("apply[{i}] is {} bytes; the limit is {}", text.len(), limits.max_object_bytes),
            ));
        }
        let intent = decode_intent(i, text)?;
        if !seen.insert((intent.gvk.clone(), intent.namespace.clone(), intent.name.clone())) {
            return Err(reject(
                RejectReason::Malformed,
                format!("apply[{i}]: {} {:?} appears twice", intent.gvk, intent.name),
            ));
        }
        apply.push(intent);
    }
    let delete = decode_deletes(raw.delete)?;
    let status = decode_status(raw.status)?;
    let events = decode_events(raw.events, limits)?;
    let requeue_after = raw.requeue_after_ms.map(|ms| Duration::from_millis(ms).clamp(MIN_REQUEUE, limits.max_requeue));
    Ok(Outcome { apply, delete, status, events, requeue_after })
}

/// How long a `finalize` that is not done waits before it is called again, unless it says.
pub const FINALIZE_REQUEUE: Duration = Duration::from_secs(5);

/// Decodes and sanity-checks what `finalize` returned.
pub fn decode_finalize(raw: wit::FinalizeOutcome, limits: &OutcomeLimits) -> Result<FinalizeOutcome, Rejection> {
    if raw.delete.len() > limits.max_objects {
        return Err(reject(
            RejectReason::TooLarge,
            format!("finalize deletes {} objects; the limit is {}", raw.delete.len(), limits.max_objects),
        ));
    }
    if raw.status.as_ref().is_some_and(|s| s.len() > limits.max_object_bytes) {
        return Err(reject(RejectReason::TooLarge, format!("status is over {} bytes", limits.max_object_bytes)));
    }
    let requeue_after = match raw.requeue_after_ms {
        Some(ms) => Duration::from_millis(ms).clamp(MIN_REQUEUE, limits.max_requeue),
        None => FINALIZE_REQUEUE,
    };
    Ok(FinalizeOutcome {
        delete: decode_deletes(raw.delete)?,
        status: decode_status(raw.status)?,
        events: decode_events(raw.events, limits)?,
        done: raw.done,
        requeue_after,
    })
}

fn decode_deletes(raw: Vec<wit::ObjectRef>) -> Result<Vec<ObjRef>, Rejection> {
    raw.into_iter()
        .enumerate()
        .map(|(i, r)| {
            let gvk = Gvk::new(&r.gvk.group, &r.gvk.version, &r.gvk.kind);
            if gvk.version.is_empty() || gvk.kind.is_empty() || r.name.is_empty() {
                return Err(reject(RejectReason::Malformed, format!("delete[{i}] needs a version, a kind and a name")));
            }
            Ok(ObjRef {
                api_version: gvk.api_version(),
                kind: gvk.kind.clone(),
                gvk,
                namespace: r.namespace.filter(|n| !n.is_empty()),
                name: r.name,
            })
        })
        .collect()
}

fn decode_status(raw: Option<String>) -> Result<Option<Value>, Rejection> {
    match raw {
        None => Ok(None),
        Some(text) => match serde_json::from_str::<Value>(&text) {
            Ok(v @ Value::Object(_)) => Ok(Some(v)),
            Ok(_) => {
                Err(reject(RejectReason::Malformed, "status must be a JSON object (the value of the status field)"))
            }
            Err(e) => Err(reject(RejectReason::Malformed, format!("status is not valid JSON: {e}"))),
        },
    }
}

fn decode_intent(i: usize, text: &str) -> Result<Intent, Rejection> {
    let body: Value = serde_json::from_str(text)
        .map_err(|e| reject(RejectReason::Malformed, format!("apply[{i}] is not valid JSON: {e}")))?;
    let obj =
        body.as_object().ok_or_else(|| reject(RejectReason::Malformed, format!("apply[{i}] is not a JSON object")))?;
    let field = |name: &str| obj.get(name).and_then(Value::as_str).filter(|s| !s.is_empty());
    let (Some(api_version), Some(kind)) = (field("apiVersion"), field("kind")) else {
        return Err(reject(RejectReason::Malformed, format!("apply[{i}] needs apiVersion and kind")));
    };
    let meta = obj.get("metadata").and_then(Value::as_object);
    let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str).filter(|s| !s.is_empty());
    let Some(name) = name else {
        return Err(reject(RejectReason::Malformed, format!("apply[{i}] ({api_version} {kind}) needs metadata.name")));
    };
    let namespace = match meta.and_then(|m| m.get("namespace")) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(reject(RejectReason::Malformed, format!("apply[{i}]: metadata.namespace must be a string")))
        }
    };
    if meta.is_some_and(|m| m.contains_key("ownerReferences")) {
        return Err(reject(
            RejectReason::Forbidden,
            format!("apply[{i}] ({kind} {name:?}) sets metadata.ownerReferences; the host sets the controller reference itself"),
        ));
    }
    if meta.is_some_and(|m| m.contains_key("finalizers")) {
        return Err(reject(
            RejectReason::Forbidden,
            format!("apply[{i}] ({kind} {name:?}) sets metadata.finalizers; a plugin that cleans up declares `finalizes` and the host manages its finalizer"),
        ));
    }
    if let Some(key) = meta.and_then(tracking::host_key) {
        return Err(reject(
            RejectReason::Forbidden,
            format!("apply[{i}] ({kind} {name:?}) sets metadata.{key}; keys under kwop.dev/ are set by the host"),
        ));
    }
    if let Some(key) = tracking::nested_host_key(&body) {
        return Err(reject(
            RejectReason::Forbidden,
            format!(
                "apply[{i}] ({kind} {name:?}) sets {key}; keys under kwop.dev/ are set by the host, and objects made \
                 from a template inherit its metadata"
            ),
        ));
    }
    for f in ["uid", "resourceVersion", "managedFields", "deletionTimestamp"] {
        if meta.is_some_and(|m| m.contains_key(f)) {
            return Err(reject(
                RejectReason::Forbidden,
                format!("apply[{i}] ({kind} {name:?}) sets metadata.{f}, which an apply intent must not"),
            ));
        }
    }
    let gvk = Gvk::from_api_version(api_version, kind);
    if gvk.version.is_empty() || gvk.version.contains('/') || (api_version.contains('/') && gvk.group.is_empty()) {
        return Err(reject(
            RejectReason::Malformed,
            format!("apply[{i}]: apiVersion {api_version:?} is not of the form group/version or version"),
        ));
    }
    Ok(Intent { gvk, namespace, name: name.to_string(), body })
}

fn decode_events(raw: Vec<wit::Event>, limits: &OutcomeLimits) -> Result<Vec<EventSpec>, Rejection> {
    if raw.len() > limits.max_events {
        return Err(reject(
            RejectReason::TooLarge,
            format!("outcome has {} events; the limit is {}", raw.len(), limits.max_events),
        ));
    }
    raw.into_iter()
        .map(|e| {
            if e.reason.is_empty()
                || e.reason.len() > MAX_REASON
                || !e.reason.chars().all(|c| c.is_ascii_alphanumeric())
            {
                return Err(reject(
                    RejectReason::Malformed,
                    format!(
                        "event reason {:?} must be 1-{MAX_REASON} ASCII letters and digits (PascalCase)",
                        truncate(&e.reason, 64)
                    ),
                ));
            }
            Ok(event(e))
        })
        .collect()
}

fn event(e: wit::Event) -> EventSpec {
    EventSpec {
        severity: match e.severity {
            wit::EventType::Normal => Severity::Normal,
            wit::EventType::Warning => Severity::Warning,
        },
        reason: e.reason,
        message: truncate(&e.message, MAX_MESSAGE),
    }
}

/// Cuts a string to at most `max` bytes on a character boundary, marking the cut.
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub(3);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// Decodes a plugin's failure. Never rejected: bad events in a failure are dropped (and logged),
/// since the failure itself must still be reported.
pub fn decode_failure(raw: wit::Failure, limits: &OutcomeLimits) -> PluginFailure {
    let n = raw.events.len();
    let events: Vec<EventSpec> = raw
        .events
        .into_iter()
        .take(limits.max_events)
        .filter(|e| {
            !e.reason.is_empty() && e.reason.len() <= MAX_REASON && e.reason.chars().all(|c| c.is_ascii_alphanumeric())
        })
        .map(event)
        .collect();
    if events.len() < n {
        tracing::warn!(dropped = n - events.len(), "plugin failure carried invalid or too many events; dropped them");
    }
    PluginFailure { message: truncate(&raw.message, MAX_MESSAGE), retry: raw.retry, events }
}

#[cfg(test)]
mod tests;
