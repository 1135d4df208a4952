//! Where the command-line tools built by `scripts/tools` are (helm, cosign, the `otelcol-kwop`
//! collector): `$KWOP_TOOLS_DIR` when set, else the folder `scripts/tools --print-dir TOOL`
//! prints (which builds that tool if it is missing, like `scripts/k8s-bins`).

use anyhow::{anyhow, bail, Result};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

/// The folder holding `tool` (`helm`, `cosign`, `otelcol`), built if missing.
pub fn dir(tool: &str) -> Result<PathBuf> {
    static DIRS: Mutex<Option<HashMap<String, std::result::Result<PathBuf, String>>>> = Mutex::new(None);
    let mut dirs = DIRS.lock().unwrap_or_else(|p| p.into_inner());
    let dirs = dirs.get_or_insert_with(HashMap::new);
    dirs.entry(tool.to_string())
        .or_insert_with(|| find(tool).map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(|e| anyhow!(e))
}

fn find(tool: &str) -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("KWOP_TOOLS_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    let script = crate::repo_root().join("scripts/tools");
    let out = Command::new("bash")
        .arg(&script)
        .args(["--print-dir", tool])
        .output()
        .map_err(|e| anyhow!("cannot run {}: {e}", script.display()))?;
    if !out.status.success() {
        bail!("scripts/tools {tool} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().lines().last().unwrap_or_default()))
}

/// The path of one binary (`helm`, `cosign`, `otelcol-kwop`), checked to exist.
pub fn path(binary: &str) -> Result<PathBuf> {
    let tool = binary.strip_suffix("-kwop").unwrap_or(binary);
    let p = dir(tool)?.join(binary);
    if !p.is_file() {
        bail!("{} is missing (run scripts/tools {tool})", p.display());
    }
    Ok(p)
}
