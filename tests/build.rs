//! Builds the WebAssembly plugins the tests use (as Spin builds its test guests), into
//! `target/test-plugins`, and exposes their paths as `KWOP_PLUGIN_*` compile-time variables.
//! A nested cargo with its own target folder: the outer build holds the lock on the main one.

use std::path::{Path, PathBuf};
use std::process::Command;

fn build(root: &Path, out: &Path, package: &str, features: &[&str], artifact: &str, var: &str) {
    let target_dir = out.join(if features.is_empty() { "base".to_string() } else { features.join("-") });
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root)
        .args(["build", "--quiet", "--profile", "plugin", "--target", "wasm32-wasip2", "-p", package, "--target-dir"])
        .arg(&target_dir);
    if !features.is_empty() {
        cmd.arg("--features").arg(features.join(","));
    }
    // The outer build's settings are for the host target, not for wasm.
    for v in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(v);
    }
    let status = cmd.status().unwrap_or_else(|e| panic!("cannot run cargo to build {package}: {e}"));
    if !status.success() {
        panic!("building the {package} plugin for wasm32-wasip2 failed (is the target installed? `rustup target add wasm32-wasip2`, or scripts/setup)");
    }
    let path = target_dir.join("wasm32-wasip2/plugin").join(artifact);
    println!("cargo:rustc-env={var}={}", path.display());
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into()));
    let root = manifest.parent().map(Path::to_path_buf).unwrap_or_else(|| manifest.clone());
    // Next to the main target folder (which may be moved with CARGO_TARGET_DIR, e.g. to a cache).
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let out = target.join("test-plugins");
    build(&root, &out, "guest-foo", &[], "guest_foo.wasm", "KWOP_PLUGIN_GUEST_FOO");
    build(&root, &out, "guest-foo", &["v2"], "guest_foo.wasm", "KWOP_PLUGIN_GUEST_FOO_V2");
    build(&root, &out, "plugin-chaos", &[], "plugin_chaos.wasm", "KWOP_PLUGIN_CHAOS");
    build(&root, &out, "plugin-chaos", &["info-sleeps"], "plugin_chaos.wasm", "KWOP_PLUGIN_CHAOS_INFO_SLEEPS");
    build(&root, &out, "plugin-chaos", &["slow-info"], "plugin_chaos.wasm", "KWOP_PLUGIN_CHAOS_SLOW_INFO");
    build(&root, &out, "not-a-plugin", &[], "not-a-plugin.wasm", "KWOP_PLUGIN_WRONG_WORLD");
    build(&root, &out, "plugin-selfheal", &[], "plugin_selfheal.wasm", "KWOP_PLUGIN_SELFHEAL");
    build(&root, &out, "plugin-finalizer", &[], "plugin_finalizer.wasm", "KWOP_PLUGIN_FINALIZER");
    build(&root, &out, "plugin-converter", &[], "plugin_converter.wasm", "KWOP_PLUGIN_CONVERTER");
    build(&root, &out, "plugin-quorum", &[], "plugin_quorum.wasm", "KWOP_PLUGIN_QUORUM");
    build(&root, &out, "config-sync", &[], "config_sync.wasm", "KWOP_PLUGIN_CONFIG_SYNC");
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");
    for p in ["../wit", "../guest-foo/src", "../guest-foo/Cargo.toml", "plugins", "../examples"] {
        println!("cargo:rerun-if-changed={p}");
    }
}
