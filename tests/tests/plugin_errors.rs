//! Errors in the plugin's language (issues 21 and 22): a Python plugin that returns a dict where
//! the WIT wants JSON text, a JavaScript plugin that throws `Error("boom")` and a Rust plugin that
//! panics show their own message in `kwop plugin reconcile` and in the Warning event on the
//! primary; `--crd` refuses a status shaped `{"status": {...}}` with the field path; and the
//! offline CLI resolves namespaces as the host does (primary and observed objects without a
//! namespace, `cache.get` with none), checked against the same plugin on the cluster.
//!
//! The JS and Python plugins are `kwop plugin new` scaffolds with a deliberate mistake patched in.

mod common;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kwop_tests::scaffolds::{build, patch, scaffold};
use kwop_tests::{wait, ControlPlane, Mode};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// The JS template, patched: a Foo named `throws` makes plugin.js throw `Error("boom")`; one
/// named `wrapped-status` returns its status as `{"status": {...}}`; every Foo looks up a
/// ConfigMap `peer` with no namespace (`cache.get` with none) and `peer2` in the Foo's namespace,
/// and copies what it found; each reconcile says so with console.log.
fn js_plugin() -> &'static PathBuf {
    static WASM: OnceLock<PathBuf> = OnceLock::new();
    WASM.get_or_init(|| {
        let dir = scaffold(KWOP, "mistakes-js", "js");
        patch(
            &dir,
            "src/plugin.js",
            "  const existing = ctx.get(CONFIGMAP, undefined, name);",
            "  console.log(`reconciling ${foo.metadata.name}`);\n  if (foo.metadata.name === 'throws') throw new Error('boom');\n  const existing = ctx.get(CONFIGMAP, undefined, name);\n  const peer = ctx.get(CONFIGMAP, undefined, 'peer');\n  const peer2 = ctx.get(CONFIGMAP, foo.metadata.namespace, 'peer2');",
        );
        patch(
            &dir,
            "src/plugin.js",
            "    .event(normal('Synced'",
            "    .status(foo.metadata.name === 'wrapped-status' ? { status: { availableReplicas: 1 } } : undefined)\n    .event(normal('Synced'",
        );
        patch(
            &dir,
            "src/plugin.js",
            "replicas: String(spec.replicas ?? 1),",
            "replicas: String(spec.replicas ?? 1),\n        peer: peer ? peer.data.value : 'none',\n        peer2: peer2 ? peer2.data.value : 'none',",
        );
        build(&dir)
    })
}

/// A Python plugin without the helper module, whose own WIT plumbing (the template's 0.2 WIT)
/// passes the status as a dict where the WIT wants JSON text (the issue's mistake 5).
fn python_plugin() -> &'static PathBuf {
    static WASM: OnceLock<PathBuf> = OnceLock::new();
    WASM.get_or_init(|| {
        let dir = scaffold(KWOP, "mistakes-py", "python");
        std::fs::write(dir.join("src/app.py"), RAW_PYTHON_APP).expect("app.py");
        build(&dir)
    })
}

const RAW_PYTHON_APP: &str = r#"import wit_world
from wit_world.imports import types


def _gvk(group, version, kind):
    return types.Gvk(group=group, version=version, kind=kind)


class WitWorld(wit_world.WitWorld):
    def info(self):
        return types.PluginInfo(name="mistakes-py", version="0.1.0",
                                primary=_gvk("samplecontroller.k8s.io", "v1alpha1", "Foo"),
                                owns=[types.OwnedKind(kind=_gvk("", "v1", "ConfigMap"), across_namespaces=False)],
                                reads=[], finalizes=False, validates=False)

    def reconcile(self, req):
        return types.Outcome(apply=[], delete=[], status={"availableReplicas": 1}, events=[],
                             requeue_after_ms=None)

    def finalize(self, req):
        return types.FinalizeOutcome(delete=[], status=None, events=[], done=True, requeue_after_ms=None)

    def validate(self, req):
        return []
"#;

fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_yaml::to_string(v).expect("yaml")).expect("write");
    p
}

fn foo_doc(name: &str, ns: Option<&str>) -> Value {
    let mut meta = json!({ "name": name, "uid": "u-1" });
    if let Some(ns) = ns {
        meta["namespace"] = json!(ns);
    }
    json!({ "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": meta, "spec": { "deploymentName": "web" } })
}

/// `kwop plugin reconcile`: (success, parsed stdout).
fn reconcile(wasm: &Path, args: &[&str]) -> (bool, Value, String) {
    let mut a = vec!["plugin".to_string(), "reconcile".into(), wasm.display().to_string()];
    a.extend(args.iter().map(|s| s.to_string()));
    let out = Command::new(KWOP).args(&a).output().expect("kwop runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let v = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (out.status.success(), v, String::from_utf8_lossy(&out.stderr).to_string())
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join("kwop-test").join(format!("{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).expect("dir");
    d
}

#[test]
fn a_thrown_javascript_error_shows_its_message_and_stack_offline() {
    let d = tmp("js-throws");
    let (ok, out, err) =
        reconcile(js_plugin(), &["--primary", &write(&d, "p.yaml", &foo_doc("throws", None)).display().to_string()]);
    assert!(!ok, "{out}");
    let m = out["error"]["message"].as_str().unwrap_or_default();
    assert!(m.starts_with("Error: boom\n") && m.contains("plugin.js"), "message and stack: {m}");
    assert!(err.contains("reconciling throws"), "console.log reaches the log: {err}");
}

#[test]
fn a_python_dict_for_json_text_names_the_mistake_offline() {
    let d = tmp("py-dict");
    let (ok, out, _) =
        reconcile(python_plugin(), &["--primary", &write(&d, "p.yaml", &foo_doc("x", None)).display().to_string()]);
    assert!(!ok);
    let m = out["error"]["message"].as_str().unwrap_or_default();
    assert!(m.contains("TypeError: 'dict' object is not an instance of 'str'"), "{m}");
    assert!(m.contains("json.dumps"), "the hint: {m}");
    assert!(!m.contains("wit_dylib") && !m.contains("0x"), "no wasm backtrace: {m}");
}

#[test]
fn a_rust_panic_shows_its_message_offline() {
    let d = tmp("rust-panic");
    let chaos = json!({ "apiVersion": "test.kwop.dev/v1", "kind": "Chaos", "metadata": { "name": "boom", "namespace": "default" }, "spec": { "mode": "panic" } });
    let (ok, out, _) = reconcile(
        Path::new(kwop_tests::plugins::CHAOS),
        &["--primary", &write(&d, "p.yaml", &chaos).display().to_string()],
    );
    assert!(!ok);
    let m = out["error"]["message"].as_str().unwrap_or_default();
    assert!(m.starts_with("plugin trapped: chaos plugin panics on purpose (panicked at"), "{m}");
}

#[test]
fn crd_check_refuses_a_status_wrapped_in_status_with_its_path() {
    let d = tmp("wrapped");
    let primary = write(&d, "p.yaml", &foo_doc("wrapped-status", Some("default")));
    let crd = kwop_tests::repo_root().join("crds/foo.yaml");
    let (ok, out, _) = reconcile(js_plugin(), &["--primary", &primary.display().to_string()]);
    assert!(ok, "without --crd nothing knows the schema: {out}");
    let (ok, out, _) =
        reconcile(js_plugin(), &["--primary", &primary.display().to_string(), "--crd", &crd.display().to_string()]);
    assert!(!ok, "{out}");
    let m = out["error"]["message"].as_str().unwrap_or_default();
    assert!(m.contains(".status.status: field not declared in schema"), "{m}");
}

#[test]
fn a_number_in_configmap_data_is_refused_offline() {
    let d = tmp("cm-number");
    let chaos = json!({ "apiVersion": "test.kwop.dev/v1", "kind": "Chaos", "metadata": { "name": "n", "namespace": "default" }, "spec": { "mode": "number-data" } });
    let (ok, out, _) = reconcile(
        Path::new(kwop_tests::plugins::CHAOS),
        &["--primary", &write(&d, "p.yaml", &chaos).display().to_string()],
    );
    assert!(!ok, "{out}");
    let m = out["error"]["message"].as_str().unwrap_or_default();
    assert!(m.contains("ConfigMap \"n\": .data.replicas: invalid type: integer `1`, expected a string"), "{m}");
}

/// Issue 40: offline checks stopped at structure, so a value the API server refuses (a name, an
/// Ingress host) passed offline and left a half-written set on the cluster. Now it is refused
/// offline, naming the field, as the API server would.
#[test]
fn a_value_the_api_server_refuses_is_refused_offline() {
    let d = tmp("cm-bad-name");
    let chaos = json!({ "apiVersion": "test.kwop.dev/v1", "kind": "Chaos", "metadata": { "name": "v", "namespace": "default" }, "spec": { "mode": "invalid-object" } });
    let (ok, out, _) = reconcile(
        Path::new(kwop_tests::plugins::CHAOS),
        &["--primary", &write(&d, "p.yaml", &chaos).display().to_string()],
    );
    assert!(!ok, "{out}");
    let m = out["error"]["message"].as_str().unwrap_or_default();
    assert!(
        m.contains("ConfigMap \"Not_A_Valid_Name\": .metadata.name: \"Not_A_Valid_Name\" is not a DNS-1123 subdomain"),
        "{m}"
    );
}

/// The same plugin and the same world, offline and on the cluster (issue 22, point 3), each rule
/// on its own value: the primary has no namespace (offline: `default`, as kubectl), `peer` has an
/// explicit namespace and is read with `cache.get` and none (the primary's namespace), `peer2`
/// has no namespace (offline: the primary's) and is read with the Foo's namespace.
#[tokio::test(flavor = "multi_thread")]
async fn offline_namespaces_resolve_as_on_the_cluster() -> anyhow::Result<()> {
    let d = tmp("parity");
    let primary = write(&d, "p.yaml", &foo_doc("parity", None));
    let peer = |name: &str, value: &str, ns: Option<&str>| {
        let mut o = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name }, "data": { "value": value } });
        if let Some(ns) = ns {
            o["metadata"]["namespace"] = json!(ns);
        }
        o
    };
    let observed = write(
        &d,
        "o.yaml",
        &json!({ "apiVersion": "v1", "kind": "List", "items": [
        peer("peer", "read-with-none", Some("default")),
        peer("peer2", "observed-without-namespace", None),
    ] }),
    );
    let (ok, offline, err) = reconcile(
        js_plugin(),
        &["--primary", &primary.display().to_string(), "--observed", &observed.display().to_string()],
    );
    assert!(ok, "a primary without a namespace: {offline} {err}");
    let data = &offline["apply"][0]["data"];
    assert_eq!(data["peer"], "read-with-none", "cache.get with none: {offline}");
    assert_eq!(data["peer2"], "observed-without-namespace", "an observed object without a namespace: {offline}");

    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("parity")?;
    let client = plane.client().await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    for o in [peer("peer", "read-with-none", None), peer("peer2", "observed-without-namespace", None)] {
        cms.create(&PostParams::default(), &serde_json::from_value(o)?).await?;
    }
    let dir = kwop_tests::plugins::folder(&[("mistakes.wasm", &js_plugin().display().to_string())])?;
    let _host = host(plane, &dir, &[&format!("--namespace={ns}")])?;
    create_foo(&client, &ns, "parity", "web", None).await?;
    let cm = wait::until("parity-info", Duration::from_secs(60), || async {
        cms.get_opt("parity-info").await.map_err(|e| e.to_string())?.map(Some).ok_or_else(|| "not yet".to_string())
    })
    .await?;
    let online = cm.data.unwrap_or_default();
    let offline_data = data.as_object().cloned().unwrap_or_default();
    assert_eq!(online.len(), offline_data.len(), "offline {offline} vs cluster {online:?}");
    for (k, v) in &offline_data {
        assert_eq!(online.get(k).map(String::as_str), v.as_str(), "{k}: offline {offline} vs cluster {online:?}");
    }
    Ok(())
}

