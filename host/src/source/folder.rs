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
    let mut files = BTreeMap::new();
    let mut errors = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !name.ends_with(".wasm") {
            continue;
        }
        let path = entry.path();
        // `metadata` follows symlinks: a dangling one is skipped, a directory too.
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => {}
            Ok(_) => continue,
            Err(e) => {
                errors.push((name, format!("cannot stat: {e}")));
                continue;
            }
        }
        match std::fs::read(&path) {
            Ok(bytes) => {
                let sha256 = crate::plugin::loader::sha256_hex(&bytes);
                files.insert(name, FileState { path, sha256, bytes: std::sync::Arc::new(bytes) });
            }
            Err(e) => errors.push((name, format!("cannot read: {e}"))),
        }
    }
    Ok(Scan { files, errors })
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
