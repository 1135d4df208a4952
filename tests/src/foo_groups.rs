//! guest-foo's JavaScript and Python ports built for another CRD group (as the many-plugins
//! benchmark does for the Rust guest with `KWOP_FOO_GROUP`), so several Foo plugins can run in one
//! host: a copy of the port with its group replaced, built by the port's own build script.
//!
//! Builds are cached in `$CARGO_TARGET_DIR/guests/groups/` by a hash of the sources and the group.

use anyhow::{bail, Context, Result};
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::process::Command;

/// The file holding the group in each port.
fn group_file(lang: &str) -> Result<&'static str> {
    Ok(match lang {
        "js" => "src/component.js",
        "python" => "src/app.py",
        _ => bail!("no {lang} port of guest-foo with a group to change (js, python)"),
    })
}

/// guest-foo's `lang` port ("js" or "python") reconciling Foos of `group` instead of
/// samplecontroller.k8s.io; returns the component.
pub fn guest_foo_for_group(lang: &str, group: &str) -> Result<PathBuf> {
    let root = crate::repo_root();
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let work = target.join("guests").join("groups").join(format!("{lang}-{group}"));
    // The port's build script finds the shared template and wit/ two levels up.
    let port = work.join("guest-foo").join(lang);
    let _ = std::fs::remove_dir_all(&port);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let skip = ["node_modules", "dist", "__pycache__", ".venv"];
    crate::tree::hash_tree(&root.join("guest-foo").join(lang), Some(&port), &skip, &mut h)?;
    crate::tree::link_repo(&work)?;
    let file = port.join(group_file(lang)?);
    let text = std::fs::read_to_string(&file)?;
    if !text.contains("samplecontroller.k8s.io") {
        bail!("{} does not name the group samplecontroller.k8s.io", file.display());
    }
    std::fs::write(&file, text.replace("samplecontroller.k8s.io", group))?;
    for t in ["host/templates/js/build.sh", "host/templates/python/build.sh"] {
        std::fs::read(root.join(t))?.hash(&mut h);
    }
    group.hash(&mut h);
    let out = work.join(format!("foo-{lang}-{:016x}.wasm", h.finish()));
    if out.is_file() {
        return Ok(out);
    }
    let status = Command::new("bash")
        .arg(port.join("build.sh"))
        .arg(&out)
        .status()
        .with_context(|| format!("cannot run {}/build.sh", port.display()))?;
    if !status.success() || !out.is_file() {
        bail!("building guest-foo/{lang} for group {group} failed (log: {}/dist/build.log)", port.display());
    }
    Ok(out)
}
