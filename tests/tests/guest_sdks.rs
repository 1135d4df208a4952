//! The guest SDKs' own unit tests (issue 15), run natively from the suite: the Go SDK
//! (`wit/go`, `go vet` + `go test`) and guest-foo's Go logic (`guest-foo/go`), the JavaScript
//! helper (`wit/js`, node's test runner, its TypeScript declarations checked with tsc, the types
//! generated from the WIT up to date) and the Python helper (`wit/python`, unittest), plus the
//! JS and Python ports' own unit tests. Needs go, node and python3 on PATH (scripts/test installs
//! the guests' toolchains first); a missing tool fails the test and says so.

use std::path::Path;
use std::process::Command;

fn run(dir: &str, program: &str, args: &[&str]) {
    run_env(dir, &[], program, args)
}

fn run_env(dir: &str, env: &[(&str, &str)], program: &str, args: &[&str]) {
    let cwd = kwop_tests::repo_root().join(dir);
    let out = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(&cwd)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} (is it installed and on PATH?): {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{program} {} in {dir} failed:\n{text}", args.join(" "));
}

#[test]
fn the_go_sdk_passes_go_vet_and_go_test() {
    // The generated bindings use unsafe.Pointer the way the canonical ABI needs; vet the SDK's own code.
    run("wit/go", "go", &["vet", "."]);
    run_env("wit/go", &[("GOOS", "wasip1"), ("GOARCH", "wasm")], "go", &["vet", "."]);
    run("wit/go", "go", &["test", "-count=1", "./..."]);
}

#[test]
fn guest_foo_go_logic_passes_go_test() {
    run("guest-foo/go", "go", &["vet", "."]);
    run_env("guest-foo/go", &[("GOOS", "wasip1"), ("GOARCH", "wasm")], "go", &["vet", "."]);
    run("guest-foo/go", "go", &["test", "-count=1", "."]);
}

#[test]
fn the_javascript_helper_passes_its_tests_and_its_types_match_the_wit() {
    let tsc = kwop_tests::repo_root().join("guest-foo/js/node_modules/.bin/tsc");
    assert!(Path::new(&tsc).exists(), "guest-foo/js/node_modules is missing: run scripts/build-guests js");
    run("wit/js", "node", &["--test", "test/"]);
    run("wit/js", "node", &["gen-types.mjs", "--check"]);
}

#[test]
fn the_python_helper_passes_its_tests() {
    run("wit/python", "python3", &["-m", "unittest", "discover", "-s", "."]);
}

#[test]
fn the_javascript_and_python_ports_pass_their_unit_tests() {
    run("guest-foo/js", "node", &["--test", "test/"]);
    run("guest-foo/python", "python3", &["-m", "unittest", "discover", "-s", "tests"]);
}
