//! What the supervisor tells a source about each of its plugins, so a ReconcilerPlugin's status
//! can say what runs and why something does not.

/// A plugin's identity as its `info()` gave it, and the component's digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `info().name`.
    pub name: String,
    /// `info().version`.
    pub version: String,
    /// `info().primary`.
    pub primary: String,
    /// sha256 of the component, hex.
    pub sha256: String,
    /// The contract version it implements (`kwop:reconciler@0.2.0`).
    pub world: String,
    /// `info().finalizes`.
    pub finalizes: bool,
}

/// Where a plugin stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Offered; being compiled and checked.
    Loading,
    /// Loaded and allowed; its controller starts while this replica leads.
    Loaded,
    /// The newest offer was refused. `reason` is a status reason (Invalid, Forbidden, Conflict);
    /// `kept` says whether an earlier version keeps running.
    Rejected {
        /// Status reason.
        reason: &'static str,
        /// Why.
        message: String,
        /// An earlier version keeps running.
        kept: bool,
    },
    /// Another plugin holds its primary kind; it starts if that one goes away.
    Conflict {
        /// Why, naming the holder.
        message: String,
    },
    /// Its controller could not start (retried): RBAC (reason Forbidden) or discovery.
    StartFailed {
        /// Status reason.
        reason: &'static str,
        /// Why.
        message: String,
    },
    /// Its controller runs.
    Running,
    /// Not running: suspended, or this replica is not the leader.
    Idle,
    /// Gone from the source.
    Removed,
}

/// One report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The entry's key.
    pub key: String,
    /// The version that runs (or would run): the last good one.
    pub good: Option<Identity>,
    /// Where it stands.
    pub state: State,
    /// Whether this replica is active (the leader, or no election): only then does a source
    /// write status.
    pub active: bool,
}

/// The status reason for a load error label (see `LoadError::label`).
pub fn reason_of_load_label(label: &str) -> &'static str {
    match label {
        "forbidden" => "Forbidden",
        "conflict" => "Conflict",
        "renamed" => "Renamed",
        _ => "Invalid",
    }
}
