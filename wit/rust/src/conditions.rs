//! `metav1.Condition` for a plugin's status, as apimachinery's `meta.SetStatusCondition` keeps
//! them: one condition per type, and `lastTransitionTime` changed only when the status does.
//!
//! ```ignore
//! use kwop_guest::conditions::{set_condition, Condition};
//! let mut conditions = observed_status.conditions;            // what the primary has now
//! set_condition(&mut conditions, Condition::new("Ready", true, "Available", "3 of 3 replicas available")
//!     .observed_generation(foo.metadata.generation), ctx.now());
//! ```
//!
//! Read the conditions the primary has (its `status.conditions`) and set each one on every
//! reconcile: an unchanged condition keeps its transition time, so a reconcile of an object in
//! sync writes nothing. The CRD's status schema needs `conditions` (a list of objects, best
//! declared `x-kubernetes-list-type: map` with `x-kubernetes-list-map-keys: [type]`) and, usually,
//! `observedGeneration`.

use crate::Time;
use serde::{Deserialize, Serialize};

/// One condition, with the fields and JSON names of `metav1.Condition`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// CamelCase type, e.g. `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// The primary's `metadata.generation` this condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When `status` last changed (RFC 3339).
    #[serde(default)]
    pub last_transition_time: String,
    /// CamelCase reason for the status.
    #[serde(default)]
    pub reason: String,
    /// Human-readable details.
    #[serde(default)]
    pub message: String,
}

impl Condition {
    /// A condition of `type_` with status `True` or `False`.
    pub fn new(type_: &str, status: bool, reason: &str, message: impl Into<String>) -> Self {
        Condition {
            type_: type_.into(),
            status: if status { "True" } else { "False" }.into(),
            reason: reason.into(),
            message: message.into(),
            ..Condition::default()
        }
    }

    /// The same condition with status `Unknown`.
    pub fn unknown(mut self) -> Self {
        self.status = "Unknown".into();
        self
    }

    /// Says which generation of the primary it describes.
    pub fn observed_generation(mut self, generation: Option<i64>) -> Self {
        self.observed_generation = generation;
        self
    }

    /// Whether its status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// Sets `new` in `conditions`, replacing the one of the same type. Its `lastTransitionTime` is
/// the old one's if the status did not change, else `now`. Returns whether anything changed.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition, now: Time) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            new.last_transition_time = if old.status == new.status && !old.last_transition_time.is_empty() {
                old.last_transition_time.clone()
            } else {
                now.rfc3339()
            };
            let changed = *old != new;
            *old = new;
            changed
        }
        None => {
            new.last_transition_time = now.rfc3339();
            conditions.push(new);
            true
        }
    }
}

/// The condition of `type_`, if any.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Removes the condition of `type_`; whether there was one.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let n = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transition_time_moves_only_when_the_status_does() {
        let (t1, t2) = (Time::from_seconds(1_000_000_000), Time::from_seconds(1_000_000_060));
        let mut c = Vec::new();
        assert!(set_condition(&mut c, Condition::new("Ready", false, "Progressing", "0 of 2"), t1));
        assert_eq!(c[0].last_transition_time, "2001-09-09T01:46:40Z");
        // Same status, new message: changed, same transition time.
        assert!(set_condition(&mut c, Condition::new("Ready", false, "Progressing", "1 of 2"), t2));
        assert_eq!((c[0].message.as_str(), c[0].last_transition_time.as_str()), ("1 of 2", "2001-09-09T01:46:40Z"));
        // Nothing new: unchanged.
        assert!(!set_condition(&mut c, Condition::new("Ready", false, "Progressing", "1 of 2"), t2));
        // The status flips: a new transition time; another type is added beside it.
        assert!(set_condition(
            &mut c,
            Condition::new("Ready", true, "Available", "2 of 2").observed_generation(Some(4)),
            t2
        ));
        assert_eq!(c[0].last_transition_time, "2001-09-09T01:47:40Z");
        assert!(set_condition(&mut c, Condition::new("Progressing", false, "Complete", ""), t2));
        assert_eq!(c.len(), 2);
        assert!(find_condition(&c, "Ready").is_some_and(Condition::is_true));
        let json = serde_json::to_value(&c[0]).expect("serialisable");
        assert_eq!(json["type"], "Ready");
        assert_eq!(json["observedGeneration"], 4);
        assert_eq!(json["lastTransitionTime"], "2001-09-09T01:47:40Z");
        assert!(remove_condition(&mut c, "Progressing") && !remove_condition(&mut c, "Progressing"));
    }
}
