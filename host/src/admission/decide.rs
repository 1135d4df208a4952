//! What an admission request gets: the plugin's warnings or violations, or — when the plugin
//! could not answer (a trap, its deadline) — what the failure policy says. Pure, so the webhook,
//! `kwop plugin validate` and the fixtures share it.

use crate::outcome::decode::truncate;
use crate::plugin::{CallError, RawValidate};
use crate::vocab::FailurePolicy;
use serde_json::{json, Value};

/// Warnings passed on per request (the API server keeps at most 4 KiB of them in all).
pub const MAX_WARNINGS: usize = 16;
/// Longest warning passed on.
pub const MAX_WARNING: usize = 512;
/// Longest denial message.
pub const MAX_MESSAGE: usize = 4096;

/// The answer to one admission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Let the API server store the object.
    pub allowed: bool,
    /// Warnings for the client (`kubectl` prints them).
    pub warnings: Vec<String>,
    /// Why it is refused: (field, message).
    pub violations: Vec<(Option<String>, String)>,
    /// The plugin could not answer (trap, deadline): what went wrong.
    pub error: Option<String>,
}

impl Verdict {
    /// Allowed, without a word.
    pub fn allow() -> Self {
        Verdict { allowed: true, warnings: vec![], violations: vec![], error: None }
    }

    /// The message the client sees for a refusal: every violation, `field: message`, joined.
    pub fn message(&self) -> String {
        let text = if let Some(e) = &self.error {
            e.clone()
        } else {
            self.violations
                .iter()
                .map(|(f, m)| match f {
                    Some(f) => format!("{f}: {m}"),
                    None => m.clone(),
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        truncate(&text, MAX_MESSAGE)
    }

    /// The metric label: `allowed`, `denied`, `error` (refused because the plugin failed) or
    /// `error_ignored` (allowed although it failed).
    pub fn label(&self) -> &'static str {
        match (self.allowed, self.error.is_some()) {
            (true, false) => "allowed",
            (false, false) => "denied",
            (false, true) => "error",
            (true, true) => "error_ignored",
        }
    }

    /// What `kwop plugin validate` prints.
    pub fn to_json(&self) -> Value {
        let violations: Vec<Value> = self.violations.iter().map(|(f, m)| json!({ "field": f, "message": m })).collect();
        let mut v = json!({ "allowed": self.allowed, "warnings": self.warnings, "violations": violations });
        if let Some(e) = &self.error {
            v["error"] = json!(e);
        }
        if !self.allowed {
            v["message"] = json!(self.message());
        }
        v
    }
}

/// The verdict on what `plugin` answered (or failed to) under `policy`.
pub fn verdict(plugin: &str, r: Result<RawValidate, CallError>, policy: FailurePolicy) -> Verdict {
    match r {
        Ok(Ok(warnings)) => Verdict {
            allowed: true,
            warnings: warnings.iter().take(MAX_WARNINGS).map(|w| warning(w, MAX_WARNING)).collect(),
            violations: vec![],
            error: None,
        },
        Ok(Err(violations)) if violations.is_empty() => Verdict {
            allowed: false,
            warnings: vec![],
            violations: vec![(None, format!("{plugin} refused the object without saying why"))],
            error: None,
        },
        Ok(Err(violations)) => Verdict {
            allowed: false,
            warnings: vec![],
            violations: violations
                .into_iter()
                .take(MAX_WARNINGS)
                .map(|v| {
                    let field = v.field.filter(|f| !f.is_empty()).map(|f| truncate(f.as_str(), 256));
                    (field, truncate(&v.message, 1024))
                })
                .collect(),
            error: None,
        },
        Err(e) => failure(format!("{plugin} could not validate the object: {e}"), policy),
    }
}

/// The verdict when no answer could be had (the plugin failed, or the host could not put the
/// request to it — a scale request whose primary cannot be read): `error` says what went wrong;
/// `Fail` refuses with it, `Ignore` allows with it as a warning.
pub fn failure(error: String, policy: FailurePolicy) -> Verdict {
    match policy {
        FailurePolicy::Fail => Verdict { allowed: false, warnings: vec![], violations: vec![], error: Some(error) },
        FailurePolicy::Ignore => Verdict {
            allowed: true,
            // The policy is said whole, however long the error.
            warnings: vec![format!("{}{IGNORED}", warning(&error, MAX_WARNING - IGNORED.len()))],
            violations: vec![],
            error: Some(error),
        },
    }
}

/// What a warning allowed under `Ignore` ends with.
const IGNORED: &str = " (allowed: failure policy Ignore)";

/// A warning as the API server passes it on: one line (it drops a warning holding a control
/// character, such as the newline of a trap's message, without a word), at most `max` bytes.
fn warning(text: &str, max: usize) -> String {
    let line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    truncate(&line, max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::wit::Violation;

    #[test]
    fn violations_refuse_with_every_field_named_and_warnings_allow() {
        let v = verdict(
            "guest-foo",
            Ok(Err(vec![
                Violation { field: Some("spec.deploymentName".into()), message: "is required".into() },
                Violation { field: None, message: "and another thing".into() },
            ])),
            FailurePolicy::Fail,
        );
        assert!(!v.allowed);
        assert_eq!(v.message(), "spec.deploymentName: is required; and another thing");
        assert_eq!(v.label(), "denied");
        let ok =
            verdict("p", Ok(Ok((0..40).map(|i| format!("w{i} {}", "x".repeat(600))).collect())), FailurePolicy::Fail);
        assert!(ok.allowed && ok.warnings.len() == MAX_WARNINGS && ok.warnings[0].len() <= MAX_WARNING);
        assert_eq!(ok.to_json()["violations"], json!([]));
        let mute = verdict("p", Ok(Err(vec![])), FailurePolicy::Ignore);
        assert!(!mute.allowed && mute.message().contains("without saying why"), "a refusal is never silent");
    }

    #[test]
    fn a_plugin_that_cannot_answer_is_refused_under_fail_and_allowed_under_ignore() {
        let trap = || Err(CallError::Trap("unreachable executed\n(wasm trap: unreachable)".into()));
        let fail = verdict("p", trap(), FailurePolicy::Fail);
        assert!(!fail.allowed && fail.message().contains("p could not validate the object: plugin trapped"));
        assert_eq!(fail.label(), "error");
        let ignore = verdict("p", trap(), FailurePolicy::Ignore);
        assert!(ignore.allowed && ignore.warnings[0].contains("failure policy Ignore"));
        assert!(!ignore.warnings[0].contains('\n'), "the API server drops a warning of two lines");
        let long = verdict("p", Err(CallError::Trap("x".repeat(2000))), FailurePolicy::Ignore);
        assert!(
            long.warnings[0].len() <= MAX_WARNING
                && long.warnings[0].ends_with("x... (allowed: failure policy Ignore)")
        );
        let warned = verdict("p", Ok(Ok(vec!["two\nlines\r\tand a tab".into()])), FailurePolicy::Fail);
        assert_eq!(warned.warnings, vec!["two lines  and a tab".to_string()]);
        assert_eq!(ignore.label(), "error_ignored");
    }
}