/// On the cluster: the JS error and the Python TypeError are Warning events on the Foo.
#[tokio::test(flavor = "multi_thread")]
async fn errors_in_the_plugins_language_are_warning_events() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("lang-errors")?;
    let client = plane.client().await?;
    // One plugin per primary kind per host: the two Foo plugins run in two hosts.
    let js_dir = kwop_tests::plugins::folder(&[("js.wasm", &js_plugin().display().to_string())])?;
    let py_dir = kwop_tests::plugins::folder(&[("py.wasm", &python_plugin().display().to_string())])?;
    let _py_host = host(plane, &py_dir, &[&format!("--namespace={ns}")])?;
    let host = host(plane, &js_dir, &[&format!("--namespace={ns}")])?;
    create_foo(&client, &ns, "throws", "web", None).await?;
    let js = event_with_reason(&client, &ns, "throws", "ReconcileFailed").await?;
    let note = js.note.unwrap_or_default();
    assert!(note.starts_with("Error: boom\n") && note.contains("plugin.js"), "the JS error and its stack: {note}");
    let py = event_with_reason(&client, &ns, "throws", "ReconcilePluginFailed").await?;
    let note = py.note.unwrap_or_default();
    assert!(
        note.contains("TypeError: 'dict' object is not an instance of 'str'") && note.contains("json.dumps"),
        "{note}"
    );
    assert!(!note.contains("wit_dylib"), "no wasm backtrace in the event: {note}");
    let log = host.log();
    assert!(log.contains("reconciling throws"), "console.log in the host's log");
    // console.log is stdout: info, under the target users filter on; no colour codes in a file.
    let line = log.lines().find(|l| l.contains("reconciling throws")).unwrap_or_default();
    assert!(line.contains(" INFO ") && line.contains("kwop::plugin"), "{line}");
    assert!(!log.contains('\u{1b}'), "colour codes in a log written to a file");
    // Mistake 6 on the cluster: a status wrapped in `status` is refused by the API server; that
    // is a Warning event with the API server's message, not a quiet retry loop.
    create_foo(&client, &ns, "wrapped-status", "web", None).await?;
    let e = event_with_reason(&client, &ns, "wrapped-status", "WriteFailed").await?;
    let note = e.note.unwrap_or_default();
    assert!(note.contains(".status.status: field not declared in schema"), "{note}");
    Ok(())
}

