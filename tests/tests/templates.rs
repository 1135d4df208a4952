//! `kwop plugin new` (issue 21): for every language, a plugin scaffolded into a folder outside
//! the repository builds with its own build script, passes its native unit tests and its
//! fixtures (with the Foo CRD's schema check); the Python one also runs on the real control
//! plane: a Foo gets its ConfigMap `<name>-info` and a `Synced` event, a Foo without
//! `deploymentName` the plugin's own Warning.
//!
//! Toolchains come from the shared caches the guests use (`~/.cache/kwop/toolchains`,
//! `~/.cache/kwop/guests/c`); Rust scaffolds share one target folder next to the workspace's;
//! components are built once per distinct sources (`kwop_tests::scaffolds::build`).

mod common;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kwop_tests::scaffolds::{build, outside, run};
use kwop_tests::{wait, ControlPlane, Mode};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Every language there is a template for must be tested here.
const TESTED: &[&str] = &["c", "go", "js", "python", "rust"];

#[test]
fn every_template_language_is_tested() {
    let langs: Vec<String> = kwop::scaffold::languages().into_iter().map(|l| l.name).collect();
    assert_eq!(langs, TESTED, "a new template folder needs a test in tests/tests/templates.rs");
}

fn scaffold(name: &str, lang: &str) -> PathBuf {
    kwop_tests::scaffolds::scaffold(KWOP, name, lang)
}

async fn runs_on_the_cluster(plugin: &Path, name: &str) -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace(&format!("tpl-{name}"))?;
    let dir = kwop_tests::plugins::folder(&[(&format!("{name}.wasm"), &plugin.display().to_string())])?;
    let host = host(plane, &dir, &[&format!("--namespace={ns}")])?;
    let client = plane.client().await?;
    create_foo(&client, &ns, "example", "example-web", Some(3)).await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cm = wait::until("the ConfigMap example-info", Duration::from_secs(60), || async {
        match api.get_opt("example-info").await.map_err(|e| e.to_string())? {
            Some(cm) => Ok(Some(cm)),
            None => Err("not yet".to_string()),
        }
    })
    .await?;
    let data = cm.data.clone().unwrap_or_default();
    assert_eq!(data.get("deploymentName").map(String::as_str), Some("example-web"), "{data:?}");
    assert_eq!(data.get("replicas").map(String::as_str), Some("3"), "{data:?}");
    let owner = cm.metadata.owner_references.unwrap_or_default();
    assert!(owner.iter().any(|o| o.kind == "Foo" && o.controller == Some(true)), "controlled by the Foo: {owner:?}");
    event_with_reason(&client, &ns, "example", "Synced").await?;
    // A Foo without deploymentName: the plugin's own Warning, nothing written.
    create_foo(&client, &ns, "incomplete", "", None).await?;
    let e = event_with_reason(&client, &ns, "incomplete", "InvalidSpec").await?;
    assert_eq!(e.note.as_deref(), Some("spec.deploymentName is required"));
    assert!(api.get_opt("incomplete-info").await?.is_none());
    assert_eq!(host.metric("kwop_plugin_errors_total", &[])?, 0.0);
    Ok(())
}

