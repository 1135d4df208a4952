//! What `validate` gets — the object the API server is about to store, the stored one on UPDATE,
//! who asks — and what it answers with when it refuses.

use crate::wit;
use serde::de::DeserializeOwned;

/// CREATE or UPDATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// The object is being created (it has no uid yet).
    Create,
    /// The object is being changed.
    Update,
}

/// One admission request for a primary.
#[derive(Debug, Clone)]
pub struct Admission<P> {
    /// CREATE or UPDATE.
    pub operation: Operation,
    /// The object as it would be stored.
    pub object: P,
    /// On UPDATE, the object as it is stored now.
    pub old: Option<P>,
    /// Who asks (`userInfo.username`), for messages.
    pub user: String,
    /// A dry run (nothing will be stored either way).
    pub dry_run: bool,
    /// The subresource the request came through (`scale` for `kubectl scale`): `object` is then
    /// the whole primary as it would be, with the new count.
    pub subresource: Option<String>,
}

/// What `mutate` answers: the whole object as it should be stored, and warnings for the client.
#[derive(Debug, Clone, PartialEq)]
pub struct Mutation {
    /// The object (with the defaults set).
    pub object: serde_json::Value,
    /// Warnings (kubectl prints them).
    pub warnings: Vec<String>,
}

impl Mutation {
    /// The object as it should be stored.
    pub fn new(object: serde_json::Value) -> Self {
        Mutation { object, warnings: Vec::new() }
    }
    /// With a warning for the client.
    pub fn warn(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }
}

/// Why an object is refused: kubectl prints `field: message` (or the message alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The field at fault (`spec.deploymentName`), if one is.
    pub field: Option<String>,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl Violation {
    /// A violation of `field`.
    pub fn field(field: &str, message: impl Into<String>) -> Self {
        Violation { field: Some(field.into()), message: message.into() }
    }
    /// A violation of the object as a whole.
    pub fn object(message: impl Into<String>) -> Self {
        Violation { field: None, message: message.into() }
    }
    pub(crate) fn wit(self) -> wit::Violation {
        wit::Violation { field: self.field, message: self.message }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{field}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Parses the objects of a request as the plugin's primary type: one that does not parse is
/// refused with the reason.
pub(crate) fn from_wit<P: DeserializeOwned>(req: wit::AdmissionRequest) -> Result<Admission<P>, Violation> {
    let parse = |text: &str| {
        serde_json::from_str::<P>(text).map_err(|e| Violation::object(format!("the object does not parse: {e}")))
    };
    Ok(Admission {
        operation: match req.operation {
            wit::Operation::Create => Operation::Create,
            wit::Operation::Update => Operation::Update,
        },
        object: parse(&req.object)?,
        old: req.old_object.as_deref().map(parse).transpose()?,
        user: req.user,
        dry_run: req.dry_run,
        subresource: req.subresource,
    })
}
