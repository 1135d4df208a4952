//! `kwop run --record DIR`: every reconcile's complete inputs and outcome, written as a fixture
//! folder that `kwop plugin test` and `kwop plugin replay` read.
//!
//! One folder per reconcile, `DIR/<plugin>/<unix-ms>-<seq>-<namespace>.<name>/`:
//! - `primary.yaml`: the primary as the plugin got it (JSON, which is YAML);
//! - `observed.yaml`: the owned objects and every object a cache read answered, as a JSON list;
//! - `expected.json`: what the plugin returned, as `kwop plugin reconcile` prints it;
//! - `call.json`: plugin name, version and sha256, the object, and the reconcile's start
//!   (`startedAtUnixNanos`, the plugin's wall clock for the call).
//!
//! Writing happens off the reconcile path; once the recordings of this process reach
//! `--record-max`, recording stops (logged once).

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::SystemTime;

/// The inputs and outcome of one reconcile.
#[derive(Debug, Clone)]
pub struct Recording {
    /// `info().name`.
    pub plugin: String,
    /// `info().version`.
    pub version: String,
    /// sha256 of the component, hex.
    pub sha256: String,
    /// `namespace/name`.
    pub object: String,
    /// The request's primary (JSON).
    pub primary: String,
    /// The request's owned objects and the cache's answers (JSON each).
    pub observed: Vec<String>,
    /// The plugin's wall clock for the call.
    pub started_at: SystemTime,
    /// The outcome (see `shadow::compare::result_json`).
    pub result: Value,
}

/// Writes recordings under one folder.
#[derive(Debug)]
pub struct Recorder {
    dir: PathBuf,
    max_bytes: u64,
    used: AtomicU64,
    seq: AtomicU64,
    full: AtomicBool,
}

fn safe(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' }).collect()
}

impl Recorder {
    /// A recorder writing into `dir` (created if needed).
    pub fn new(dir: PathBuf, max_bytes: u64) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        Ok(Recorder { dir, max_bytes, used: AtomicU64::new(0), seq: AtomicU64::new(0), full: AtomicBool::new(false) })
    }

    /// The files of one recording, by name.
    pub fn files(r: &Recording) -> BTreeMap<&'static str, String> {
        let parse = |s: &str| serde_json::from_str::<Value>(s).unwrap_or(Value::Null);
        // One copy of each object (an owned object may also have been read by name).
        let mut observed: BTreeMap<String, Value> = BTreeMap::new();
        for o in r.observed.iter().map(|s| parse(s)) {
            let m = |f: &str| o.pointer(&format!("/metadata/{f}")).and_then(Value::as_str).unwrap_or("").to_string();
            let api = o.get("apiVersion").and_then(Value::as_str).unwrap_or("");
            let kind = o.get("kind").and_then(Value::as_str).unwrap_or("");
            observed.insert(format!("{api} {kind} {}/{}", m("namespace"), m("name")), o);
        }
        let nanos = r.started_at.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos() as u64;
        let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default() + "\n";
        let call = json!({
            "plugin": r.plugin, "version": r.version, "sha256": r.sha256, "object": r.object,
            "startedAtUnixNanos": nanos,
        });
        BTreeMap::from([
            ("primary.yaml", pretty(&parse(&r.primary))),
            ("observed.yaml", pretty(&Value::Array(observed.into_values().collect()))),
            ("expected.json", pretty(&r.result)),
            ("call.json", pretty(&call)),
        ])
    }

    /// Writes `r` in the background; returns whether it was taken (false once full).
    pub fn record(&self, r: &Recording) -> bool {
        if self.full.load(Ordering::Relaxed) {
            return false;
        }
        let files = Self::files(r);
        let size: u64 = files.values().map(|t| t.len() as u64).sum();
        if self.used.fetch_add(size, Ordering::Relaxed) + size > self.max_bytes {
            if !self.full.swap(true, Ordering::Relaxed) {
                tracing::warn!(dir = %self.dir.display(), max_bytes = self.max_bytes, "recordings reached --record-max; recording stops");
            }
            return false;
        }
        let ms = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_millis();
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let (ns, name) = r.object.split_once('/').unwrap_or(("", r.object.as_str()));
        let folder = self.dir.join(safe(&r.plugin)).join(format!("{ms}-{seq:06}-{}.{}", safe(ns), safe(name)));
        let work = move || -> std::io::Result<()> {
            std::fs::create_dir_all(&folder)?;
            // expected.json last: a folder is a fixture once it is there.
            for (name, text) in files.iter().filter(|(n, _)| **n != "expected.json") {
                std::fs::write(folder.join(name), text)?;
            }
            std::fs::write(folder.join("expected.json"), &files["expected.json"])
        };
        tokio::task::spawn_blocking(move || {
            if let Err(e) = work() {
                tracing::warn!("cannot write a recording: {e}");
            }
        });
        true
    }
}

/// The reconcile start a recording's `call.json` gives.
pub fn started_at(call: &Value) -> Option<SystemTime> {
    let n = call.get("startedAtUnixNanos")?.as_u64()?;
    Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recording_is_a_fixture_with_its_call() {
        let r = Recording {
            plugin: "p".into(),
            version: "1".into(),
            sha256: "ab".into(),
            object: "ns/a".into(),
            primary: r#"{"kind":"Foo","metadata":{"name":"a"}}"#.into(),
            observed: vec![
                r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"ns"}}"#.into(),
                r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"ns"}}"#.into(),
            ],
            started_at: SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(1_700_000_000_123_456_789),
            result: json!({ "apply": [] }),
        };
        let f = Recorder::files(&r);
        let observed: Value = serde_json::from_str(&f["observed.yaml"]).expect("json");
        assert_eq!(observed.as_array().map(Vec::len), Some(1), "one copy of each object");
        let call: Value = serde_json::from_str(&f["call.json"]).expect("json");
        assert_eq!(started_at(&call), Some(r.started_at));
        assert_eq!(call["sha256"], "ab");
    }
}