/// Everything but the cluster for one language: new, native tests, build, inspect, fixtures
/// (checked against the Foo CRD). Returns the plugin folder and its component.
fn new_plugin_passes_its_tests(lang: &str) -> (PathBuf, PathBuf) {
    let name = format!("hello-{lang}");
    let dir = scaffold(&name, lang);
    let wit = if lang == "rust" { "wit/v0.3/reconciler.wit" } else { "wit/v0.2/reconciler.wit" };
    for f in ["README.md", "RUNNING.md", "foo.yaml", "crds/foo.yaml", wit, ".gitignore"] {
        assert!(dir.join(f).is_file(), "{lang}: {f} missing");
    }
    let tests = run(&dir, "./test.sh", &[]);
    assert!(!tests.is_empty(), "{lang}: ./test.sh printed nothing");
    let wasm = build(&dir);
    let info = run(&dir, KWOP, &["plugin", "inspect", "dist/plugin.wasm"]);
    assert!(info.contains(&format!("\"name\": \"{name}\"")), "{info}");
    let out = run(&dir, KWOP, &["plugin", "test", "dist/plugin.wasm", "fixtures", "--crd", "crds/foo.yaml"]);
    // The Go template (on 0.2) adds a finalize fixture and two validate fixtures.
    let passed = if lang == "go" { "6 passed, 0 failed" } else { "3 passed, 0 failed" };
    assert!(out.contains(passed), "{out}");
    // The example Foo offline, with the schema check, as the plugin's README shows.
    let out = run(
        &dir,
        KWOP,
        &["plugin", "reconcile", "dist/plugin.wasm", "--primary", "foo.yaml", "--crd", "crds/foo.yaml"],
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{lang}: {e}: {out}"));
    assert_eq!(v["apply"][0]["metadata"]["name"], "example-info", "{out}");
    (dir, wasm)
}

#[test]
fn a_new_rust_plugin_builds_and_passes_its_tests() {
    new_plugin_passes_its_tests("rust");
}

#[test]
fn a_new_go_plugin_builds_and_passes_its_tests() {
    let (dir, _) = new_plugin_passes_its_tests("go");
    // The SDK is vendored whole, with the build script beside the WIT, and go.mod points at it.
    for f in ["wit/go/go.mod", "wit/go/build.sh", "wit/go/tools.sh", "main_test.go"] {
        assert!(dir.join(f).is_file(), "go: {f} missing");
    }
    let gomod = std::fs::read_to_string(dir.join("go.mod")).expect("go.mod");
    assert!(gomod.contains("replace kwop.dev/guest => ./wit/go"), "{gomod}");
    // Its native tests cover the three exports.
    let tests = run(&dir, "./test.sh", &["-v"]);
    for t in [
        "TestWritesTheConfigMap",
        "TestFinalizeDeletesTheConfigMapAndIsDone",
        "TestValidateRefusesAFooWithoutDeploymentName",
    ] {
        assert!(tests.contains(&format!("--- PASS: {t}")), "{t}: {tests}");
    }
    let info = run(&dir, KWOP, &["plugin", "inspect", "dist/plugin.wasm"]);
    assert!(info.contains("\"finalizes\": true") && info.contains("\"validates\": true"), "{info}");
}

/// The JS template is on 0.2: its native tests cover reconcile, finalize and validate, and its
/// admission and finalize fixtures pass against the built component.
#[test]
fn a_new_javascript_plugin_builds_and_passes_its_tests() {
    let (dir, _) = new_plugin_passes_its_tests("js");
    let tests = run(&dir, "./test.sh", &[]);
    for t in
        ["finalize deletes its ConfigMap", "validate refuses a Foo without deploymentName", "a Foo gets a ConfigMap"]
    {
        assert!(tests.contains(t), "js: the native test {t:?}:\n{tests}");
    }
    let info = run(&dir, KWOP, &["plugin", "inspect", "dist/plugin.wasm"]);
    let v: serde_json::Value = serde_json::from_str(&info).unwrap_or_else(|e| panic!("{e}: {info}"));
    assert_eq!(v["world"], "kwop:reconciler@0.2.0", "{info}");
    assert_eq!((v["finalizes"].as_bool(), v["validates"].as_bool()), (Some(true), Some(true)), "{info}");
    let out = run(&dir, KWOP, &["plugin", "test", "dist/plugin.wasm", "admission-fixtures", "--crd", "crds/foo.yaml"]);
    assert!(out.contains("2 passed, 0 failed"), "{out}");
    let out = run(&dir, KWOP, &["plugin", "test", "dist/plugin.wasm", "finalize-fixtures", "--crd", "crds/foo.yaml"]);
    assert!(out.contains("1 passed, 0 failed"), "{out}");
    // Every language is listed in the README.
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("README.md");
    for l in ["Rust", "JavaScript", "Python", "C", "Go"] {
        assert!(readme.contains(l), "js README lists {l}");
    }
}

/// The C one (the quickest to build) also shows a failing fixture's field diff and `--update`;
/// it is on 0.2 with a finalize and a validate, natively tested (a broken finalize fails
/// ./test.sh) and with admission fixtures.
#[test]
fn a_new_c_plugin_builds_and_passes_its_tests_and_its_fixtures_diff_and_update() {
    let (dir, _) = new_plugin_passes_its_tests("c");
    let info = run(&dir, KWOP, &["plugin", "inspect", "dist/plugin.wasm"]);
    assert!(info.contains("\"finalizes\": true") && info.contains("\"validates\": true"), "{info}");
    let out = run(&dir, KWOP, &["plugin", "test", "dist/plugin.wasm", "fixtures-validate", "--crd", "crds/foo.yaml"]);
    assert!(out.contains("2 passed, 0 failed"), "{out}");
    let plugin = dir.join("src/plugin.c");
    let good_src = std::fs::read_to_string(&plugin).expect("plugin.c");
    for (from, to) in
        [("    out->done = true;", "    out->done = false;"), ("kwop_refuse(out,", "if (0) kwop_refuse(out,")]
    {
        assert!(good_src.contains(from), "{from}");
        std::fs::write(&plugin, good_src.replace(from, to)).expect("write");
        let broken = Command::new("./test.sh").current_dir(&dir).output().expect("test.sh runs");
        assert!(!broken.status.success(), "./test.sh passes with {to:?}");
    }
    std::fs::write(&plugin, &good_src).expect("write");
    let expected = dir.join("fixtures/creates-the-configmap/expected.json");
    let good = std::fs::read_to_string(&expected).expect("expected.json");
    assert!(good.contains("\"replicas\": \"2\""), "{good}");
    std::fs::write(&expected, good.replace("\"replicas\": \"2\"", "\"replicas\": \"9\"")).expect("write");
    let out = Command::new(KWOP)
        .args(["plugin", "test", "dist/plugin.wasm", "fixtures", "--crd", "crds/foo.yaml"])
        .current_dir(&dir)
        .output()
        .expect("kwop runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains(".apply[0].data.replicas: expected \"9\", got \"2\"") && text.contains("2 passed, 1 failed"),
        "{text}"
    );
    assert!(text.contains("--update"), "says how to accept the new outcome: {text}");
    let out = run(&dir, KWOP, &["plugin", "test", "--update", "dist/plugin.wasm", "fixtures"]);
    assert!(out.contains("1 written (review them before committing), 2 passed, 0 failed"), "{out}");
    let rewritten: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&expected).expect("rewritten")).expect("json");
    assert_eq!(rewritten, serde_json::from_str::<serde_json::Value>(&good).expect("json"));
    let out = run(&dir, KWOP, &["plugin", "test", "dist/plugin.wasm", "fixtures"]);
    assert!(out.contains("3 passed, 0 failed"), "{out}");
}

