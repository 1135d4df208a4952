//! Python plugins on `kwop:reconciler@0.2` (issue 33): guest-foo's Python port passes the Foo and
//! validation fixtures offline and refuses a bad Foo through the real kube-apiserver's admission
//! call with its own message; a Python exception in reconcile, finalize or validate reaches the
//! user in Python's words (`ValueError: ...` and a traceback naming `src/app.py`), offline and on
//! the cluster: a Warning event for reconcile, `FinalizeFailed` with the deletion waiting for
//! finalize, and for validate the webhook's failurePolicy (Fail refuses with the message, Ignore
//! admits).
//!
//! guest-foo/python is built by `scripts/build-guests py` (into `$KWOP_GUESTS_DIR`); the faulty
//! plugin (tests/plugins/python-faults) by `kwop_tests::python_plugins`. One shared control plane.

mod common;

use common::webhook::*;
use common::*;
use kube::api::{DeleteParams, Patch, PatchParams};
use kwop_tests::{plugins, wait, ControlPlane, Host, Mode};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// tests/plugins/python-faults, built once per test process.
fn faults() -> &'static PathBuf {
    static WASM: OnceLock<PathBuf> = OnceLock::new();
    WASM.get_or_init(|| kwop_tests::python_plugins::build("python-faults").expect("python-faults builds"))
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join("kwop-test").join(format!("{}-lang-py-{name}", std::process::id()));
    std::fs::create_dir_all(&d).expect("dir");
    d
}

/// A Foo as YAML: `fault` is its spec.deploymentName (what python-faults switches on).
fn foo_doc(name: &str, fault: &str, deleting: bool) -> String {
    let deletion = if deleting {
        "  finalizers: [kwop.dev/py-faults]\n  deletionTimestamp: \"2026-01-01T00:00:00Z\"\n"
    } else {
        ""
    };
    format!(
        "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata:\n  name: {name}\n  namespace: default\n  uid: u-1\n{deletion}spec:\n  deploymentName: \"{fault}\"\n"
    )
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p.display().to_string()
}

/// The message of a Python error as the user should see it: the exception first, then a
/// traceback naming the plugin's own file (not the build's staging folder).
fn in_python_words(message: &str, exception: &str) {
    assert!(message.starts_with(exception), "the exception comes first: {message}");
    assert!(message.contains("Traceback (most recent call last):"), "{message}");
    assert!(message.contains("File \"src/app.py\", line"), "the user's file: {message}");
    assert!(!message.contains("/tmp/"), "no staging folder: {message}");
}

#[test]
fn guest_foo_in_python_passes_the_foo_and_validation_fixtures_offline() {
    let wasm = built_guest("foo-py").display().to_string();
    let root = kwop_tests::repo_root();
    let crd = root.join("crds/foo.yaml").display().to_string();
    let timeout = "--plugin-timeout=10s";
    for (fixtures, want) in
        [("tests/fixtures/foo", "13 passed, 0 failed"), ("tests/fixtures/foo-validate", "6 passed, 0 failed")]
    {
        let dir = root.join(fixtures).display().to_string();
        let (ok, out, err) = kwop(&["plugin", "test", timeout, "--crd", &crd, &wasm, &dir]);
        assert!(ok && out.contains(want), "{fixtures}:\n{out}{err}");
    }
    let (ok, out, err) = kwop(&["plugin", "inspect", &wasm]);
    let info: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert!(ok && info["world"] == "kwop:reconciler@0.2.0" && info["validates"] == true, "{info}");
}

