//! The on-disk precompile cache: compiled components by (component sha256, engine), verified on
//! read, pruned least-recently-used to a size cap so a pod's emptyDir cannot fill up.
//!
//! An entry is two files: `KEY.cwasm` (what `Engine::precompile_component` produced) and
//! `KEY.sha256` (the hex sha256 of that file, written after it), where KEY is
//! `<component sha256>-<engine compatibility hash>`. A hit touches the `.cwasm`'s modification
//! time, so the mtime is the entry's last use. After every write, when the entries together exceed
//! the cap, the least recently used are deleted until they fit again — never the entry just
//! written. Several hosts may share the folder: an entry deleted by another process in the
//! meantime is simply gone, a reader that loses an entry recompiles, and files that are not
//! entries (anything else in the folder, temporary files of writes in progress) are neither
//! counted nor touched.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The default size cap: 1 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

/// A precompile cache folder and its size cap.
#[derive(Debug, Clone)]
pub struct PrecompileCache {
    dir: PathBuf,
    /// Bytes all entries together may take; 0: no cap.
    max_bytes: u64,
}

/// What one pruning pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pruned {
    /// Keys of the entries this pass deleted, oldest first.
    pub removed: Vec<String>,
    /// Bytes those entries took.
    pub freed: u64,
    /// Bytes the entries still take.
    pub remaining: u64,
}

/// An entry found in the folder.
#[derive(Debug, Default)]
struct Entry {
    bytes: u64,
    /// Last use: the `.cwasm`'s mtime (the sidecar's when only it is left).
    used: Option<SystemTime>,
    files: Vec<PathBuf>,
}

impl PrecompileCache {
    /// A cache in `dir` (created on the first write) holding at most `max_bytes` (0: no cap).
    pub fn new(dir: impl Into<PathBuf>, max_bytes: u64) -> Self {
        PrecompileCache { dir: dir.into(), max_bytes }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn paths(&self, key: &str) -> (PathBuf, PathBuf) {
        (self.dir.join(format!("{key}.cwasm")), self.dir.join(format!("{key}.sha256")))
    }

    /// The compiled bytes of `key` if the entry is there and intact (its sha256 matches the
    /// sidecar); a hit marks the entry as just used. A corrupt entry is reported and ignored
    /// (the next write replaces it).
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        let (path, sum_path) = self.paths(key);
        let (Ok(compiled), Ok(sum)) = (std::fs::read(&path), std::fs::read_to_string(&sum_path)) else {
            return None;
        };
        if hex::encode(Sha256::digest(&compiled)) != sum.trim() {
            tracing::warn!(path = %path.display(), "precompiled cache entry is corrupt, recompiling");
            return None;
        }
        if let Err(e) = touch(&path) {
            // A read-only cache still serves; only its pruning order is less exact.
            tracing::debug!(path = %path.display(), "cannot mark the precompiled cache entry as used: {e}");
        }
        Some(compiled)
    }

    /// Writes the entry `key` (atomically: a reader sees the old entry, none, or the new one),
    /// then prunes the folder to the cap, keeping `key`.
    pub fn put(&self, key: &str, compiled: &[u8]) -> std::io::Result<Pruned> {
        let (path, sum_path) = self.paths(key);
        write_atomically(&self.dir, &path, compiled)?;
        write_atomically(&self.dir, &sum_path, hex::encode(Sha256::digest(compiled)).as_bytes())?;
        let pruned = self.prune(key)?;
        if !pruned.removed.is_empty() {
            tracing::info!(
                dir = %self.dir.display(),
                removed = pruned.removed.len(),
                freed_mib = mib(pruned.freed),
                remaining_mib = mib(pruned.remaining),
                cap_mib = mib(self.max_bytes),
                entries = %pruned.removed.join(","),
                "pruned the precompile cache (least recently used first)"
            );
        }
        if self.max_bytes > 0 && pruned.remaining > self.max_bytes {
            tracing::warn!(
                dir = %self.dir.display(),
                remaining_mib = mib(pruned.remaining),
                cap_mib = mib(self.max_bytes),
                "the precompile cache stays over its cap: the entry just written alone is larger"
            );
        }
        Ok(pruned)
    }

    /// Deletes the least recently used entries, other than `keep`, until the entries take at most
    /// the cap. Entries deleted meanwhile by someone else are skipped; files that are not entries
    /// are left alone.
    pub fn prune(&self, keep: &str) -> std::io::Result<Pruned> {
        let mut entries = self.entries()?;
        let mut remaining: u64 = entries.values().map(|e| e.bytes).sum();
        let mut pruned = Pruned::default();
        if self.max_bytes == 0 || remaining <= self.max_bytes {
            pruned.remaining = remaining;
            return Ok(pruned);
        }
        let kept = entries.remove(keep).map(|e| e.bytes).unwrap_or(0);
        remaining -= kept;
        let mut order: Vec<(String, Entry)> = entries.into_iter().collect();
        // Oldest first; an entry without a readable mtime counts as oldest.
        order.sort_by(|a, b| a.1.used.cmp(&b.1.used).then_with(|| a.0.cmp(&b.0)));
        for (key, entry) in order {
            if remaining + kept <= self.max_bytes {
                break;
            }
            let mut deleted_here = false;
            for f in &entry.files {
                match std::fs::remove_file(f) {
                    Ok(()) => deleted_here = true,
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(e) => {
                        tracing::warn!(path = %f.display(), "cannot prune a precompile cache entry: {e}");
                    }
                }
            }
            // Gone either way (by us or by another host): it no longer counts.
            remaining -= entry.bytes;
            if deleted_here {
                pruned.freed += entry.bytes;
                pruned.removed.push(key);
            }
        }
        pruned.remaining = remaining + kept;
        Ok(pruned)
    }

    /// The entries in the folder by key (a missing folder has none).
    fn entries(&self) -> std::io::Result<BTreeMap<String, Entry>> {
        let mut out: BTreeMap<String, Entry> = BTreeMap::new();
        let rd = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e),
        };
        for item in rd {
            let item = item?;
            let name = item.file_name();
            let Some((key, ext)) = name.to_str().and_then(entry_name) else { continue };
            // Deleted since the listing, or not a regular file: not an entry.
            let Ok(meta) = item.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            let e = out.entry(key.to_string()).or_default();
            e.bytes += meta.len();
            e.files.push(item.path());
            let mtime = meta.modified().ok();
            if ext == "cwasm" || e.used.is_none() {
                e.used = mtime;
            }
        }
        Ok(out)
    }
}

/// `(key, extension)` when `name` is an entry's file: `<64 hex>-<16 hex>.cwasm|sha256`.
fn entry_name(name: &str) -> Option<(&str, &str)> {
    let (key, ext) = name.rsplit_once('.')?;
    let (sha, compat) = key.split_once('-')?;
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    (matches!(ext, "cwasm" | "sha256") && hex(sha, 64) && hex(compat, 16)).then_some((key, ext))
}

fn touch(path: &Path) -> std::io::Result<()> {
    std::fs::File::options().write(true).open(path)?.set_modified(SystemTime::now())
}

fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    // Unique per write, so two threads writing one key at once do not share a temporary file.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

fn mib(b: u64) -> String {
    format!("{:.1}", b as f64 / (1 << 20) as f64)
}

#[cfg(test)]
#[path = "precompiled_tests.rs"]
mod tests;
