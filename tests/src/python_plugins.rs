//! Python test plugins (tests/plugins/python-*/src) built the way a `kwop plugin new --lang
//! python` plugin is: host/templates/python/build.sh over a work folder with the sources, guest-foo's
//! pinned requirements.txt and the repository's wit/ (0.2 WIT and wit/python/kwop.py).
//!
//! Builds are cached in `$CARGO_TARGET_DIR/test-plugins/` by a hash of every input, so a test
//! process builds each at most once (and not at all when nothing changed).

use anyhow::{bail, Context, Result};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

fn hash_file(path: &Path, h: &mut impl Hasher) -> Result<()> {
    path.display().to_string().hash(h);
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?.hash(h);
    Ok(())
}

/// The component of tests/plugins/`name` (a folder with src/app.py), built once per inputs.
pub fn build(name: &str) -> Result<PathBuf> {
    static LOCK: Mutex<()> = Mutex::new(());
    let _one_at_a_time = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let root = crate::repo_root();
    let src = root.join("tests/plugins").join(name).join("src");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&src)
        .with_context(|| format!("no sources in {}", src.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    files.sort();
    let inputs = [
        "guest-foo/python/requirements.txt",
        "host/templates/python/build.sh",
        "wit/python/kwop.py",
        "wit/v0.2/reconciler.wit",
    ];
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for f in files.iter().cloned().chain(inputs.iter().map(|i| root.join(i))) {
        hash_file(&f, &mut h)?;
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let out = target.join("test-plugins").join(format!("{name}-{:016x}.wasm", h.finish()));
    if out.is_file() {
        return Ok(out);
    }
    let work = target.join("test-plugins").join(format!("{name}-work"));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("src"))?;
    for f in &files {
        std::fs::copy(f, work.join("src").join(f.file_name().unwrap_or_default()))?;
    }
    std::fs::copy(root.join(inputs[0]), work.join("requirements.txt"))?;
    std::os::unix::fs::symlink(root.join("wit"), work.join("wit"))?;
    let status = Command::new("bash")
        .arg(root.join("host/templates/python/build.sh"))
        .arg(&out)
        .env("KWOP_PLUGIN_DIR", &work)
        .status()
        .context("cannot run host/templates/python/build.sh")?;
    if !status.success() || !out.is_file() {
        bail!("building tests/plugins/{name} failed (log: {}/dist/build.log)", work.display());
    }
    Ok(out)
}