#[test]
fn python_exceptions_in_reconcile_finalize_and_validate_keep_their_message_offline() {
    let d = tmp("offline");
    let wasm = faults().display().to_string();
    let p = write(&d, "r.yaml", &foo_doc("bad", "reconcile-raises", false));
    let (ok, out, err) = kwop(&["plugin", "reconcile", &wasm, "--primary", &p]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert!(!ok && v["error"]["retry"] == true, "{v}");
    in_python_words(
        v["error"]["message"].as_str().unwrap_or_default(),
        "ValueError: reconcile exploded in python: bad\n",
    );

    let p = write(&d, "f.yaml", &foo_doc("bad", "finalize-fails", true));
    let (ok, out, err) = kwop(&["plugin", "reconcile", &wasm, "--primary", &p]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert!(!ok, "{v}");
    in_python_words(v["error"]["message"].as_str().unwrap_or_default(), "RuntimeError: cleanup backend unavailable\n");
    let p = write(&d, "done.yaml", &foo_doc("fine", "web", true));
    let (ok, out, err) = kwop(&["plugin", "reconcile", &wasm, "--primary", &p]);
    assert!(ok && out.contains("CleanedUp"), "a finalize that works is done: {out}{err}");

    let o = write(&d, "v.yaml", &foo_doc("bad", "validate-raises", false));
    let (ok, out, err) = kwop(&["plugin", "validate", &wasm, "--object", &o]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert!(!ok && v["allowed"] == false && v["violations"] == json!([]), "an error is not a refusal: {v}");
    let m = v["error"].as_str().unwrap_or_default();
    let m = m.strip_prefix("py-faults could not validate the object: plugin trapped: ").unwrap_or(m);
    in_python_words(m, "RuntimeError: validator lost its marbles\n");
    assert!(err.contains("RuntimeError: validator lost its marbles"), "the traceback is logged: {err}");
    let o = write(&d, "refused.yaml", &foo_doc("bad", "validate-refuses", false));
    let (_, out, _) = kwop(&["plugin", "validate", &wasm, "--object", &o]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["violations"], json!([{ "field": "spec.deploymentName", "message": "python says no" }]), "{v}");
}

/// A host serving admission (failure policy `policy`) for the plugins in `dir`, watching only
/// `ns`, once its webhook configuration names `plugin`.
async fn admitting_ready(
    plane: &ControlPlane,
    dir: &Path,
    ns: &str,
    policy: &str,
    plugin: &str,
) -> anyhow::Result<Host> {
    let policy = format!("--webhook-failure-policy={policy}");
    let a = admitting(plane, dir, ns, &[&policy, "--plugin-timeout=10s"])?;
    configured(&plane.client().await?, &a.configuration, plugin).await?;
    Ok(a.host)
}

/// `kubectl apply` until the webhook answers (the API server may need a moment to pick up a new
/// configuration): Ok(stdout) or Err(what kubectl printed).
async fn apply(plane: &ControlPlane, ns: &str, name: &str, deployment: &str) -> Result<String, String> {
    apply_answered(plane, ns, &foo_yaml(name, Some(deployment))).await
}

#[tokio::test(flavor = "multi_thread")]
async fn guest_foo_in_python_refuses_a_bad_foo_through_the_api_server_with_its_own_message() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("py-adm-foo")?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("foo-py.wasm", &built_guest("foo-py").display().to_string())])?;
    let host = admitting_ready(plane, &dir, &ns, "Fail", "guest-foo-py").await?;
    let refused = apply(plane, &ns, "bad", "Bad_Name").await.expect_err("an invalid name is refused");
    assert!(refused.contains("admission webhook \"guest-foo-py.kwop.dev\" denied the request"), "{refused}");
    assert!(refused.contains("spec.deploymentName: \"Bad_Name\" is not a valid Deployment name"), "{refused}");
    let missing = apply(plane, &ns, "missing", "").await.expect_err("a missing name is refused");
    assert!(missing.contains("spec.deploymentName: is required"), "{missing}");
    assert!(
        foos(&client, &ns).get_opt("bad").await?.is_none() && foos(&client, &ns).get_opt("missing").await?.is_none()
    );
    apply(plane, &ns, "good", "good-web").await.map_err(anyhow::Error::msg)?;
    deployment_where(&client, &ns, "good-web", "the Deployment", |_| true).await?;
    assert!(host.metric("kwop_admission_requests_total", &[("result", "denied")])? >= 2.0, "{}", host.log());
    remove_configuration(&client, &format!("kwop-{ns}")).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn python_exceptions_reach_the_cluster_in_python_words_and_validate_follows_fail() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("py-faults")?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("faults.wasm", &faults().display().to_string())])?;
    let host = admitting_ready(plane, &dir, &ns, "Fail", "py-faults").await?;

    // validate raises: not a refusal, the call fails and Fail refuses, with the message.
    let e =
        apply(plane, &ns, "vraises", "validate-raises").await.expect_err("Fail refuses what could not be validated");
    assert!(
        e.contains("py-faults could not validate the object") && e.contains("RuntimeError: validator lost its marbles"),
        "{e}"
    );
    assert!(e.contains("src/app.py"), "{e}");
    let e = apply(plane, &ns, "refused", "validate-refuses").await.expect_err("a refusal");
    assert!(e.contains("spec.deploymentName: python says no"), "{e}");

    // reconcile raises: a Warning event with the exception and the traceback.
    apply(plane, &ns, "rraises", "reconcile-raises").await.map_err(anyhow::Error::msg)?;
    let ev = event_with_reason(&client, &ns, "rraises", "ReconcileFailed").await?;
    in_python_words(ev.note.as_deref().unwrap_or_default(), "ValueError: reconcile exploded in python: rraises\n");
    assert!(host.log().contains("reconcile exploded in python"), "the host log has it");

    // finalize raises: FinalizeFailed with the message, the deletion waits until it is fixed.
    apply(plane, &ns, "ffails", "finalize-fails").await.map_err(anyhow::Error::msg)?;
    configmap_where(&client, &ns, "ffails-py", "the ConfigMap", |_| true).await?;
    foos(&client, &ns).delete("ffails", &DeleteParams::default()).await?;
    let ev = event_with_reason(&client, &ns, "ffails", "FinalizeFailed").await?;
    let note = ev.note.unwrap_or_default();
    // The host names the plugin before the message (`py-faults 0.1.0: ...`).
    in_python_words(
        note.strip_prefix("py-faults 0.1.0: ").unwrap_or(&note),
        "RuntimeError: cleanup backend unavailable\n",
    );
    let f = foos(&client, &ns).get("ffails").await?;
    assert!(f.metadata.deletion_timestamp.is_some(), "the deletion waits");
    assert_eq!(f.metadata.finalizers.clone().unwrap_or_default(), ["kwop.dev/py-faults"]);
    let fixed = json!({ "spec": { "deploymentName": "fixed" } });
    foos(&client, &ns).patch("ffails", &PatchParams::default(), &Patch::Merge(&fixed)).await?;
    wait::until("the fixed Foo gone", Duration::from_secs(60), || async {
        let left = foos(&client, &ns).get_opt("ffails").await.map_err(|e| e.to_string())?;
        Ok(left.is_none().then_some(()))
    })
    .await?;
    event_with_reason(&client, &ns, "ffails", "CleanedUp").await?;
    // Leave nothing waiting on this host's finalizer.
    let _ = foos(&client, &ns).delete("rraises", &DeleteParams::default()).await;
    wait::until("the Foos gone", Duration::from_secs(60), || async {
        let left = foos(&client, &ns).list(&Default::default()).await.map_err(|e| e.to_string())?.items.len();
        Ok((left == 0).then_some(()))
    })
    .await?;
    remove_configuration(&client, &format!("kwop-{ns}")).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_python_validate_that_raises_is_admitted_under_ignore() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("py-ignore")?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("faults.wasm", &faults().display().to_string())])?;
    let host = admitting_ready(plane, &dir, &ns, "Ignore", "py-faults").await?;
    apply(plane, &ns, "vraises", "validate-raises").await.map_err(anyhow::Error::msg)?;
    assert!(foos(&client, &ns).get_opt("vraises").await?.is_some(), "Ignore admits");
    assert!(host.metric("kwop_admission_requests_total", &[("result", "error_ignored")])? >= 1.0, "{}", host.log());
    assert!(host.log().contains("RuntimeError: validator lost its marbles"), "the message is logged: {}", host.log());
    // A refusal still refuses under Ignore.
    let e = apply(plane, &ns, "refused", "validate-refuses").await.expect_err("a refusal");
    assert!(e.contains("python says no"), "{e}");
    let _ = foos(&client, &ns).delete("vraises", &DeleteParams::default()).await;
    wait::until("the Foo gone", Duration::from_secs(60), || async {
        Ok(foos(&client, &ns).get_opt("vraises").await.map_err(|e| e.to_string())?.is_none().then_some(()))
    })
    .await?;
    remove_configuration(&client, &format!("kwop-{ns}")).await;
    Ok(())
}