/// The marker above the README's five-minute block (tests/tests/docs.rs checks every such marker
/// names an existing test that reads its guide).
const FIRST_PLUGIN: &str =
    "<!-- run-by: tests/tests/templates.rs::a_new_python_plugin_from_the_readme_guide_passes_its_tests_and_runs_on_the_cluster";

/// The README's "Your first plugin in five minutes", run line by line as a user would type it
/// (with `kwop` and `kubectl` on the PATH and KUBECONFIG set, as its first block arranges), in a
/// folder outside the repository: a new Python plugin (the issue's own story) from nothing to a
/// ConfigMap on the cluster. Returns the plugin folder.
fn the_readme_guide_works(plane: &ControlPlane) -> PathBuf {
    let readme = std::fs::read_to_string(kwop_tests::repo_root().join("README.md")).expect("README.md");
    let at = readme.find(FIRST_PLUGIN).expect("README.md has the block this test runs, marked run-by it");
    let block = &readme[at + FIRST_PLUGIN.len()..];
    let block = block.strip_prefix(" -->\n```sh\n").expect("the marker is directly above a sh block");
    let lines = &block[..block.find("```").expect("the block ends")];
    assert!(lines.contains("kwop plugin new") && lines.contains("kubectl apply"), "{lines}");
    let cwd = outside("guide");
    let bin = cwd.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    std::os::unix::fs::symlink(KWOP, bin.join("kwop")).expect("kwop on the PATH");
    let path = format!("{}:{}:{}", bin.display(), plane.bin.display(), std::env::var("PATH").unwrap_or_default());
    let port = kwop_tests::procs::free_port().expect("a free port").to_string();
    let script = format!("set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n{lines}");
    let out = Command::new("bash")
        .args(["-c", &script])
        .current_dir(&cwd)
        .env("PATH", path)
        .env("KUBECONFIG", &plane.kubeconfig)
        .env("KWOP_METRICS_BIND_ADDRESS", format!("127.0.0.1:{port}"))
        .env("KWOP_HEALTH_PROBE_BIND_ADDRESS", format!("127.0.0.1:{port}"))
        .output()
        .expect("bash runs");
    let dir = cwd.join("my-plugin");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let log = std::fs::read_to_string(dir.join("kwop.log")).unwrap_or_default();
    assert!(out.status.success(), "the README guide failed:\n{text}\nkwop.log:\n{log}");
    // The common three reconciles, a finalize and an admission (the Python template is on 0.2).
    assert!(text.contains("5 passed, 0 failed"), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let data = stdout.lines().last().unwrap_or_default();
    let data: serde_json::Value =
        serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: the last line is the ConfigMap's data: {text}"));
    assert_eq!(
        data,
        serde_json::json!({ "foo": "example", "deploymentName": "example-web", "replicas": "2" }),
        "{text}"
    );
    dir
}

/// Python, the language of the issue's story, all the way to the cluster: the README guide, then
/// what a plugin's own README adds (inspect, the example offline, typed stubs), then the plugin's
/// events on the cluster (the one language run on the control plane here; the others' components
/// run there in plugin_errors.rs and guests.rs, and offline and cluster agree, as
/// plugin_errors.rs checks).
#[tokio::test(flavor = "multi_thread")]
async fn a_new_python_plugin_from_the_readme_guide_passes_its_tests_and_runs_on_the_cluster() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let dir = the_readme_guide_works(plane);
    let info = run(&dir, KWOP, &["plugin", "inspect", "dist/plugin.wasm"]);
    assert!(info.contains("\"name\": \"my-plugin\""), "{info}");
    let out = run(
        &dir,
        KWOP,
        &["plugin", "reconcile", "dist/plugin.wasm", "--primary", "foo.yaml", "--crd", "crds/foo.yaml"],
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["apply"][0]["metadata"]["name"], "example-info", "{out}");
    run(&dir, "./build.sh", &["bindings"]);
    assert!(dir.join("bindings/wit_world/__init__.py").is_file(), "./build.sh bindings wrote no wit_world package");
    python_template_finalizes_and_validates(&dir);
    runs_on_the_cluster(&dir.join("dist/plugin.wasm"), "my-plugin").await
}

