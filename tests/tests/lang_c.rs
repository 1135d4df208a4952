//! C plugins on `kwop:reconciler@0.2` (issue 33, the C SDK in `wit/c`): guest-foo/c refuses a bad
//! Foo through the real kube-apiserver's admission call with its own message and passes the Foo
//! and validation fixtures offline; in `tests/plugins/c-faults`, a `kwop_panic` and a failed
//! `assert()` in reconcile show their message and source place (offline and as the Warning event),
//! a finalize returning `kwop_fail` keeps the Foo with a `FinalizeFailed` event carrying its
//! message, and a validate returning `kwop_fail` is refused under failurePolicy Fail and admitted
//! under Ignore, the message in the refusal resp. the host's log. The SDK's own native tests run
//! here too. One shared control plane; the C plugins are built by `kwop_tests::c_plugins`.

mod common;

use common::webhook::*;
use common::*;
use kube::api::{DeleteParams, Patch, PatchParams};
use kwop_tests::c_plugins::{c_faults, guest_foo_c};
use kwop_tests::{plugins, wait, ControlPlane, Mode};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn repo(path: &str) -> String {
    kwop_tests::repo_root().join(path).display().to_string()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join("kwop-test").join(format!("{}-langc-{name}", std::process::id()));
    std::fs::create_dir_all(&d).expect("dir");
    d
}

/// A Foo document with the c-faults annotation `fault` (none when empty).
fn foo_doc(name: &str, fault: &str, deployment: &str) -> Value {
    let mut meta = json!({ "name": name, "namespace": "default", "uid": "u-1" });
    if !fault.is_empty() {
        meta["annotations"] = json!({ "kwop.test/fault": fault });
    }
    json!({ "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": meta,
            "spec": { "deploymentName": deployment } })
}

fn write(dir: &Path, name: &str, v: &Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string(v).expect("json")).expect("write");
    p.display().to_string()
}

/// `kwop plugin reconcile` of c-faults on a Foo with `fault`: the error it printed.
fn reconcile_error(fault: &str) -> Value {
    let d = tmp(&format!("rec-{fault}"));
    let primary = write(&d, "foo.json", &foo_doc(fault, fault, "web"));
    let (ok, out, err) = kwop(&["plugin", "reconcile", c_faults(), "--primary", &primary]);
    assert!(!ok, "{fault}: {out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    v["error"].clone()
}

#[test]
fn the_c_sdk_passes_its_native_tests() {
    let o = Command::new(repo("wit/c/test.sh")).output().expect("wit/c/test.sh runs");
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success() && text.contains("ok: 0 failed"), "{text}");
}

#[test]
fn guest_foo_c_passes_the_foo_and_validation_fixtures_offline() {
    let crd = repo("crds/foo.yaml");
    for (fixtures, n) in [("tests/fixtures/foo", 13), ("tests/fixtures/foo-validate", 6)] {
        let (ok, out, err) =
            kwop(&["plugin", "test", "--plugin-timeout=10s", guest_foo_c(), &repo(fixtures), "--crd", &crd]);
        assert!(ok && out.contains(&format!("{n} passed, 0 failed")), "{fixtures}:\n{out}{err}");
    }
    let (_, info, _) = kwop(&["plugin", "inspect", guest_foo_c()]);
    assert!(info.contains("\"validates\": true") && info.contains("0.2"), "{info}");
}

