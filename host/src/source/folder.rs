//! The plugin folder: `*.wasm` files listed and hashed. Each file is a plugin whose own `info()`
//! is its authority (development and the demo; a cluster uses ReconcilerPlugins).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A plugin file's current content.
#[derive(Debug, Clone)]
pub struct FileState {
    /// Path as listed (may be a symlink).
    pub path: PathBuf,
    /// sha256 of the content.
    pub sha256: String,
    /// The content.
    pub bytes: std::sync::Arc<Vec<u8>>,
}

/// The result of a scan.
#[derive(Debug, Default)]
pub struct Scan {
    /// Readable plugin files by file name.
    pub files: BTreeMap<String, FileState>,
    /// Files that could not be read: (file name, why).
    pub errors: Vec<(String, String)>,
}

/// Lists `*.wasm` in `dir` (following symlinks, skipping hidden entries such as the kubelet's
/// `..data` folders) keyed by file name. Unreadable files are reported, not fatal.
pub fn scan(dir: &Path) -> std::io::Result<Scan> {
    Scanner::default().scan(dir)
}

/// What identifies a file's content without reading it: device, inode, size, and the
/// modification and change times (a rename, an in-place write or a ConfigMap update each change
/// one of them).
type Signature = (u64, u64, u64, i64, i64, i64, i64);

fn signature(m: &std::fs::Metadata) -> Signature {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec())
}

/// A file changed this recently may change again within the file system's timestamp
/// granularity without its signature changing: read it again ("racy git").
const SETTLED: std::time::Duration = std::time::Duration::from_secs(2);

fn settled(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    // The later of the modification time (which `touch` or `cp -p` can set back) and the change
    // time (which every write moves to now).
    let changed = m.mtime().max(m.ctime());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    now - changed >= SETTLED.as_secs() as i64
}

/// Scans that reuse the previous one: the supervisor rescans the folder every 10 s, and reading
/// and hashing every plugin each time was 14 % of an idle host's CPU (BENCHMARKS.md). A file
/// whose signature is unchanged, and which has been still for [`SETTLED`], keeps its hash.
#[derive(Debug, Clone, Default)]
pub struct Scanner {
    known: std::sync::Arc<std::sync::Mutex<BTreeMap<PathBuf, (Signature, FileState)>>>,
}

impl Scanner {
    /// As [`scan`], reusing what an earlier scan of this scanner read.
    pub fn scan(&self, dir: &Path) -> std::io::Result<Scan> {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        let mut files = BTreeMap::new();
        let mut errors = Vec::new();
        let mut seen = BTreeMap::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !name.ends_with(".wasm") {
                continue;
            }
            let path = entry.path();
            // `metadata` follows symlinks: a dangling one is skipped, a directory too.
            let meta = match std::fs::metadata(&path) {
                Ok(m) if m.is_file() => m,
                Ok(_) => continue,
                Err(e) => {
                    errors.push((name, format!("cannot stat: {e}")));
                    continue;
                }
            };
            let sig = signature(&meta);
            if let Some((_, f)) = known.get(&path).filter(|(s, _)| *s == sig && settled(&meta)) {
                seen.insert(path, (sig, f.clone()));
                files.insert(name, f.clone());
                continue;
            }
            match std::fs::read(&path) {
                Ok(bytes) => {
                    let sha256 = crate::plugin::loader::sha256_hex(&bytes);
                    let f = FileState { path: path.clone(), sha256, bytes: std::sync::Arc::new(bytes) };
                    // Read after the stat: if it changed in between, the next scan sees a new
                    // signature and reads it again.
                    seen.insert(path, (sig, f.clone()));
                    files.insert(name, f);
                }
                Err(e) => errors.push((name, format!("cannot read: {e}"))),
            }
        }
        *known = seen;
        Ok(Scan { files, errors })
    }
}

/// The folder's plugins as the supervisor takes them: keyed and ranked by file name, no grants.
pub fn catalog(scan: Scan) -> super::Catalog {
    let entries = scan
        .files
        .into_iter()
        .map(|(name, f)| {
            let entry = super::Entry {
                key: name.clone(),
                origin: f.path,
                sha256: f.sha256,
                bytes: f.bytes,
                grants: None,
                limits: super::LimitOverride::default(),
                suspend: false,
                rank: name.clone(),
                candidate: None,
                failure_policy: None,
            };
            (name, entry)
        })
        .collect();
    super::Catalog { entries, errors: scan.errors }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn age(path: &Path, secs: u64) {
        let t = std::time::SystemTime::now() - std::time::Duration::from_secs(secs);
        let f = std::fs::File::options().write(true).open(path).unwrap_or_else(|e| panic!("{e}"));
        f.set_modified(t).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn a_rescan_reuses_still_files_and_reads_changed_ones() {
        let dir = std::env::temp_dir().join(format!("kwop-scan-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let a = dir.join("a.wasm");
        std::fs::write(&a, b"one").unwrap_or_else(|e| panic!("{e}"));
        let scanner = Scanner::default();
        scanner.scan(&dir).unwrap_or_else(|e| panic!("{e}"));
        // Still for longer than SETTLED (by its change time, which cannot be set back).
        std::thread::sleep(SETTLED + std::time::Duration::from_secs(1));
        let first = scanner.scan(&dir).unwrap_or_else(|e| panic!("{e}"));
        let again = scanner.scan(&dir).unwrap_or_else(|e| panic!("{e}"));
        let bytes = |s: &Scan| s.files["a.wasm"].bytes.clone();
        assert!(std::sync::Arc::ptr_eq(&bytes(&first), &bytes(&again)), "a still file was read again");
        // Same size, rewritten in place with its old modification time put back (`cp -p`):
        // the change time moves, so it is read.
        std::fs::write(&a, b"two").unwrap_or_else(|e| panic!("{e}"));
        age(&a, 60);
        let changed = scanner.scan(&dir).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(changed.files["a.wasm"].bytes.as_slice(), b"two");
        assert_ne!(changed.files["a.wasm"].sha256, first.files["a.wasm"].sha256);
        // Changed just now: read every time until it has been still for a while.
        std::fs::write(&a, b"new").unwrap_or_else(|e| panic!("{e}"));
        let fresh = scanner.scan(&dir).unwrap_or_else(|e| panic!("{e}"));
        let fresh_again = scanner.scan(&dir).unwrap_or_else(|e| panic!("{e}"));
        assert!(!std::sync::Arc::ptr_eq(&bytes(&fresh), &bytes(&fresh_again)));
        // Removed: gone from the scan.
        std::fs::remove_file(&a).unwrap_or_else(|e| panic!("{e}"));
        assert!(scanner.scan(&dir).unwrap_or_else(|e| panic!("{e}")).files.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