/// The Python template on 0.2: its native tests cover reconcile, finalize and validate, its
/// fixtures a finalize and an admission, and a broken finalize or validate fails `./test.sh`.
fn python_template_finalizes_and_validates(dir: &Path) {
    assert!(dir.join("wit/v0.2/reconciler.wit").is_file(), "the 0.2 WIT");
    let info = run(dir, KWOP, &["plugin", "inspect", "dist/plugin.wasm"]);
    let v: serde_json::Value = serde_json::from_str(&info).unwrap_or_else(|e| panic!("{e}: {info}"));
    assert!(v["world"] == "kwop:reconciler@0.2.0" && v["finalizes"] == true && v["validates"] == true, "{v}");
    let tests = run(dir, "./test.sh", &["-v"]);
    for t in ["ReconcileTest", "FinalizeTest", "ValidateTest"] {
        assert!(tests.contains(t), "./test.sh runs {t}: {tests}");
    }
    let out = run(dir, KWOP, &["plugin", "test", "dist/plugin.wasm", "fixtures", "--crd", "crds/foo.yaml"]);
    for f in ["finalize-deletes-the-configmap", "validate-refuses-a-foo-without-deployment-name"] {
        assert!(out.contains(&format!("ok   fixtures/{f}")), "{out}");
    }
    let p = dir.join("src/plugin.py");
    let good = std::fs::read_to_string(&p).expect("plugin.py");
    for (from, to) in
        [("ConfigMap %s deleted", "ConfigMap %s removed"), ("field=\"spec.deploymentName\")", "field=\"spec.name\")")]
    {
        assert!(good.contains(from), "{from}");
        std::fs::write(&p, good.replace(from, to)).expect("write");
        let out = Command::new("./test.sh").current_dir(dir).output().expect("runs");
        assert!(!out.status.success(), "a broken plugin ({to}) passed its unit tests");
    }
    std::fs::write(&p, good).expect("restore");
}

#[test]
fn a_native_test_that_breaks_fails_the_test_script() {
    // The native test harness must be able to fail: break the logic, expect ./test.sh to fail.
    let dir = scaffold("broken-js", "js");
    let p = dir.join("src/plugin.js");
    let text = std::fs::read_to_string(&p).expect("plugin.js");
    std::fs::write(&p, text.replace("`${foo.metadata.name}-info`", "`${foo.metadata.name}-other`")).expect("write");
    let out = Command::new("./test.sh").current_dir(&dir).output().expect("runs");
    assert!(!out.status.success(), "a broken plugin passed its unit tests");
}

#[test]
fn plugin_new_refuses_a_bad_name_and_an_unknown_language() {
    let dir = outside("refusals");
    let out = Command::new(KWOP)
        .args(["plugin", "new", "Bad_Name", "--lang", "js"])
        .current_dir(&dir)
        .output()
        .expect("runs");
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("DNS label"));
    let out =
        Command::new(KWOP).args(["plugin", "new", "ok", "--lang", "cobol"]).current_dir(&dir).output().expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("available: c, go, js, python, rust"), "{err}");
    assert!(std::fs::read_dir(&dir).expect("dir").next().is_none(), "nothing written");
}
