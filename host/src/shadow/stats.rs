//! What a candidate did so far (the counts and last differences `status.candidate` shows), and
//! the registry the ReconcilerPlugin source reads them from.

use crate::vocab::crd::CandidateDifference;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Differences kept (the newest).
pub const KEEP_DIFFERENCES: usize = 10;
/// Field paths kept per difference.
pub const KEEP_PATHS: usize = 20;

/// The verdict on one shadowed reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Same outcome.
    Identical,
    /// Another outcome: the field paths.
    Differing(Vec<String>),
    /// The candidate failed where the active did not: why.
    Failing(String),
    /// Not run: the candidate was busy.
    Skipped,
}

impl Verdict {
    /// Metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Identical => "identical",
            Verdict::Differing(_) => "differing",
            Verdict::Failing(_) => "failing",
            Verdict::Skipped => "skipped",
        }
    }
}

/// Counts for one candidate version.
#[derive(Debug, Default)]
pub struct Stats {
    identical: AtomicU64,
    differing: AtomicU64,
    failing: AtomicU64,
    skipped: AtomicU64,
    last: Mutex<VecDeque<CandidateDifference>>,
}

/// A copy of the counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Reconciles both ran.
    pub reconciled: u64,
    /// Same outcome.
    pub identical: u64,
    /// Other outcome.
    pub differing: u64,
    /// Candidate failed.
    pub failing: u64,
    /// Not shadowed.
    pub skipped: u64,
    /// Newest last.
    pub differences: Vec<CandidateDifference>,
}

impl Stats {
    /// Counts one verdict about `object`.
    pub fn record(&self, object: &str, v: Verdict) {
        let keep = |paths: Vec<String>| {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            if last.len() == KEEP_DIFFERENCES {
                last.pop_front();
            }
            last.push_back(CandidateDifference {
                object: object.to_string(),
                paths: paths.into_iter().take(KEEP_PATHS).collect(),
            });
        };
        match v {
            Verdict::Identical => {
                self.identical.fetch_add(1, Ordering::Relaxed);
            }
            Verdict::Differing(paths) => {
                self.differing.fetch_add(1, Ordering::Relaxed);
                keep(paths);
            }
            Verdict::Failing(m) => {
                self.failing.fetch_add(1, Ordering::Relaxed);
                keep(vec![format!("(candidate failed) {m}")]);
            }
            Verdict::Skipped => {
                self.skipped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The counts now.
    pub fn snapshot(&self) -> Snapshot {
        let (identical, differing, failing) = (
            self.identical.load(Ordering::Relaxed),
            self.differing.load(Ordering::Relaxed),
            self.failing.load(Ordering::Relaxed),
        );
        Snapshot {
            reconciled: identical + differing + failing,
            identical,
            differing,
            failing,
            skipped: self.skipped.load(Ordering::Relaxed),
            differences: self.last.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect(),
        }
    }
}

/// Where a plugin's candidate stands, as the supervisor saw it last.
#[derive(Debug, Clone)]
pub enum CandidateState {
    /// Loaded and attached: its `info().version`, sha256 and counts.
    Running { version: String, sha256: String, stats: Arc<Stats> },
    /// Refused (reason, message); the active version runs without it.
    Refused { sha256: String, reason: &'static str, message: String },
}

/// Candidates by the supervisor's plugin key.
#[derive(Debug, Default)]
pub struct Registry(Mutex<BTreeMap<String, CandidateState>>);

impl Registry {
    /// Sets (or with `None` clears) the candidate of plugin `key`.
    pub fn set(&self, key: &str, state: Option<CandidateState>) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match state {
            Some(s) => m.insert(key.to_string(), s),
            None => m.remove(key),
        };
    }

    /// The candidate of plugin `key`.
    pub fn get(&self, key: &str) -> Option<CandidateState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get(key).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_the_newest_differences_are_kept() {
        let s = Stats::default();
        s.record("ns/a", Verdict::Identical);
        for i in 0..12 {
            s.record(&format!("ns/{i}"), Verdict::Differing(vec![format!(".p{i}")]));
        }
        s.record("ns/t", Verdict::Failing("trap".into()));
        s.record("ns/s", Verdict::Skipped);
        let n = s.snapshot();
        assert_eq!((n.reconciled, n.identical, n.differing, n.failing, n.skipped), (14, 1, 12, 1, 1));
        assert_eq!(n.differences.len(), KEEP_DIFFERENCES);
        assert_eq!(n.differences.last().map(|d| d.object.as_str()), Some("ns/t"));
        assert_eq!(n.differences[0].object, "ns/3");
    }
}
