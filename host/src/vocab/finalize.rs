//! The deletion lifecycle of primaries whose plugin finalizes (`plugin-info.finalizes`): the
//! finalizer's name, and the condition the host writes on a primary whose `finalize` keeps
//! failing. The controller's side is `controller::finalizing`; the finalizer patch is
//! `apply::finalizers`.

use serde_json::{json, Value};

/// A plugin's finalizer is this prefix and its name: `kwop.dev/<plugin>`.
pub const FINALIZER_PREFIX: &str = "kwop.dev/";
/// The condition type the host sets while `finalize` fails.
pub const CONDITION: &str = "Finalized";
/// Its reason while `finalize` fails.
pub const REASON_FAILED: &str = "FinalizeFailed";
/// Its reason while `finalize` keeps saying not yet for longer than [`PATIENCE`].
pub const REASON_WAITING: &str = "FinalizeWaiting";
/// Warning event: a primary in a namespace the plugin is no longer granted was deleted; its
/// finalizer was taken off without `finalize`.
pub const REASON_NOT_GRANTED: &str = "FinalizerReleased";
/// How long a deletion may wait on `finalize` saying not yet before the host says so (the
/// default of `--finalize-patience`).
pub const PATIENCE: std::time::Duration = std::time::Duration::from_secs(120);

fn conditions(status: &Value) -> Option<&Vec<Value>> {
    status.get("conditions")?.as_array()
}

/// `status` with the condition `Finalized` False / `reason` saying `message`: the transition time
/// is kept if it already said False, else `now` (RFC 3339). `None` when the status has
/// `conditions` that are not a list (the host does not guess at another shape).
pub fn with_failure(
    status: Option<&Value>,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &str,
) -> Option<Value> {
    let mut status = status.cloned().unwrap_or_else(|| json!({}));
    let map = status.as_object_mut()?;
    let list = map.entry("conditions").or_insert_with(|| json!([]));
    let list = list.as_array_mut()?;
    let mut cond = json!({
        "type": CONDITION,
        "status": "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    });
    if let Some(g) = generation {
        cond["observedGeneration"] = json!(g);
    }
    match list.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some(CONDITION)) {
        Some(old) => {
            if old.get("status").and_then(Value::as_str) == Some("False") {
                if let Some(t) = old.get("lastTransitionTime") {
                    cond["lastTransitionTime"] = t.clone();
                }
            }
            *old = cond;
        }
        None => list.push(cond),
    }
    Some(status)
}

/// `status` without the host's failure condition, if it had one (`None`: nothing to remove).
pub fn without_failure(status: &Value) -> Option<Value> {
    let is_ours = |c: &Value| {
        c.get("type").and_then(Value::as_str) == Some(CONDITION)
            && matches!(c.get("reason").and_then(Value::as_str), Some(REASON_FAILED | REASON_WAITING))
    };
    if !conditions(status)?.iter().any(is_ours) {
        return None;
    }
    let mut out = status.clone();
    if let Some(list) = out.get_mut("conditions").and_then(Value::as_array_mut) {
        list.retain(|c| !is_ours(c));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_condition_joins_the_plugins_own_and_keeps_its_transition_time() {
        let status = json!({"ready": 2, "conditions": [{"type": "Ready", "status": "True"}]});
        let s = with_failure(Some(&status), REASON_FAILED, "boom", Some(3), "2026-12-06T10:00:00Z").expect("a list");
        let c = &s["conditions"];
        assert_eq!(c[0]["type"], "Ready", "the plugin's condition stays");
        assert_eq!((c[1]["status"].as_str(), c[1]["reason"].as_str()), (Some("False"), Some(REASON_FAILED)));
        assert_eq!(c[1]["observedGeneration"], 3);
        let again =
            with_failure(Some(&s), REASON_FAILED, "boom again", Some(3), "2026-12-06T11:00:00Z").expect("a list");
        assert_eq!(again["conditions"][1]["lastTransitionTime"], "2026-12-06T10:00:00Z");
        assert_eq!(again["conditions"][1]["message"], "boom again");
        assert_eq!(again["conditions"].as_array().map(Vec::len), Some(2));
        let cleared = without_failure(&again).expect("had one");
        assert_eq!(cleared, status);
        assert!(without_failure(&status).is_none());
        assert!(
            with_failure(None, REASON_WAITING, "m", None, "t").is_some_and(|s| s["conditions"][0]["type"] == CONDITION)
        );
        assert!(with_failure(Some(&json!({"conditions": "odd"})), REASON_FAILED, "m", None, "t").is_none());
    }
}
