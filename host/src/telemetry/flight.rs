//! The flight recorder: the last few reconciles of each primary, kept in memory (bounded) so
//! `kwop explain` can say why an object looks as it does and what kwop last did to it. Served as
//! JSON on the probe port (`/explain`); the words are the CLI's (`cli/explain.rs`).
//!
//! One [`Flight`] per reconcile, filled by the controller as the reconcile goes: the inputs'
//! resourceVersions, the reads, the verdict, each write with its result and why. A run of memo
//! hits ("nothing changed, plugin not called") is folded into one entry with a count, so a resync
//! does not push the interesting reconciles out. Children are found through the writes that named
//! them.

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::SystemTime;

/// Reconciles kept per primary.
pub const PER_PRIMARY: usize = 8;
/// Primaries kept; past it the least recently reconciled is forgotten.
pub const MAX_PRIMARIES: usize = 20_000;

/// An object, as the recorder names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Obj {
    /// Kind (`Foo`, `Deployment`).
    pub kind: String,
    /// Namespace; absent for a cluster-scoped object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl Obj {
    /// `Kind ns/name` or `Kind name`.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// One object a reconcile was given or read, at the resourceVersion it saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Input {
    /// The object (a query is named by its selector in `name`).
    pub object: Obj,
    /// Its resourceVersion then; absent when the read found nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// `primary`, `owned`, `get` (a cache read) or `query`.
    pub how: String,
}

/// What one write of the outcome did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteNote {
    /// `apply`, `delete` or `status`.
    pub verb: String,
    /// The object written.
    pub object: Obj,
    /// `created`, `updated`, `unchanged` (the live object already matched: nothing sent),
    /// `deleted`, `failed`, `not-sent` (an earlier write failed).
    pub result: String,
    /// Why, in words: the fields that differed from the plugin's intent, the API server's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// How a reconcile ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Verdict {
    /// The plugin ran and every write of its outcome was sent or found unnecessary.
    Synced,
    /// Nothing the last in-sync reconcile depended on changed: the plugin was not called.
    Memoized {
        /// The first of this run of memo hits (RFC 3339).
        since: String,
        /// How many.
        checks: u64,
    },
    /// The plugin call failed (trap, deadline, memory) or the plugin returned a failure.
    Failed {
        /// `call` (the sandbox ended it) or `plugin` (it said so).
        stage: String,
        /// The message.
        message: String,
    },
    /// The outcome was refused by the host's checks: nothing was written.
    Rejected {
        /// The reason label (`NotControlled`, `NamespaceNotGranted`, …).
        reason: String,
        /// The message.
        message: String,
    },
    /// A write failed; the writes after it were not sent.
    WriteFailed {
        /// The API server's answer.
        message: String,
    },
    /// The primary is outside what the admin granted the plugin: kwop leaves it alone.
    OutsideGrants {
        /// Which grant.
        message: String,
    },
    /// Being deleted: `finalize` ran (or the host waits for it).
    Finalizing {
        /// What happened.
        message: String,
    },
    /// Not reconciled now, and why (another replica holds it, caches relisting, own status write
    /// not seen yet).
    Deferred {
        /// Why.
        message: String,
    },
}

impl Verdict {
    /// A short label (`synced`, `memoized`, …), e.g. for the trace's `result` attribute.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Synced => "synced",
            Verdict::Memoized { .. } => "memoized",
            Verdict::Failed { .. } => "failed",
            Verdict::Rejected { .. } => "rejected",
            Verdict::WriteFailed { .. } => "write-failed",
            Verdict::OutsideGrants { .. } => "outside-grants",
            Verdict::Finalizing { .. } => "finalizing",
            Verdict::Deferred { .. } => "deferred",
        }
    }
}

/// One reconcile of one primary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flight {
    /// When it started (RFC 3339, milliseconds).
    pub at: String,
    /// The plugin (info name), its version and the component's sha256.
    pub plugin: String,
    /// The plugin's version.
    pub version: String,
    /// The component's sha256 (`sha256:…`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The OpenTelemetry trace of this reconcile, when traces are exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The primary.
    pub primary: Obj,
    /// What it was given and read, at which resourceVersions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<Input>,
    /// How it ended.
    pub verdict: Verdict,
    /// Its writes, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<WriteNote>,
    /// Events it recorded (`Warning Reason: message`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
    /// A candidate running in shadow: whether it agreed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<String>,
    /// When it asked to be reconciled again (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_after_ms: Option<u64>,
    /// How long it took (ms).
    pub duration_ms: f64,
}

impl Flight {
    /// A reconcile starting now, with nothing recorded yet (the verdict is filled at its end).
    pub fn start(plugin: &str, version: &str, digest: Option<String>, primary: Obj) -> Flight {
        Flight {
            at: now(),
            plugin: plugin.to_string(),
            version: version.to_string(),
            digest,
            trace_id: None,
            primary,
            inputs: vec![],
            verdict: Verdict::Synced,
            writes: vec![],
            events: vec![],
            shadow: None,
            requeue_after_ms: None,
            duration_ms: 0.0,
        }
    }
}

