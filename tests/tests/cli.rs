//! The offline command line (`kwop plugin ...`) as users call it, and the Foo conformance fixtures.

use kwop_tests::plugins;
use std::process::Command;

const KWOP: &str = env!("CARGO_BIN_EXE_kwop-host");

fn kwop(args: &[&str]) -> (i32, String, String) {
    let cache = std::env::temp_dir().join(format!("kwop-cli-cache-{}", std::process::id()));
    let out = Command::new(KWOP).args(args).env("KWOP_CACHE_DIR", cache).output().expect("kwop runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn fixtures() -> String {
    kwop_tests::repo_root().join("tests/fixtures/foo").display().to_string()
}

/// What guest-foo reports beyond sample-controller's status (checked by tests/fixtures/foo-conditions).
const BEYOND_SAMPLE_CONTROLLER: [&str; 4] =
    ["--ignore", ".status.conditions", "--ignore", ".status.observedGeneration"];

#[test]
fn guest_foo_passes_every_conformance_fixture() {
    let mut args = vec!["plugin", "test", plugins::GUEST_FOO];
    args.extend(BEYOND_SAMPLE_CONTROLLER);
    let f = fixtures();
    args.push(&f);
    let (code, out, err) = kwop(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("13 passed, 0 failed"), "{out}");
    // The ignored fields are really there, and really compared without --ignore.
    let (code, out, _) = kwop(&["plugin", "test", plugins::GUEST_FOO, &f]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(".status.conditions: not expected") && out.contains("01-creates-deployment"), "{out}");
}

#[test]
fn guest_foo_reports_ready_and_progressing_with_stable_transition_times() {
    let conditions = kwop_tests::repo_root().join("tests/fixtures/foo-conditions").display().to_string();
    let crd = kwop_tests::repo_root().join("crds/foo.yaml").display().to_string();
    let (code, out, err) = kwop(&["plugin", "test", plugins::GUEST_FOO, &conditions, "--crd", &crd]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("3 passed, 0 failed"), "{out}");
}

/// Issue 40: `--update` of a clock-dependent fixture (a condition's transition time) pins the
/// instant it used, so the updated fixture passes on the next run without a hand-written call.json.
#[test]
fn an_updated_fixture_pins_its_instant_and_passes_on_the_next_run() {
    let root = kwop_tests::repo_root();
    let dir = std::env::temp_dir().join("kwop-test").join(format!("{}-update", std::process::id()));
    let case = dir.join("created");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&case).expect("mkdir");
    let src = root.join("tests/fixtures/foo-conditions/01-created-not-ready/primary.yaml");
    std::fs::copy(src, case.join("primary.yaml")).expect("copy");
    let crd = root.join("crds/foo.yaml").display().to_string();
    let d = dir.display().to_string();
    let (code, out, err) = kwop(&["plugin", "test", "--update", plugins::GUEST_FOO, &d, "--crd", &crd]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 written") && out.contains("instant in call.json"), "{out}");
    assert!(case.join("call.json").is_file() && case.join("expected.json").is_file());
    let expected = std::fs::read_to_string(case.join("expected.json")).expect("read");
    assert!(expected.contains("lastTransitionTime"), "a clock-dependent outcome: {expected}");
    // Later, at another wall-clock second: the same outcome.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (code, out, err) = kwop(&["plugin", "test", plugins::GUEST_FOO, &d, "--crd", &crd]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 passed, 0 failed"), "{out}");
    // An empty folder says what a fixture is, validation fixtures included.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let (code, _, err) = kwop(&["plugin", "test", plugins::GUEST_FOO, &empty.display().to_string()]);
    assert_ne!(code, 0);
    assert!(err.contains("object.yaml") && err.contains("primary.yaml"), "{err}");
}

#[test]
fn guest_foo_validates_at_the_door_offline() {
    let root = kwop_tests::repo_root();
    let fixtures = root.join("tests/fixtures/foo-validate").display().to_string();
    let crd = root.join("crds/foo.yaml").display().to_string();
    let (code, out, err) = kwop(&["plugin", "test", plugins::GUEST_FOO, &fixtures, "--crd", &crd]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("6 passed, 0 failed"), "{out}");
    // `kwop plugin validate` exits 1 on a refusal and prints what kubectl would.
    let bad = root.join("tests/fixtures/foo-validate/02-an-invalid-name-is-refused/object.yaml");
    let (code, out, _) = kwop(&["plugin", "validate", plugins::GUEST_FOO, "--object", &bad.display().to_string()]);
    assert_eq!(code, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["allowed"], false);
    assert!(v["message"].as_str().is_some_and(|m| m.starts_with("spec.deploymentName: \"Web_App\"")), "{v}");
    let good = root.join("tests/fixtures/foo-validate/01-a-valid-foo-is-allowed/object.yaml");
    let (code, out, _) = kwop(&["plugin", "validate", plugins::GUEST_FOO, "--object", &good.display().to_string()]);
    assert_eq!(code, 0, "{out}");
    // A plugin that does not validate is never asked; a 0.1 plugin cannot.
    let (code, out, _) =
        kwop(&["plugin", "validate", &plugins::guest_foo_v01(), "--object", &bad.display().to_string()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("does not validate"), "{out}");
}

#[test]
fn config_sync_passes_its_fixtures_finalize_included() {
    let root = kwop_tests::repo_root();
    let fixtures = root.join("examples/config-sync/fixtures").display().to_string();
    let crd = root.join("crds/configsync.yaml").display().to_string();
    let (code, out, err) = kwop(&["plugin", "test", plugins::CONFIG_SYNC, &fixtures, "--crd", &crd]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("6 passed, 0 failed"), "{out}");
    // The deletion case goes through finalize: done, with a deletion per copy.
    let case = root.join("examples/config-sync/fixtures/06-finalize-deletes-every-copy");
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(case.join("expected.json")).expect("read")).expect("json");
    assert_eq!(expected["done"], true, "{expected}");
    assert!(expected["delete"].as_array().is_some_and(|d| !d.is_empty()), "{expected}");
}

#[test]
fn guest_foo_built_for_wit_0_1_still_passes_the_fixtures_unchanged() {
    let old = plugins::guest_foo_v01();
    let (code, out, err) = kwop(&["plugin", "test", &old, &fixtures()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("13 passed, 0 failed"), "{out}");
}

#[test]
fn guest_foo_built_for_wit_0_2_still_passes_the_fixtures_and_validates_unchanged() {
    let old = plugins::wit_0_2("guest-foo");
    let f = fixtures();
    let mut args = vec!["plugin", "test", old.as_str()];
    args.extend(BEYOND_SAMPLE_CONTROLLER);
    args.push(&f);
    let (code, out, err) = kwop(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("13 passed, 0 failed"), "{out}");
    let root = kwop_tests::repo_root();
    let validate = root.join("tests/fixtures/foo-validate").display().to_string();
    let crd = root.join("crds/foo.yaml").display().to_string();
    let (code, out, err) = kwop(&["plugin", "test", &old, &validate, "--crd", &crd]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("6 passed, 0 failed"), "{out}");
}

#[test]
fn inspect_shows_the_world_and_what_a_plugin_finalizes() {
    let old = plugins::guest_foo_v01();
    let (foo02, fin02) = (plugins::wit_0_2("guest-foo"), plugins::wit_0_2("finalizer"));
    for (file, world, finalizes) in [
        (plugins::GUEST_FOO, "kwop:reconciler@0.3.0", false),
        (plugins::GUEST_FOO_V2, "kwop:reconciler@0.3.0", false),
        (foo02.as_str(), "kwop:reconciler@0.2.0", false),
        (old.as_str(), "kwop:reconciler@0.1.0", false),
        (plugins::FINALIZER, "kwop:reconciler@0.3.0", true),
        (fin02.as_str(), "kwop:reconciler@0.2.0", true),
        (plugins::CHAOS, "kwop:reconciler@0.1.0", false),
    ] {
        let (code, out, err) = kwop(&["plugin", "inspect", file]);
        assert_eq!(code, 0, "{file}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!((v["world"].as_str(), v["finalizes"].as_bool()), (Some(world), Some(finalizes)), "{file}: {v}");
    }
    let (_, out, _) = kwop(&["plugin", "inspect", plugins::FINALIZER]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["ownsAcrossNamespaces"][0]["kind"], "ConfigMap", "{v}");
}

#[test]
fn the_fixture_runner_catches_a_plugin_that_differs() {
    // v2 adds an annotation to the Deployment: every fixture that applies must fail, on it.
    let f = fixtures();
    let mut args = vec!["plugin", "test", plugins::GUEST_FOO_V2];
    args.extend(BEYOND_SAMPLE_CONTROLLER);
    args.push(&f);
    let (code, out, _) = kwop(&args);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAIL") && out.contains("01-creates-deployment"), "{out}");
    assert!(out.contains(".metadata.annotations"), "{out}");
}

#[test]
fn inspect_prints_the_plugin_info() {
    let (code, out, err) = kwop(&["plugin", "inspect", plugins::GUEST_FOO]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["name"], "guest-foo");
    assert_eq!(v["primary"]["kind"], "Foo");
    assert_eq!(v["owns"][0]["kind"], "Deployment");
    assert_eq!(v["sha256"].as_str().map(str::len), Some(64));
}

#[test]
fn inspect_refuses_what_is_not_a_plugin_with_one_line() {
    let dir = std::env::temp_dir().join(format!("kwop-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let truncated = dir.join("truncated.wasm");
    let bytes = std::fs::read(plugins::GUEST_FOO).expect("guest-foo");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).expect("write");
    let text = dir.join("text.wasm");
    std::fs::write(&text, "hello").expect("write");
    for (file, needle) in [
        (truncated.display().to_string(), "not a valid WebAssembly component"),
        (text.display().to_string(), "magic number"),
        (plugins::WRONG_WORLD.to_string(), "does not implement the kwop:reconciler"),
        ("/nonexistent.wasm".to_string(), "cannot read"),
    ] {
        let (code, out, err) = kwop(&["plugin", "inspect", &file]);
        assert_eq!(code, 1, "{file}: {out}{err}");
        assert!(out.is_empty(), "{file}: nothing on stdout");
        assert_eq!(err.trim().lines().count(), 1, "{file}: one line: {err}");
        assert!(err.contains(needle), "{file}: {err}");
    }
}

#[test]
fn reconcile_reads_yaml_and_json_and_reports_failures_as_json() {
    let dir = std::env::temp_dir().join(format!("kwop-cli-rec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let foo = dir.join("foo.json");
    std::fs::write(&foo, r#"{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"a","namespace":"n","uid":"u"},"spec":{"deploymentName":"a","replicas":2}}"#).expect("write");
    let (code, out, err) = kwop(&["plugin", "reconcile", plugins::GUEST_FOO, "--primary", &foo.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["apply"][0]["spec"]["replicas"], 2);
    assert_eq!(v["events"][0]["type"], "Normal");
    assert!(v["requeueAfterMs"].is_null());

    // A List of observed objects in YAML, including one that collides.
    let observed = dir.join("observed.yaml");
    std::fs::write(&observed, "apiVersion: v1\nkind: List\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: a, namespace: n}\n").expect("write");
    let (code, out, _) = kwop(&[
        "plugin",
        "reconcile",
        plugins::GUEST_FOO,
        "--primary",
        &foo.display().to_string(),
        "--observed",
        &observed.display().to_string(),
    ]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["error"]["retry"], true);
    assert_eq!(v["error"]["events"][0]["reason"], "ErrResourceExists");
}

#[test]
fn reconcile_applies_the_write_fence_offline() {
    let dir = std::env::temp_dir().join(format!("kwop-cli-fence-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let chaos = dir.join("chaos.yaml");
    std::fs::write(&chaos, "apiVersion: test.kwop.dev/v1\nkind: Chaos\nmetadata: {name: c, namespace: n, uid: u}\nspec: {mode: undeclared}\n").expect("write");
    let (code, out, _) = kwop(&["plugin", "reconcile", plugins::CHAOS, "--primary", &chaos.display().to_string()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("not declared in owns"), "{out}");
    let (code, out, _) =
        kwop(&["plugin", "reconcile", plugins::CHAOS, "--primary", &chaos.display().to_string(), "--no-fence"]);
    assert_eq!(code, 0, "{out}");
    std::fs::write(
        &chaos,
        "apiVersion: test.kwop.dev/v1\nkind: Chaos\nmetadata: {name: c, namespace: n, uid: u}\nspec: {mode: loop}\n",
    )
    .expect("write");
    let (code, out, _) = kwop(&[
        "plugin",
        "reconcile",
        plugins::CHAOS,
        "--primary",
        &chaos.display().to_string(),
        "--plugin-timeout",
        "200ms",
    ]);
    assert_eq!(code, 1);
    assert!(out.contains("deadline"), "{out}");
}

fn chaos_reconcile(name: &str, mode: &str, resource_version: &str) -> (i32, String, String) {
    let dir = std::env::temp_dir().join(format!("kwop-cli-wasi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let file = dir.join(format!("{name}.yaml"));
    let yaml = format!("apiVersion: test.kwop.dev/v1\nkind: Chaos\nmetadata: {{name: c, namespace: n, uid: u, resourceVersion: \"{resource_version}\"}}\nspec: {{mode: {mode}}}\n");
    std::fs::write(&file, yaml).expect("write");
    kwop(&["plugin", "reconcile", plugins::CHAOS, "--primary", &file.display().to_string()])
}

#[test]
fn a_sleeping_reconcile_returns_at_once_with_a_clear_error() {
    for mode in ["sleep", "poll-sleep"] {
        let started = std::time::Instant::now();
        let (code, out, err) = chaos_reconcile(mode, mode, "1");
        assert_eq!(code, 1, "{out}{err}");
        assert!(out.contains("plugins cannot sleep"), "{out}{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "{mode} took {:?}", started.elapsed());
    }
}

#[test]
fn random_bytes_are_a_function_of_plugin_and_object_version() {
    let (code, a, err) = chaos_reconcile("r1", "random", "41");
    assert_eq!(code, 0, "{a}{err}");
    let (_, b, _) = chaos_reconcile("r2", "random", "41");
    let (_, c, _) = chaos_reconcile("r3", "random", "42");
    assert!(a.contains("\"bytes\""), "{a}");
    assert_eq!(a, b, "the same object version gets the same bytes");
    assert_ne!(a, c, "another version gets others");
}
