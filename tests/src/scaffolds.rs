//! Plugins made with `kwop plugin new` for the tests: scaffolded into folders outside the
//! repository and built with their own scripts.
//!
//! Builds are shared between tests and test runs: [`build`] keeps each `dist/plugin.wasm` under
//! `$CARGO_TARGET_DIR/scaffold-builds/<sha256 of the plugin's sources>.wasm`, so the same sources
//! (same template, same patches, same build script and toolchain pins) are built once.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Folders a build or a test run writes into a plugin folder: not sources.
const NOT_SOURCES: &[&str] = &["dist", "target", "node_modules", ".venv", "__pycache__", "bindings", "gen"];

/// A fresh folder outside the repository (under the system's temp folder).
pub fn outside(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join("kwop-test").join(format!("{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp folder");
    assert!(!dir.starts_with(crate::repo_root()), "{} is inside the repository", dir.display());
    dir
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| crate::repo_root().join("target"))
}

/// Runs a command in `dir` and returns its output; fails the test with the output when it fails.
/// Rust scaffolds share one target folder, `$CARGO_TARGET_DIR/templates`.
pub fn run(dir: &Path, program: &str, args: &[&str]) -> String {
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(dir);
    cmd.env("CARGO_TARGET_DIR", target_dir().join("templates"));
    for v in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET", "RUSTC_WRAPPER"] {
        cmd.env_remove(v);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{program} {args:?} in {} failed:\n{text}", dir.display());
    text
}

/// `kwop plugin new NAME --lang LANG` (with the `kwop` binary at `kwop`) in a fresh folder
/// outside the repository; returns the plugin folder.
pub fn scaffold(kwop: &str, name: &str, lang: &str) -> PathBuf {
    let parent = outside(name);
    let out = run(&parent, kwop, &["plugin", "new", name, "--lang", lang]);
    assert!(out.contains("created") && out.contains("./build.sh"), "{out}");
    parent.join(name)
}

/// Replaces `from` by `to` in a scaffolded file (which must contain it).
pub fn patch(dir: &Path, file: &str, from: &str, to: &str) {
    let p = dir.join(file);
    let text = std::fs::read_to_string(&p).expect("template file");
    assert!(text.contains(from), "{file} no longer contains {from:?}");
    std::fs::write(&p, text.replace(from, to)).expect("write");
}

/// The sha256 of every source file of a plugin folder (paths and contents, in path order).
pub fn sources_hash(dir: &Path) -> String {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if !NOT_SOURCES.iter().any(|n| e.file_name() == *n) {
                    walk(root, &p, out);
                }
            } else {
                out.push(p.strip_prefix(root).unwrap_or(&p).to_path_buf());
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files);
    files.sort();
    let mut h = Sha256::new();
    for f in files {
        h.update(f.to_string_lossy().as_bytes());
        h.update([0]);
        h.update(std::fs::read(dir.join(&f)).unwrap_or_default());
        h.update([0]);
    }
    hex::encode(h.finalize())
}

/// `./build.sh` in a scaffolded folder, unless the same sources were built before (by another
/// test or an earlier run): then that component is copied into `dist/plugin.wasm`. Returns it.
pub fn build(dir: &Path) -> PathBuf {
    let cache = target_dir().join("scaffold-builds");
    let cached = cache.join(format!("{}.wasm", sources_hash(dir)));
    let wasm = dir.join("dist/plugin.wasm");
    if cached.is_file() {
        std::fs::create_dir_all(dir.join("dist")).expect("dist");
        std::fs::copy(&cached, &wasm).expect("copy the cached build");
        return wasm;
    }
    run(dir, "./build.sh", &[]);
    assert!(wasm.is_file(), "./build.sh in {} wrote no dist/plugin.wasm", dir.display());
    std::fs::create_dir_all(&cache).expect("cache folder");
    let tmp =
        cache.join(format!(".{}.{}", std::process::id(), cached.file_name().and_then(|n| n.to_str()).unwrap_or("x")));
    if std::fs::copy(&wasm, &tmp).is_ok() {
        let _ = std::fs::rename(&tmp, &cached);
    }
    wasm
}
