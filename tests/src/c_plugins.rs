//! C plugins for the tests, built from the repository's sources with the C template's build
//! script (`host/templates/c/build.sh`) and the C SDK in `wit/c`: `tests/plugins/c-faults` and
//! guest-foo/c. Each is built at most once per test process, into
//! `$CARGO_TARGET_DIR/test-plugins/`; the build script's own stamp skips a build whose sources,
//! WIT and toolchain did not change (about 0.5 s), so a test run rebuilds only what changed.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

fn out(name: &str) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::repo_root().join("target"))
        .join("test-plugins")
        .join(format!("{name}.wasm"))
}

/// Runs `script` (relative to the repository) with `env` to build `OUT`; panics with its output.
fn build(script: &str, env: &[(&str, PathBuf)], wasm: PathBuf) -> PathBuf {
    let root = crate::repo_root();
    let mut cmd = Command::new(root.join(script));
    cmd.arg(&wasm).current_dir(&root);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success() && wasm.is_file(), "{script} failed:\n{text}");
    wasm
}

/// tests/plugins/c-faults: fails on request in reconcile, finalize and validate (see its source).
pub fn c_faults() -> &'static str {
    static WASM: OnceLock<String> = OnceLock::new();
    WASM.get_or_init(|| {
        let root = crate::repo_root();
        let env = [
            ("KWOP_PLUGIN_DIR", root.join("tests/plugins/c-faults")),
            ("KWOP_C_SDK", root.join("wit/c")),
            ("KWOP_WIT", root.join("wit/v0.2")),
        ];
        build("host/templates/c/build.sh", &env, out("c-faults")).display().to_string()
    })
}

/// guest-foo/c, as `scripts/build-guests c` builds it.
pub fn guest_foo_c() -> &'static str {
    static WASM: OnceLock<String> = OnceLock::new();
    WASM.get_or_init(|| build("guest-foo/c/build.sh", &[], out("guest-foo-c")).display().to_string())
}
