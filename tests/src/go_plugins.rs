//! Go plugins built for the tests with the Go SDK's build script (`wit/go/build.sh`): the test
//! plugins under `tests/plugins/go-*`, the Go config-sync, guest-foo's Go port. Each is built
//! once per test process into `$CARGO_TARGET_DIR/guests/go/`, named by a hash of its sources, the
//! SDK and the 0.2 WIT, so an unchanged plugin is not rebuilt (the build script also keeps its
//! own stamp).

use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::hash::Hasher;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

/// The component of the Go plugin in `dir` (relative to the repository), built once per process.
pub fn build(dir: &str) -> Result<PathBuf> {
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = built.get_or_insert_with(HashMap::new).get(dir) {
        return Ok(p.clone());
    }
    let root = crate::repo_root();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for d in [dir, "wit/go", "wit/v0.2"] {
        crate::tree::hash_tree(&root.join(d), None, &["dist", ".git"], &mut h)?;
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let name = dir.trim_end_matches('/').replace('/', "-");
    let out = target.join("guests").join("go").join(format!("{name}-{:016x}.wasm", h.finish()));
    if !out.is_file() {
        let output = Command::new("bash")
            .arg(root.join("wit/go/build.sh"))
            .arg(root.join(dir))
            .arg(&out)
            .output()
            .context("cannot run wit/go/build.sh")?;
        if !output.status.success() || !out.is_file() {
            bail!("building the Go plugin {dir} failed: {}", String::from_utf8_lossy(&output.stderr));
        }
    }
    built.get_or_insert_with(HashMap::new).insert(dir.to_string(), out.clone());
    Ok(out)
}
