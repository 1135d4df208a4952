//! Files a new plugin gets from elsewhere in the repository, so each exists once: the WIT (0.3 for
//! the Rust SDK, 0.2 for the others' SDKs), the Foo CRD, the Rust SDK (with a standalone manifest
//! and the workspace's lock file), the pinned JavaScript and Python toolchains and helper modules (`wit/js`, `wit/python`, vendored into
//! `src/`), the C SDK with its JSON library (`wit/c`, into `src/`) and the Go SDK (`wit/go`, with
//! its build script).

use super::Vars;
use include_dir::{include_dir, Dir, DirEntry};
use std::path::PathBuf;

static GO_SDK: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../wit/go");

const WIT_V02: &str = include_str!("../../../wit/v0.2/reconciler.wit");
const WIT_V03: &str = include_str!("../../../wit/v0.3/reconciler.wit");
const FOO_CRD: &str = include_str!("../../../crds/foo.yaml");
static SDK_SRC: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../wit/rust/src");
const SDK_MANIFEST: &str = include_str!("../../../wit/rust/Cargo.toml");
const CARGO_LOCK: &str = include_str!("../../../Cargo.lock");
const WORKSPACE_MANIFEST: &str = include_str!("../../../Cargo.toml");
const JS_PACKAGE: &str = include_str!("../../../guest-foo/js/package.json");
const JS_LOCK: &str = include_str!("../../../guest-foo/js/package-lock.json");
const PY_REQUIREMENTS: &str = include_str!("../../../guest-foo/python/requirements.txt");
const JS_HELPER: &str = include_str!("../../../wit/js/kwop.js");
const JS_HELPER_TYPES: &str = include_str!("../../../wit/js/kwop.d.ts");
const JS_WIT_TYPES: [(&str, &str); 4] = [
    ("src/types/reconciler.d.ts", include_str!("../../../wit/js/types/reconciler.d.ts")),
    (
        "src/types/interfaces/kwop-reconciler-cache.d.ts",
        include_str!("../../../wit/js/types/interfaces/kwop-reconciler-cache.d.ts"),
    ),
    (
        "src/types/interfaces/kwop-reconciler-log.d.ts",
        include_str!("../../../wit/js/types/interfaces/kwop-reconciler-log.d.ts"),
    ),
    (
        "src/types/interfaces/kwop-reconciler-types.d.ts",
        include_str!("../../../wit/js/types/interfaces/kwop-reconciler-types.d.ts"),
    ),
];
const PY_HELPER: &str = include_str!("../../../wit/python/kwop.py");
const PY_TESTING: &str = include_str!("../../../wit/python/kwop_testing.py");
const C_SDK: [(&str, &str); 4] = [
    ("src/kwop.h", include_str!("../../../wit/c/kwop.h")),
    ("src/kwop.c", include_str!("../../../wit/c/kwop.c")),
    ("src/kwop_wasm.c", include_str!("../../../wit/c/kwop_wasm.c")),
    ("src/kwop_testing.h", include_str!("../../../wit/c/kwop_testing.h")),
];
const C_JSON: &str = include_str!("../../../wit/c/json.c");
const C_JSON_H: &str = include_str!("../../../wit/c/json.h");
const C_ESCAPE_TABLE: &str = include_str!("../../../wit/c/debug_escape_table.h");

