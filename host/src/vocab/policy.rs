//! Admission failure policies: what happens to a request nobody could answer.

/// What the API server does when it cannot get an answer — and what the host does when the
/// plugin cannot give one (a trap, a deadline).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub enum FailurePolicy {
    /// Refuse the request (the reason is the message).
    Fail,
    /// Allow it (and log).
    Ignore,
}

impl std::str::FromStr for FailurePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "Fail" => Ok(FailurePolicy::Fail),
            "Ignore" => Ok(FailurePolicy::Ignore),
            other => Err(format!("{other:?} is not a failure policy (Fail or Ignore)")),
        }
    }
}

impl FailurePolicy {
    /// As the ValidatingWebhookConfiguration spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}
