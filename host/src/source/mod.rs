//! Where plugins come from: the plugin folder (development, the demo), ReconcilerPlugin objects
//! (a cluster), and the OCI registries or ConfigMaps those point at.
//!
//! Each source hands the supervisor (`hotswap`) a [`Catalog`]: every plugin it offers now, with
//! the component's bytes and the authority it runs with. The supervisor loads, checks, swaps and
//! reports back ([`report`]); a source never starts anything itself. What a source and the
//! supervisor tell each other ([`Catalog`], [`Command`], [`report::Report`]) is defined here,
//! below the supervisor, so a source needs nothing of it.
//!
//! Floor 12 of 0–15 (`docs/ARCHITECTURE.md`). May use: `leader`, `plugin`, `report`, `shadow`, `telemetry`,
//! `vocab`. Used by: `cli`, `hotswap`.

pub mod cluster;
pub mod folder;
pub mod oci;
pub mod report;

use crate::vocab::grants::Grants;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// Limits a ReconcilerPlugin sets for itself (`spec.limits`), over the host's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LimitOverride {
    /// Memory of one instance.
    pub memory: Option<usize>,
    /// Budget of one call.
    pub timeout: Option<Duration>,
    /// Concurrent reconciles.
    pub concurrency: Option<usize>,
}

/// One plugin as a source offers it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// What the supervisor tracks it by: the file name, or `reconcilerplugin/<name>`.
    pub key: String,
    /// Where it came from, for messages (a path, an OCI reference).
    pub origin: PathBuf,
    /// sha256 of the component, hex.
    pub sha256: String,
    /// The component.
    pub bytes: Arc<Vec<u8>>,
    /// What the admin grants; `None` in folder mode, where the plugin's own declaration is its
    /// authority (logged as such).
    pub grants: Option<Arc<Grants>>,
    /// Limits over the host's defaults.
    pub limits: LimitOverride,
    /// Loaded but not run.
    pub suspend: bool,
    /// Order among entries for one primary kind when none of them runs yet: the lowest starts,
    /// the others wait (reason Conflict). A running one always keeps its kind.
    pub rank: String,
    /// A candidate to run in shadow beside it (`spec.candidate`), once fetched.
    pub candidate: Option<CandidateSource>,
    /// Its admission failure policy (`spec.admission.failurePolicy`; the host's default if
    /// unset).
    pub failure_policy: Option<crate::vocab::FailurePolicy>,
}

/// A candidate component as a source offers it.
#[derive(Debug, Clone)]
pub struct CandidateSource {
    /// Where it came from, for messages.
    pub origin: PathBuf,
    /// sha256 of the component, hex.
    pub sha256: String,
    /// The component.
    pub bytes: Arc<Vec<u8>>,
}

impl Entry {
    /// Changes whenever the entry must be loaded and checked again: other bytes, grants or
    /// limits (`suspend` only starts or stops it).
    pub fn fingerprint(&self) -> String {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.grants.hash(&mut h);
        self.limits.hash(&mut h);
        let candidate = self.candidate.as_ref().map(|c| c.sha256.as_str()).unwrap_or("-");
        format!("{}:{:016x}:{candidate}", self.sha256, h.finish())
    }
}

/// Every plugin a source offers at one moment.
#[derive(Debug, Default)]
pub struct Catalog {
    /// By key.
    pub entries: BTreeMap<String, Entry>,
    /// What could not be offered: (key, why). Logged.
    pub errors: Vec<(String, String)>,
}

/// What the supervisor can be asked to do.
#[derive(Debug)]
pub enum Command {
    /// Something changed in the folder (a file being written, a ConfigMap update under way):
    /// rescanned once the burst settles (`hotswap::supervisor::DEBOUNCE`).
    Rescan,
    /// A file was completed (renamed into place, as `mv` and the ConfigMap `..data` swap do, or
    /// closed after writing): rescanned at once.
    RescanNow,
    /// Everything the ReconcilerPlugin source offers now.
    Catalog(Catalog),
    /// Leadership gained (`true`) or lost (`false`).
    SetActive(bool),
    /// Stop every controller (each within the shutdown grace), then answer.
    Shutdown(oneshot::Sender<()>),
}