/// The extra files of a plugin in `lang`, as (path in the plugin folder, contents).
pub(super) fn files(lang: &str, vars: &Vars) -> Vec<(PathBuf, Vec<u8>)> {
    let wit = if lang == "rust" { ("wit/v0.3/reconciler.wit", WIT_V03) } else { ("wit/v0.2/reconciler.wit", WIT_V02) };
    let mut out = vec![(wit.0, wit.1.to_string()), ("crds/foo.yaml", FOO_CRD.to_string())];
    match lang {
        "rust" => {
            out.push(("wit/rust/Cargo.toml", standalone_sdk_manifest()));
            // The versions kwop itself is built and tested with (cargo drops what is unused).
            out.push(("Cargo.lock", CARGO_LOCK.to_string()));
            let mut files: Vec<(PathBuf, Vec<u8>)> =
                out.into_iter().map(|(p, s)| (PathBuf::from(p), s.into_bytes())).collect();
            files
                .extend(SDK_SRC.files().map(|f| (PathBuf::from("wit/rust/src").join(f.path()), f.contents().to_vec())));
            return files;
        }
        "js" => {
            out.push(("package.json", renamed_package(JS_PACKAGE, vars, true)));
            out.push(("package-lock.json", renamed_package(JS_LOCK, vars, false)));
            out.push(("src/kwop.js", JS_HELPER.to_string()));
            out.push(("src/kwop.d.ts", JS_HELPER_TYPES.to_string()));
            out.extend(JS_WIT_TYPES.iter().map(|(p, t)| (*p, t.to_string())));
        }
        "python" => {
            out.push(("requirements.txt", PY_REQUIREMENTS.to_string()));
            out.push(("src/kwop.py", PY_HELPER.to_string()));
            out.push(("tests/kwop_testing.py", PY_TESTING.to_string()));
        }
        "c" => {
            out.push(("src/json.c", C_JSON.to_string()));
            out.push(("src/json.h", C_JSON_H.to_string()));
            out.push(("src/debug_escape_table.h", C_ESCAPE_TABLE.to_string()));
            out.extend(C_SDK.iter().map(|(p, t)| (*p, t.to_string())));
        }
        "go" => {
            let mut sdk = Vec::new();
            go_sdk(&GO_SDK, &mut sdk);
            let mut files: Vec<(PathBuf, Vec<u8>)> =
                out.into_iter().map(|(p, s)| (PathBuf::from(p), s.into_bytes())).collect();
            files.extend(sdk);
            return files;
        }
        _ => {}
    }
    out.into_iter().map(|(p, s)| (PathBuf::from(p), s.into_bytes())).collect()
}

/// The SDK's manifest with the workspace's values filled in, for a crate outside the workspace.
pub(super) fn standalone_sdk_manifest() -> String {
    let field = |key: &str| {
        WORKSPACE_MANIFEST
            .lines()
            .find_map(|l| l.strip_prefix(key).and_then(|r| r.trim_start().strip_prefix('=')).map(str::trim))
            .unwrap_or("\"\"")
            .to_string()
    };
    let k8s = WORKSPACE_MANIFEST
        .lines()
        .find_map(|l| l.strip_prefix("k8s-openapi = { version = ").and_then(|r| r.split(',').next()))
        .unwrap_or("\"0.29\"")
        .to_string();
    let mut out = String::new();
    let mut in_lints = false;
    for line in SDK_MANIFEST.lines() {
        if line.starts_with('[') {
            in_lints = line == "[lints]";
        }
        if in_lints {
            continue;
        }
        let line = match line.trim() {
            "edition.workspace = true" => format!("edition = {}", field("edition")),
            "license.workspace = true" => format!("license = {}", field("license")),
            l if l.starts_with("k8s-openapi = { workspace = true") => {
                // Guests need one Kubernetes version feature; the host's extra features are not needed.
                format!("k8s-openapi = {{ version = {k8s}, features = [\"v1_36\"], optional = true }}")
            }
            _ => line.to_string(),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// guest-foo's package.json (or lock file) with the plugin's name: the same pinned toolchain.
fn renamed_package(text: &str, vars: &Vars, manifest: bool) -> String {
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(text) else {
        return text.to_string();
    };
    v["name"] = vars.name.clone().into();
    if let Some(root) = v.pointer_mut("/packages/").filter(|r| r.is_object()) {
        root["name"] = vars.name.clone().into();
    }
    if manifest {
        v["description"] = format!("kwop plugin {}", vars.name).into();
        v["scripts"] = serde_json::json!({ "build": "./build.sh", "test": "node --test test/" });
    }
    serde_json::to_string_pretty(&v).map(|s| s + "\n").unwrap_or_else(|_| text.to_string())
}

/// Every file of the Go SDK, under `wit/go/` (its build script beside the WIT, as in the repository).
fn go_sdk(dir: &Dir<'_>, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for entry in dir.entries() {
        match entry {
            DirEntry::Dir(d) => go_sdk(d, out),
            DirEntry::File(f) => out.push((PathBuf::from("wit/go").join(f.path()), f.contents().to_vec())),
        }
    }
}