#[test]
fn a_c_panic_an_assert_and_a_kwop_fail_show_their_own_messages_offline() {
    let e = reconcile_error("panic");
    let m = e["message"].as_str().unwrap_or_default();
    assert!(m.contains("reconcile exploded for panic (panicked at src/faults.c:"), "{m}");
    assert!(m.contains("in kwop_reconcile)") && !m.contains("wasm backtrace"), "{m}");
    let m = reconcile_error("assert")["message"].as_str().unwrap_or_default().to_string();
    assert!(
        m.contains("assertion failed: strcmp(f.fault, \"assert\") != 0 (panicked at src/faults.c:"),
        "the expression and where: {m}"
    );
    let e = reconcile_error("fail");
    assert_eq!(e["message"], "backend unreachable for fail", "{e}");
    assert_eq!(e["retry"], true, "{e}");
    // validate: an error is not a refusal, the call fails with the message.
    let d = tmp("validate");
    let object = write(&d, "foo.json", &foo_doc("v", "", "explode"));
    let (ok, out, err) = kwop(&["plugin", "validate", c_faults(), "--object", &object]);
    assert!(!ok && format!("{out}{err}").contains("validator lost its rules for v"), "{out}{err}");
    let object = write(&d, "refused.json", &foo_doc("r", "", "refuse"));
    let (ok, out, _) = kwop(&["plugin", "validate", c_faults(), "--object", &object]);
    assert!(!ok && out.contains("spec.deploymentName: c-faults refuses r"), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn guest_foo_c_refuses_a_bad_foo_through_the_api_server_with_its_own_message() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("langc-adm")?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("guest-foo-c.wasm", guest_foo_c())])?;
    let a = admitting(plane, &dir, &ns, &["--webhook-failure-policy=Fail"])?;
    configured(&client, &a.configuration, "guest-foo-c").await?;
    let refused = apply_answered(plane, &ns, &foo_yaml("bad", Some("Bad_Name"))).await.expect_err("refused");
    assert!(refused.contains("admission webhook \"guest-foo-c.kwop.dev\" denied the request"), "{refused}");
    assert!(refused.contains("spec.deploymentName: \"Bad_Name\" is not a valid Deployment name"), "{refused}");
    let missing = apply_answered(plane, &ns, &foo_yaml("missing", None)).await.expect_err("refused");
    assert!(missing.contains("spec.deploymentName: is required"), "{missing}");
    // A good one is stored and reconciled by the same C plugin.
    apply_answered(plane, &ns, &foo_yaml("good", Some("good-web"))).await.map_err(anyhow::Error::msg)?;
    deployment_where(&client, &ns, "good-web", "the Deployment", |_| true).await?;
    assert!(foos(&client, &ns).get_opt("bad").await?.is_none());
    remove_configuration(&client, &a.configuration).await;
    drop(a);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_c_panic_and_an_assert_in_reconcile_are_warning_events_with_their_messages() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("langc-panic")?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("c-faults.wasm", c_faults())])?;
    let host = host(plane, &dir, &[&format!("--namespace={ns}")])?;
    let api = foos(&client, &ns);
    for (name, fault) in [("panics", "panic"), ("asserts", "assert"), ("fails", "fail")] {
        let mut f = foo(name, "web", None);
        f.metadata.annotations = Some([("kwop.test/fault".to_string(), fault.to_string())].into());
        api.create(&Default::default(), &f).await?;
    }
    let note = event_with_reason(&client, &ns, "panics", "ReconcilePluginFailed").await?.note.unwrap_or_default();
    assert!(note.contains("reconcile exploded for panics (panicked at src/faults.c:"), "{note}");
    assert!(!note.contains("wasm backtrace"), "{note}");
    let note = event_with_reason(&client, &ns, "asserts", "ReconcilePluginFailed").await?.note.unwrap_or_default();
    assert!(note.contains("assertion failed: strcmp(f.fault, \"assert\") != 0 (panicked at src/faults.c:"), "{note}");
    let e = event_with_reason(&client, &ns, "fails", "ReconcileFailed").await?;
    assert_eq!(e.note.as_deref(), Some("backend unreachable for fails"));
    let log = host.log();
    assert!(log.contains("reconcile exploded for panics"), "the panic in the host's log");
    assert!(log.contains("backend unreachable for fails"), "kwop_fail's message in the host's log:\n{log}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_c_finalize_keeps_the_foo_with_a_finalize_failed_event() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("langc-fin")?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("c-faults.wasm", c_faults())])?;
    let _host = host(plane, &dir, &[&format!("--namespace={ns}")])?;
    let api = foos(&client, &ns);
    let mut f = foo("stuck", "web", None);
    f.metadata.annotations = Some([("kwop.test/fault".to_string(), "finalize-fail".to_string())].into());
    api.create(&Default::default(), &f).await?;
    configmap_where(&client, &ns, "stuck-c", "reconciled", |_| true).await?;
    api.delete("stuck", &DeleteParams::default()).await?;
    let e = event_with_reason(&client, &ns, "stuck", "FinalizeFailed").await?;
    // the host names the plugin before the message the code wrote
    assert_eq!(e.note.as_deref(), Some("c-faults 0.1.0: cleanup backend unavailable"));
    let still = api.get_opt("stuck").await?.expect("the deletion waits for the finalizer");
    assert!(still.metadata.deletion_timestamp.is_some());
    assert!(still.metadata.finalizers.unwrap_or_default().contains(&"kwop.dev/c-faults".to_string()));
    // Once finalize succeeds the Foo goes.
    let clear = json!({ "metadata": { "annotations": { "kwop.test/fault": null } } });
    api.patch("stuck", &PatchParams::default(), &Patch::Merge(&clear)).await?;
    wait::until("the Foo gone", Duration::from_secs(60), || async {
        Ok(api.get_opt("stuck").await.map_err(|e| e.to_string())?.is_none().then_some(()))
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_c_validate_error_is_refused_under_fail_and_admitted_under_ignore_with_its_message() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("c-faults.wasm", c_faults())])?;
    for (policy, admitted) in [("Fail", false), ("Ignore", true)] {
        let ns = plane.namespace(&format!("langc-adm-{}", policy.to_lowercase()))?;
        let a = admitting(plane, &dir, &ns, &[&format!("--webhook-failure-policy={policy}")])?;
        configured(&client, &a.configuration, "c-faults").await?;
        // Its own refusal holds under either policy.
        let refused = apply_answered(plane, &ns, &foo_yaml("nope", Some("refuse"))).await.expect_err("refused");
        assert!(refused.contains("spec.deploymentName: c-faults refuses nope"), "{refused}");
        let r = apply_answered(plane, &ns, &foo_yaml("boom", Some("explode"))).await;
        match (admitted, &r) {
            (false, Err(e)) => assert!(e.contains("validator lost its rules for boom"), "{e}"),
            (true, Ok(_)) => {
                assert!(foos(&client, &ns).get_opt("boom").await?.is_some());
                assert!(a.host.log().contains("validator lost its rules for boom"), "logged under Ignore");
            }
            _ => panic!("{policy}: {r:?}"),
        }
        remove_configuration(&client, &a.configuration).await;
    }
    Ok(())
}
