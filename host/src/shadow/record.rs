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
//! Writing happens off the reconcile path, owner-only (folders 0700, files 0600: a recording
//! holds what the plugin read, Secrets included); once the folder's recordings — earlier runs'
//! counted — reach `--record-max`, recording stops (logged once).

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
    /// A recorder writing into `dir` (created owner-only if needed). What earlier runs left there
    /// counts against `max_bytes`.
    pub fn new(dir: PathBuf, max_bytes: u64) -> std::io::Result<Self> {
        private_dir(&dir)?;
        let used = AtomicU64::new(bytes_under(&dir));
        Ok(Recorder { dir, max_bytes, used, seq: AtomicU64::new(0), full: AtomicBool::new(false) })
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
            if let Some(plugin) = folder.parent() {
                private_dir(plugin)?;
            }
            private_dir(&folder)?;
            // expected.json last: a folder is a fixture once it is there.
            for (name, text) in files.iter().filter(|(n, _)| **n != "expected.json") {
                private_file(&folder.join(name), text)?;
            }
            private_file(&folder.join("expected.json"), &files["expected.json"])
        };
        tokio::task::spawn_blocking(move || {
            if let Err(e) = work() {
                tracing::warn!("cannot write a recording: {e}");
            }
        });
        true
    }
}

/// Creates `dir` (and its parents) readable by its owner only: recordings hold what a plugin
/// read, Secrets included, whatever the umask.
fn private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Writes `text` to a new file readable by its owner only.
fn private_file(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    f.write_all(text.as_bytes())
}

/// Bytes of the files under `dir`, recursively (what earlier runs recorded).
fn bytes_under(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => bytes_under(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

/// The reconcile start a recording's `call.json` gives.
pub fn started_at(call: &Value) -> Option<SystemTime> {
    let n = call.get("startedAtUnixNanos")?.as_u64()?;
    Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recording() -> Recording {
        Recording {
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
        }
    }

    #[test]
    fn a_recording_is_a_fixture_with_its_call() {
        let r = recording();
        let f = Recorder::files(&r);
        let observed: Value = serde_json::from_str(&f["observed.yaml"]).expect("json");
        assert_eq!(observed.as_array().map(Vec::len), Some(1), "one copy of each object");
        let call: Value = serde_json::from_str(&f["call.json"]).expect("json");
        assert_eq!(started_at(&call), Some(r.started_at));
        assert_eq!(call["sha256"], "ab");
    }

    fn modes(dir: &std::path::Path, out: &mut Vec<(PathBuf, u32)>) {
        use std::os::unix::fs::PermissionsExt;
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            out.push((e.path(), e.metadata().map(|m| m.permissions().mode() & 0o777).unwrap_or(0)));
            if e.path().is_dir() {
                modes(&e.path(), out);
            }
        }
    }

    /// Issue 35 (8): recordings hold Secret data (a plugin's reads): owner-only on disk, whatever
    /// the umask; and `--record-max` counts what earlier runs left in the folder.
    #[tokio::test]
    async fn recordings_are_owner_only_and_the_cap_counts_across_restarts() {
        let dir = std::env::temp_dir().join(format!("kwop-record-modes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let r = Recorder::new(dir.clone(), 1 << 20).expect("recorder");
        assert!(r.record(&recording()));
        let written = || {
            let folders = std::fs::read_dir(dir.join("p")).into_iter().flatten().flatten();
            folders.into_iter().any(|e| e.path().join("expected.json").exists())
        };
        for _ in 0..200 {
            if written() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let mut found = Vec::new();
        modes(&dir, &mut found);
        assert_eq!(found.len(), 6, "{found:?}");
        for (path, mode) in &found {
            let want = if path.is_dir() { 0o700 } else { 0o600 };
            assert_eq!(*mode, want, "{} is {mode:o}", path.display());
        }
        // A restart with a cap below what is there already records nothing.
        let used: u64 = Recorder::files(&recording()).values().map(|t| t.len() as u64).sum();
        let again = Recorder::new(dir.clone(), used + used / 2).expect("recorder");
        assert!(!again.record(&recording()), "the cap forgot the earlier run's bytes");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
