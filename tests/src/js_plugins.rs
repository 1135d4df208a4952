//! JavaScript and TypeScript plugins kept in the repository outside guest-foo (test plugins under
//! `tests/plugins/js-*`, the TypeScript config-sync under `examples/config-sync/ts`), built by
//! their own `build.sh` or, without one, by the shared JavaScript build script
//! (`host/templates/js/build.sh`) with guest-foo/js's pinned toolchain.
//!
//! A folder with its own `build.sh` is built in place (its build writes only ignored folders); one
//! without is copied (without `node_modules`, `dist` and `gen`) into
//! `$CARGO_TARGET_DIR/guests/js-plugins/<name>/p/<name>`, with `wit/` and `host/` linked two
//! levels up as in the repository. Components are cached in `$CARGO_TARGET_DIR/guests/js-plugins/<name>/`
//! by a hash of the sources, the WIT, the SDK (`wit/js`), the build script and the lock file.

use anyhow::{bail, Context, Result};
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::process::Command;

/// Left out of the hash and the copy: installed packages and build output.
const SKIP: &[&str] = &["node_modules", "dist", "gen"];

/// Builds the JavaScript (or TypeScript) plugin in `dir` (relative to the repository root) and
/// returns its component, `<name>-<hash>.wasm`.
pub fn build(dir: &str, name: &str) -> Result<PathBuf> {
    let root = crate::repo_root();
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let work = target.join("guests").join("js-plugins").join(name);
    let own = root.join(dir).join("build.sh");
    let copy = if own.is_file() { root.join(dir) } else { work.join("p").join(name) };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    if own.is_file() {
        crate::tree::hash_tree(&copy, None, SKIP, &mut h)?;
    } else {
        let _ = std::fs::remove_dir_all(&copy);
        crate::tree::hash_tree(&root.join(dir), Some(&copy), SKIP, &mut h)?;
        // The pinned toolchain, unless the plugin pins its own.
        for f in ["package.json", "package-lock.json"] {
            if !copy.join(f).exists() {
                std::fs::write(copy.join(f), std::fs::read(root.join("guest-foo/js").join(f))?)?;
            }
        }
        crate::tree::link_repo(&work)?;
    }
    for f in [
        "host/templates/js/build.sh",
        "wit/js/kwop.js",
        "wit/js/kwop.d.ts",
        "wit/v0.2/reconciler.wit",
        "guest-foo/js/package-lock.json",
    ] {
        std::fs::read(root.join(f))?.hash(&mut h);
    }
    let out = work.join(format!("{name}-{:016x}.wasm", h.finish()));
    if out.is_file() {
        return Ok(out);
    }
    std::fs::create_dir_all(&work)?;
    let mut cmd = Command::new("bash");
    if own.is_file() {
        cmd.arg(&own);
    } else {
        cmd.arg(root.join("host/templates/js/build.sh")).env("KWOP_PLUGIN_DIR", &copy);
    }
    let status = cmd.arg(&out).status().with_context(|| format!("cannot build {dir}"))?;
    if !status.success() || !out.is_file() {
        bail!("building {dir} failed (log: {}/dist/build.log)", copy.display());
    }
    Ok(out)
}