/// What `/explain` answers for one object.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    /// The object asked about.
    pub object: Option<Obj>,
    /// Its own reconciles, newest last, when it is a primary (one list per plugin reconciling it).
    pub as_primary: Vec<Flight>,
    /// Reconciles of primaries whose writes named it, newest last (it is their child).
    pub written_by: Vec<Flight>,
}

type Key = (String, Obj);

#[derive(Default)]
struct State {
    flights: HashMap<Key, VecDeque<Flight>>,
    /// Least recently touched first (a counter per key; the smallest goes first when full).
    touched: HashMap<Key, u64>,
    clock: u64,
    /// Child → the primaries whose writes named it.
    children: HashMap<Obj, Vec<Key>>,
}

/// The recorder shared by every controller of a host.
pub struct FlightRecorder {
    state: Mutex<State>,
    per_primary: usize,
    max_primaries: usize,
}

impl Default for FlightRecorder {
    fn default() -> Self {
        FlightRecorder::new(PER_PRIMARY, MAX_PRIMARIES)
    }
}

impl FlightRecorder {
    /// Keeps `per_primary` reconciles of at most `max_primaries` primaries.
    pub fn new(per_primary: usize, max_primaries: usize) -> Self {
        FlightRecorder { state: Mutex::default(), per_primary: per_primary.max(1), max_primaries: max_primaries.max(1) }
    }

    /// Keeps one finished reconcile. A memo hit right after a memo hit (or after the in-sync
    /// reconcile it repeats) only counts.
    pub fn keep(&self, flight: Flight) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let key = (flight.plugin.clone(), flight.primary.clone());
        s.clock += 1;
        let clock = s.clock;
        s.touched.insert(key.clone(), clock);
        for w in &flight.writes {
            let owners = s.children.entry(w.object.clone()).or_default();
            if !owners.contains(&key) {
                owners.push(key.clone());
            }
        }
        let per = self.per_primary;
        let ring = s.flights.entry(key).or_default();
        if let (Verdict::Memoized { .. }, Some(last)) = (&flight.verdict, ring.back_mut()) {
            if let Verdict::Memoized { checks, .. } = &mut last.verdict {
                *checks += 1;
                return;
            }
        }
        ring.push_back(flight);
        while ring.len() > per {
            ring.pop_front();
        }
        if s.flights.len() > self.max_primaries {
            s.evict_oldest();
        }
    }

    /// A memo hit outside a reconcile (the resync checks the memo itself): counted on the
    /// primary's last entry when that is a run of hits, else a new entry — one lock, no
    /// allocation for a counted hit beyond the key.
    pub fn memo_hit(&self, plugin: &str, primary: Obj, digest: impl FnOnce() -> Option<String>, version: &str) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let key = (plugin.to_string(), primary);
        if let Some(Verdict::Memoized { checks, .. }) =
            s.flights.get_mut(&key).and_then(|r| r.back_mut()).map(|f| &mut f.verdict)
        {
            *checks += 1;
            s.clock += 1;
            let clock = s.clock;
            s.touched.insert(key, clock);
            return;
        }
        drop(s);
        let mut f = Flight::start(plugin, version, digest(), key.1);
        f.verdict = Verdict::Memoized { since: f.at.clone(), checks: 1 };
        self.keep(f);
    }

    /// What is kept about `object`: its own reconciles and those of the primaries whose writes
    /// named it (a deleted object can still be explained until it is evicted).
    pub fn explain(&self, object: &Obj) -> Explanation {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut as_primary: Vec<Flight> =
            s.flights.iter().filter(|((_, o), _)| o == object).flat_map(|(_, r)| r.iter().cloned()).collect();
        as_primary.sort_by(|a, b| a.at.cmp(&b.at));
        let mut written_by: Vec<Flight> = s
            .children
            .get(object)
            .into_iter()
            .flatten()
            .filter_map(|k| s.flights.get(k))
            .flat_map(|r| r.iter().filter(|f| f.writes.iter().any(|w| &w.object == object)).cloned())
            .collect();
        written_by.sort_by(|a, b| a.at.cmp(&b.at));
        Explanation { object: Some(object.clone()), as_primary, written_by }
    }

    /// How many primaries are kept.
    pub fn len(&self) -> usize {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).flights.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl State {
    fn evict_oldest(&mut self) {
        let Some(oldest) = self.touched.iter().min_by_key(|(_, c)| **c).map(|(k, _)| k.clone()) else {
            return;
        };
        self.touched.remove(&oldest);
        if let Some(ring) = self.flights.remove(&oldest) {
            for w in ring.iter().flat_map(|f| &f.writes) {
                if let Some(owners) = self.children.get_mut(&w.object) {
                    owners.retain(|k| k != &oldest);
                    if owners.is_empty() {
                        self.children.remove(&w.object);
                    }
                }
            }
        }
    }
}

/// Now, RFC 3339 with milliseconds.
pub fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

#[cfg(test)]
#[path = "flight_tests.rs"]
mod tests;
