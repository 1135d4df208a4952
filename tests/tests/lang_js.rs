//! JavaScript plugins on `kwop:reconciler@0.2` (issue 33, for JS/TypeScript): guest-foo/js refuses
//! a bad Foo through the real kube-apiserver's admission call with its own message and passes the
//! Foo and validation fixtures offline; an error thrown in `reconcile`, `finalize` or `validate`
//! reaches the user in JavaScript's words (message and a stack naming the plugin's own source
//! file), offline and on the cluster: a Warning event, a deletion left waiting with
//! `FinalizeFailed`, and the webhook's failure policy (Fail refuses with the message, Ignore
//! admits). The test plugin is tests/plugins/js-faults; the TypeScript config-sync runs in
//! tests/tests/config_sync.rs. One shared control plane.

mod common;

use common::webhook::*;
use common::*;
use kube::api::{DeleteParams, Patch, PatchParams};
use kwop_tests::{plugins, wait, ControlPlane, Mode};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// tests/plugins/js-faults, built once per test process.
fn faults() -> &'static PathBuf {
    static WASM: OnceLock<PathBuf> = OnceLock::new();
    WASM.get_or_init(|| {
        kwop_tests::js_plugins::build("tests/plugins/js-faults", "js-faults").expect("js-faults builds")
    })
}

fn write(dir: &Path, name: &str, v: &Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, v.to_string()).expect("write");
    p.display().to_string()
}

