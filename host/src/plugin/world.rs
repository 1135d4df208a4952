//! The contract versions the host serves, and what one call asks of and gets from a plugin.

use super::bindings::{v01, v02, v03, wit};
use super::sandbox::{HostState, RawResult};
use std::sync::Arc;
use std::time::SystemTime;

/// The contract version a component implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum World {
    /// `kwop:reconciler@0.1.x`.
    #[serde(rename = "kwop:reconciler@0.1.0")]
    V01,
    /// `kwop:reconciler@0.2.x`.
    #[serde(rename = "kwop:reconciler@0.2.0")]
    V02,
    /// `kwop:reconciler@0.3.x`.
    #[serde(rename = "kwop:reconciler@0.3.0")]
    V03,
}

impl std::fmt::Display for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            World::V01 => "kwop:reconciler@0.1.0",
            World::V02 => "kwop:reconciler@0.2.0",
            World::V03 => "kwop:reconciler@0.3.0",
        })
    }
}

/// A component pre-linked against the world it implements.
#[derive(Clone)]
pub(crate) enum Pre {
    V01(v01::ReconcilerPre<HostState>),
    V02(v02::ReconcilerPre<HostState>),
    V03(v03::ReconcilerPre<HostState>),
}

/// What one call asks of the plugin, with its input.
pub(crate) enum Call {
    Reconcile(wit::Request),
    Finalize(wit::Request),
    Validate(AdmissionRequest, SystemTime),
    Mutate(AdmissionRequest, SystemTime),
    Convert(ConversionRequest),
}

/// A call's result before decoding.
pub(crate) enum Raw {
    Reconcile(RawResult),
    Finalize(RawFinalize),
    Validate(RawValidate),
    Mutate(RawMutate),
    Convert(RawConvert),
}

/// What `finalize` returned, still in WIT types.
pub type RawFinalize = Result<wit::FinalizeOutcome, wit::Failure>;

/// What `validate` returned: warnings (allowed) or violations (denied).
pub type RawValidate = Result<Vec<String>, Vec<wit::Violation>>;

/// What `mutate` returned: the object as it should be stored (allowed), or violations (denied).
pub type RawMutate = Result<Mutation, Vec<wit::Violation>>;

/// What `convert` returned: the converted object, or why it cannot be.
pub type RawConvert = Result<String, String>;

/// The object as `mutate` wants it stored, with warnings for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mutation {
    /// The whole object (the host computes the JSONPatch).
    pub object: String,
    /// Warnings (`kubectl` prints them).
    pub warnings: Vec<String>,
}

/// The input of `convert`: one object and the `apiVersion` wanted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversionRequest {
    /// The object, as stored or as sent.
    pub object: String,
    /// `group/version` wanted.
    pub desired_api_version: String,
}

/// CREATE or UPDATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    /// The object is being created.
    Create,
    /// The object is being changed.
    Update,
}

/// The input of `validate`: one admission request. The call adds its instant from its
/// [`CallSpec`](super::CallSpec).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionRequest {
    /// CREATE or UPDATE.
    pub operation: Operation,
    /// The object as it would be stored.
    pub object: String,
    /// On UPDATE, the stored object.
    pub old_object: Option<String>,
    /// `userInfo.username`.
    pub user: String,
    /// A dry run.
    pub dry_run: bool,
    /// The subresource asked for: `Some("scale")` when the request came through `/scale` (then
    /// `object` is the whole primary with the Scale's replicas written in). Only 0.3 plugins see
    /// it (the 0.2 WIT has no such field).
    pub subresource: Option<String>,
}

impl AdmissionRequest {
    pub(crate) fn to_wit(&self, now: SystemTime) -> wit::AdmissionRequest {
        wit::AdmissionRequest {
            operation: match self.operation {
                Operation::Create => wit::Operation::Create,
                Operation::Update => wit::Operation::Update,
            },
            object: self.object.clone(),
            old_object: self.old_object.clone(),
            user: self.user.clone(),
            dry_run: self.dry_run,
            now: instant(now),
        }
    }
}

fn instant(now: SystemTime) -> wit::Instant {
    let since = now.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    wit::Instant { seconds: since.as_secs(), nanoseconds: since.subsec_nanos() }
}

/// The input of one call: the primary and the objects it owns, as JSON. The call adds the
/// reconcile's instant (`request.now`) from its [`CallSpec`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    /// The primary.
    pub primary: String,
    /// The objects it owns.
    pub owned: Vec<String>,
}

impl Request {
    pub(crate) fn to_wit(&self, now: SystemTime) -> wit::Request {
        wit::Request { primary: self.primary.clone(), owned: self.owned.clone(), now: instant(now) }
    }
}

/// What one reconcile call is about besides its request: the object (for logs) and what makes
/// the call deterministic (see `plugin::wasi`).
#[derive(Debug, Clone)]
pub struct CallSpec {
    /// `namespace/name` of the primary, for logs.
    pub object: String,
    /// The primary's uid (seeds the call's random bytes).
    pub uid: String,
    /// The primary's resourceVersion (seeds the call's random bytes).
    pub resource_version: String,
    /// The instant the plugin's wall clock shows for the whole call: the reconcile's start.
    /// [`CallSpec::new`] sets it to now; a replay sets the recorded one.
    pub started_at: SystemTime,
    /// Set if the plugin reads its wall clock during the call (`None`: nobody asks).
    pub clock_read: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl CallSpec {
    /// A call about `object` (uid and resourceVersion read from the primary JSON), starting now.
    pub fn new(object: String, primary_json: &str) -> Self {
        #[derive(serde::Deserialize, Default)]
        struct Meta {
            #[serde(default)]
            uid: String,
            #[serde(default, rename = "resourceVersion")]
            resource_version: String,
        }
        #[derive(serde::Deserialize, Default)]
        struct Obj {
            #[serde(default)]
            metadata: Meta,
        }
        let m = serde_json::from_str::<Obj>(primary_json).unwrap_or_default().metadata;
        CallSpec {
            object,
            uid: m.uid,
            resource_version: m.resource_version,
            started_at: SystemTime::now(),
            clock_read: None,
        }
    }
}
