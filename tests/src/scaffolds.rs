//! Plugins made with `kwop plugin new` for the tests: scaffolded into folders outside the
//! repository and built with their own scripts.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh folder outside the repository (under the system's temp folder).
pub fn outside(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join("kwop-test").join(format!("{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp folder");
    assert!(!dir.starts_with(crate::repo_root()), "{} is inside the repository", dir.display());
    dir
}

/// Runs a command in `dir` and returns its output; fails the test with the output when it fails.
/// Rust scaffolds share one target folder, `$CARGO_TARGET_DIR/templates`.
pub fn run(dir: &Path, program: &str, args: &[&str]) -> String {
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(dir);
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::repo_root().join("target"))
        .join("templates");
    cmd.env("CARGO_TARGET_DIR", target);
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