fn foo_doc(name: &str, deployment: &str, annotations: Value, deleting: bool) -> Value {
    let mut meta = json!({ "name": name, "namespace": "default", "uid": "u-1", "annotations": annotations });
    if deleting {
        meta["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        meta["finalizers"] = json!(["kwop.dev/js-faults"]);
    }
    json!({ "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": meta, "spec": { "deploymentName": deployment } })
}

/// A message in JavaScript's words: `head` first, then frames naming the plugin's faults.js (not
/// the build's staging folder, not the component's glue).
fn in_js_words(m: &str, head: &str) {
    assert!(m.starts_with(head), "the error's own message first: {m}");
    assert!(m.contains("src/faults.js:"), "a stack naming the source file: {m}");
    assert!(!m.contains("dist/stage") && !m.contains("initializer.js"), "no staging folder or glue frames: {m}");
}

#[test]
fn guest_foo_js_passes_the_foo_and_validation_fixtures_offline() {
    let root = kwop_tests::repo_root();
    let wasm = built_guest("foo-js").display().to_string();
    let crd = root.join("crds/foo.yaml").display().to_string();
    for (fixtures, n) in [("tests/fixtures/foo", 13), ("tests/fixtures/foo-validate", 6)] {
        let dir = root.join(fixtures).display().to_string();
        let (ok, out, err) = kwop(&["plugin", "test", "--plugin-timeout=10s", "--crd", &crd, &wasm, &dir]);
        assert!(ok && out.contains(&format!("{n} passed, 0 failed")), "{fixtures}:\n{out}{err}");
    }
    let (_, out, _) = kwop(&["plugin", "inspect", &wasm]);
    let info: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    assert_eq!(
        (info["world"].as_str(), info["validates"].as_bool()),
        (Some("kwop:reconciler@0.2.0"), Some(true)),
        "{out}"
    );
}

#[test]
fn a_js_error_in_reconcile_finalize_or_validate_keeps_its_words_offline() {
    let d = kwop_tests::scaffolds::outside("lang-js-offline");
    let wasm = faults().display().to_string();
    let run = |args: &[&str]| {
        let (ok, out, err) = kwop(args);
        assert!(!ok, "the call failed: {out}{err}");
        let v: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
        (v, format!("{out}{err}"))
    };
    let p = write(&d, "r.json", &foo_doc("boom", "throw-in-reconcile", json!({}), false));
    let (v, all) = run(&["plugin", "reconcile", &wasm, "--primary", &p]);
    in_js_words(v["error"]["message"].as_str().unwrap_or(&all), "Error: reconcile exploded for boom\n");
    assert_eq!(v["error"]["retry"], json!(true), "{all}");

    let stuck = foo_doc("stuck", "web", json!({ "test.kwop.dev/fail-cleanup": "yes" }), true);
    let (v, all) = run(&["plugin", "reconcile", &wasm, "--primary", &write(&d, "f.json", &stuck)]);
    in_js_words(v["error"]["message"].as_str().unwrap_or(&all), "Error: cleanup backend unavailable\n");

    let p = write(&d, "v.json", &foo_doc("v", "throw-in-validate", json!({}), false));
    let (v, all) = run(&["plugin", "validate", &wasm, "--object", &p]);
    let m = v["error"].as_str().unwrap_or(&all);
    assert!(m.starts_with("js-faults could not validate the object: plugin trapped: "), "a failed call: {m}");
    in_js_words(&m[m.find("TypeError").unwrap_or(0)..], "TypeError: validate exploded for v\n");
    assert_eq!(v["violations"], json!([]), "not a refusal with violations: {all}");
    // The same plugin admits and finalizes when nothing throws.
    let p = write(&d, "ok.json", &foo_doc("fine", "web", json!({}), false));
    let (ok, out, err) = kwop(&["plugin", "validate", &wasm, "--object", &p]);
    assert!(ok && out.contains("\"allowed\": true"), "{out}{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn guest_foo_js_refuses_a_bad_foo_through_the_api_server() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("js-adm")?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("foo-js.wasm", &built_guest("foo-js").display().to_string())])?;
    let a = admitting(plane, &dir, &ns, &["--plugin-timeout=10s"])?;
    let refused = apply_answered(plane, &ns, &foo_yaml("bad", Some("Bad_Name"))).await.expect_err("refused");
    assert!(refused.contains("admission webhook \"guest-foo-js.kwop.dev\" denied the request"), "{refused}");
    assert!(refused.contains("spec.deploymentName: \"Bad_Name\" is not a valid Deployment name"), "{refused}");
    let missing = apply_answered(plane, &ns, &foo_yaml("missing", None)).await.expect_err("refused");
    assert!(missing.contains("spec.deploymentName: is required"), "{missing}");
    for n in ["bad", "missing"] {
        assert!(foos(&client, &ns).get_opt(n).await?.is_none(), "{n} was stored");
    }
    apply_answered(plane, &ns, &foo_yaml("good", Some("good"))).await.map_err(anyhow::Error::msg)?;
    deployment_where(&client, &ns, "good", "the good Foo's Deployment", |_| true).await?;
    assert!(a.host.metric("kwop_admission_requests_total", &[("result", "denied")])? >= 2.0);
    remove_configuration(&client, &a.configuration).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn js_errors_reach_the_cluster_in_javascripts_words() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("js-faults.wasm", &faults().display().to_string())])?;
    // Compile once (into the shared precompile cache) before the hosts load it.
    let (ok, out, err) = kwop(&["plugin", "inspect", &faults().display().to_string()]);
    assert!(ok, "{out}{err}");

    let ns = plane.namespace("js-faults")?;
    let a = admitting(plane, &dir, &ns, &["--plugin-timeout=10s", "--webhook-failure-policy=Fail"])?;
    // validate throws: under Fail the API server refuses, with the error's own words.
    let r = apply_answered(plane, &ns, &foo_yaml("denied", Some("deny-me"))).await.expect_err("denied");
    assert!(r.contains("spec.deploymentName: js-faults denies deny-me"), "{r}");
    let r =
        apply_answered(plane, &ns, &foo_yaml("v", Some("throw-in-validate"))).await.expect_err("refused under Fail");
    assert!(r.contains("js-faults could not validate the object"), "{r}");
    assert!(r.contains("TypeError: validate exploded for v") && r.contains("src/faults.js:"), "{r}");
    assert!(foos(&client, &ns).get_opt("v").await?.is_none());

    // reconcile throws: a Warning event with the message and the stack.
    apply_answered(plane, &ns, &foo_yaml("boom", Some("throw-in-reconcile"))).await.map_err(anyhow::Error::msg)?;
    let e = event_with_reason(&client, &ns, "boom", "ReconcileFailed").await?;
    in_js_words(e.note.as_deref().unwrap_or_default(), "Error: reconcile exploded for boom\n");

    // finalize throws: the deletion waits, with FinalizeFailed saying what the code said.
    let stuck = "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata:\n  name: stuck\n  annotations:\n    test.kwop.dev/fail-cleanup: \"yes\"\nspec:\n  deploymentName: web\n";
    apply_answered(plane, &ns, stuck).await.map_err(anyhow::Error::msg)?;
    configmap_where(&client, &ns, "stuck-seen", "reconciled", |_| true).await?;
    let foos_api = foos(&client, &ns);
    wait::until("the finalizer on stuck", Duration::from_secs(30), || async {
        let f = foos_api.get("stuck").await.map_err(|e| e.to_string())?;
        Ok(f.metadata.finalizers.unwrap_or_default().contains(&"kwop.dev/js-faults".to_string()).then_some(()))
    })
    .await?;
    foos_api.delete("stuck", &DeleteParams::default()).await?;
    let e = event_with_reason(&client, &ns, "stuck", "FinalizeFailed").await?;
    let note = e.note.unwrap_or_default();
    // The host names the plugin and its version first, as for every finalize failure.
    let own = note.strip_prefix("js-faults 0.1.0: ").unwrap_or_else(|| panic!("the plugin named first: {note}"));
    in_js_words(own, "Error: cleanup backend unavailable\n");
    let f = foos_api.get("stuck").await?;
    assert!(f.metadata.deletion_timestamp.is_some(), "the deletion waits for the finalizer");
    // Once the code stops throwing, the retry finishes the deletion.
    let patch = json!({ "metadata": { "annotations": { "test.kwop.dev/fail-cleanup": null } } });
    foos_api.patch("stuck", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    wait::until("stuck deleted", Duration::from_secs(60), || async {
        Ok(foos_api.get_opt("stuck").await.map_err(|e| e.to_string())?.is_none().then_some(()))
    })
    .await?;
    let log = a.host.log();
    assert!(log.contains("validate exploded for v"), "the thrown error in the host's log");
    let _ = foos_api.delete("boom", &DeleteParams::default()).await;
    remove_configuration(&client, &a.configuration).await;
    drop(a);

    // Under Ignore the same throwing validate admits the Foo.
    let ns = plane.namespace("js-faults-ignore")?;
    let a = admitting(plane, &dir, &ns, &["--plugin-timeout=10s", "--webhook-failure-policy=Ignore"])?;
    // The webhook is live once it refuses what the plugin denies (under Ignore, an unreachable
    // webhook admits everything: that must not pass for the throwing validate's answer).
    wait::until("the webhook refusing deny-me", Duration::from_secs(60), || async {
        match plane.kubectl_stdin(&["apply", "-n", &ns, "-f", "-"], &foo_yaml("deny-me", Some("deny-me"))) {
            Err(e) if e.to_string().contains("js-faults denies deny-me") => Ok(Some(())),
            Ok(_) => {
                let _ = foos(&client, &ns).delete("deny-me", &DeleteParams::default()).await;
                Err("admitted: the webhook is not called yet".to_string())
            }
            Err(e) => Err(e.to_string()),
        }
    })
    .await?;
    apply_answered(plane, &ns, &foo_yaml("v", Some("throw-in-validate"))).await.map_err(anyhow::Error::msg)?;
    assert!(foos(&client, &ns).get_opt("v").await?.is_some(), "admitted under Ignore");
    assert!(a.host.metric("kwop_admission_requests_total", &[("result", "error_ignored")])? >= 1.0, "{}", a.host.log());
    assert!(a.host.log().contains("validate exploded for v"), "the message is logged");
    for n in ["deny-me", "v"] {
        let _ = foos(&client, &ns).delete(n, &DeleteParams::default()).await;
    }
    wait::until("the Foos gone", Duration::from_secs(30), || async {
        let left = foos(&client, &ns).list(&Default::default()).await.map_err(|e| e.to_string())?.items.len();
        Ok((left == 0).then_some(()))
    })
    .await?;
    remove_configuration(&client, &a.configuration).await;
    Ok(())
}