/// On the cluster: a Rust panic's message is the Warning event, not the wasm trap; a failure
/// without events of its own gets the host's Warning `ReconcileFailed`.
#[tokio::test(flavor = "multi_thread")]
async fn a_rust_panic_is_a_warning_event_with_its_message() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("lang-panic")?;
    let client = plane.client().await?;
    let dir = kwop_tests::plugins::folder(&[("chaos.wasm", kwop_tests::plugins::CHAOS)])?;
    let _host = host(plane, &dir, &[&format!("--namespace={ns}")])?;
    create_chaos(&client, &ns, "boom", json!({ "mode": "panic" })).await?;
    let e = event_with_reason(&client, &ns, "boom", "ReconcilePluginFailed").await?;
    let note = e.note.unwrap_or_default();
    assert!(note.contains("chaos plugin panics on purpose (panicked at"), "{note}");
    assert!(!note.contains("wasm backtrace"), "{note}");
    // A failure the plugin reports without a Warning of its own still leaves one, with its message.
    create_chaos(&client, &ns, "quiet", json!({ "mode": "no-such-mode" })).await?;
    let e = event_with_reason(&client, &ns, "quiet", "ReconcileFailed").await?;
    assert_eq!(e.note.as_deref(), Some("unknown mode no-such-mode"));
    Ok(())
}
