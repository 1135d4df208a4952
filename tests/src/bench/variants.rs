//! Copies of guest-foo for other CRD groups (the many-plugins measurement), and files that are
//! the same plugin with a different hash (cold hot swaps).

use crate::plane::ControlPlane;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Group of copy number `i`.
pub fn group(i: usize) -> String {
    format!("foo{i}.bench.kwop.dev")
}

/// Builds guest-foo with `KWOP_FOO_GROUP` set to each group (see guest-foo/src/plugin.rs),
/// into `work/variants/<group>.wasm`; cached: a file already there is reused. The nested build
/// uses its own target folder, seeded from the test plugins' one (same dependencies) so only
/// guest-foo itself is compiled per copy.
pub fn build_copies(work: &Path, groups: &[String]) -> Result<Vec<PathBuf>> {
    let out = work.join("variants").join(sources_hash()?);
    std::fs::create_dir_all(&out)?;
    let root = crate::repo_root();
    let target = work.join("variants-target");
    let seed = Path::new(crate::plugins::GUEST_FOO).ancestors().nth(3).map(Path::to_path_buf);
    if !target.exists() {
        if let Some(seed) = seed.filter(|s| s.is_dir()) {
            // `cp -a` keeps modification times, which cargo's freshness checks rely on.
            let _ = Command::new("cp").arg("-a").arg(&seed).arg(&target).status();
        }
    }
    let mut files = Vec::new();
    for g in groups {
        let file = out.join(format!("{g}.wasm"));
        if !file.is_file() {
            let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
            cmd.current_dir(&root)
                .args(["build", "--quiet", "--profile", "plugin", "--target", "wasm32-wasip2", "-p", "guest-foo"])
                .arg("--target-dir")
                .arg(&target)
                .env("KWOP_FOO_GROUP", g);
            for v in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET", "CARGO_TARGET_DIR", "RUSTC_WRAPPER"]
            {
                cmd.env_remove(v);
            }
            let status = cmd.status().context("cannot run cargo to build a guest-foo copy")?;
            if !status.success() {
                bail!("building guest-foo for group {g} failed");
            }
            std::fs::copy(target.join("wasm32-wasip2/plugin/guest_foo.wasm"), &file)?;
        }
        files.push(file);
    }
    Ok(files)
}

/// A hash of what a guest-foo build depends on (its sources, manifest, the WIT files, the lock
/// file), naming the folder of built copies so a change rebuilds them.
fn sources_hash() -> Result<String> {
    use std::hash::{Hash, Hasher};
    let root = crate::repo_root();
    let mut files = Vec::new();
    let mut stack = vec![root.join("guest-foo/src"), root.join("wit")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))?.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.push(root.join("guest-foo/Cargo.toml"));
    files.push(root.join("Cargo.lock"));
    files.sort();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for f in files {
        f.strip_prefix(&root).unwrap_or(&f).hash(&mut h);
        std::fs::read(&f).unwrap_or_default().hash(&mut h);
    }
    Ok(format!("{:016x}", h.finish()))
}

/// The Foo CRD (crds/foo.yaml) for another group.
pub fn crd_yaml(group: &str) -> Result<String> {
    let text = std::fs::read_to_string(crate::repo_root().join("crds/foo.yaml"))?;
    Ok(text.replace("samplecontroller.k8s.io", group))
}

/// Installs the Foo CRD of each group and waits until they are served.
pub fn install_crds(plane: &ControlPlane, groups: &[String]) -> Result<()> {
    let all: Vec<String> = groups.iter().map(|g| crd_yaml(g)).collect::<Result<_>>()?;
    plane.kubectl_stdin(&["apply", "--server-side", "-f", "-"], &all.join("\n---\n"))?;
    for g in groups {
        plane.kubectl_output(&["wait", "--for=condition=established", "--timeout=60s", &format!("crd/foos.{g}")])?;
    }
    Ok(())
}

/// The same component with a different sha256: a custom section appended (allowed anywhere in a
/// component), so the host has never compiled it.
pub fn with_marker(src: &Path, dst: &Path, marker: &str) -> Result<()> {
    let mut bytes = std::fs::read(src)?;
    let name = b"kwop-bench";
    let mut payload = Vec::new();
    leb128(&mut payload, name.len() as u64);
    payload.extend_from_slice(name);
    payload.extend_from_slice(marker.as_bytes());
    bytes.push(0); // custom section id
    leb128(&mut bytes, payload.len() as u64);
    bytes.extend_from_slice(&payload);
    std::fs::write(dst, bytes)?;
    Ok(())
}

fn leb128(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}
