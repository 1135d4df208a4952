//! Go plugins on `kwop:reconciler@0.2` (issue 33), on one shared control plane: guest-foo's Go
//! port refuses bad Foos through the kube-apiserver's admission call with its own message, and
//! the test plugin tests/plugins/go-faults shows that a Go panic or error in `reconcile`,
//! `finalize` or `validate` reaches the user in Go's words (a Warning event, a `FinalizeFailed`
//! event while the deletion waits, the webhook's failure policy), never an opaque trap. Offline:
//! guest-foo-go passes the Foo and validation fixtures, and a panic shows offline too.

mod common;

use common::webhook::*;
use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use kwop_tests::{go_plugins, plugins, wait, ControlPlane, Mode};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

fn go_faults() -> PathBuf {
    go_plugins::build("tests/plugins/go-faults").expect("tests/plugins/go-faults builds")
}

fn guest_foo_go() -> PathBuf {
    go_plugins::build("guest-foo/go").expect("guest-foo/go builds")
}

fn fins(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("test.kwop.dev", "v1", "Fin")),
    )
}

fn fin(name: &str, spec: Value) -> Value {
    json!({ "apiVersion": "test.kwop.dev/v1", "kind": "Fin", "metadata": { "name": name, "namespace": "default", "uid": "u-1" }, "spec": spec })
}

#[test]
fn guest_foo_go_passes_the_foo_and_validation_fixtures_offline() {
    let wasm = guest_foo_go().display().to_string();
    let root = kwop_tests::repo_root();
    let (crd, foo, validate) = (
        root.join("crds/foo.yaml").display().to_string(),
        root.join("tests/fixtures/foo").display().to_string(),
        root.join("tests/fixtures/foo-validate").display().to_string(),
    );
    let (ok, out, err) = kwop(&["plugin", "test", "--plugin-timeout=10s", &wasm, &foo]);
    assert!(ok && out.contains("13 passed, 0 failed"), "{out}{err}");
    let (ok, out, err) = kwop(&["plugin", "test", "--plugin-timeout=10s", &wasm, &validate, "--crd", &crd]);
    assert!(ok && out.contains("6 passed, 0 failed"), "{out}{err}");
}

#[test]
fn the_go_config_sync_passes_the_examples_fixtures_offline() {
    let wasm = go_plugins::build("examples/config-sync/go").expect("examples/config-sync/go builds");
    let root = kwop_tests::repo_root();
    let fixtures = root.join("examples/config-sync/fixtures").display().to_string();
    let crd = root.join("crds/configsync.yaml").display().to_string();
    let (ok, out, err) =
        kwop(&["plugin", "test", "--plugin-timeout=10s", &wasm.display().to_string(), &fixtures, "--crd", &crd]);
    assert!(ok && out.contains("6 passed, 0 failed"), "{out}{err}");
}

#[test]
fn a_go_panic_in_reconcile_shows_its_message_and_stack_offline() {
    let d = std::env::temp_dir().join("kwop-test").join(format!("{}-go-panic", std::process::id()));
    std::fs::create_dir_all(&d).expect("dir");
    let p = d.join("fin.yaml");
    std::fs::write(&p, serde_yaml::to_string(&fin("boom", json!({ "reconcile": "panic" }))).expect("yaml"))
        .expect("write");
    let (ok, out, err) =
        kwop(&["plugin", "reconcile", &go_faults().display().to_string(), "--primary", &p.display().to_string()]);
    assert!(!ok, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    let m = v["error"]["message"].as_str().unwrap_or_default();
    assert!(m.starts_with("panic: assignment to entry in nil map\n"), "Go's message: {m}\n{err}");
    assert!(
        m.contains("main.countReasons(...)") && m.contains("kwop.dev/go-faults/broken.go:"),
        "the user's frames: {m}"
    );
    assert!(!m.contains("cannot sleep") && !m.contains("/tmp/") && !m.contains("wasm backtrace"), "{m}");
}

#[tokio::test(flavor = "multi_thread")]
async fn guest_foo_go_refuses_a_bad_foo_through_the_api_servers_admission_call() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("go-adm")?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("guest-foo-go.wasm", &guest_foo_go().display().to_string())])?;
    let Admitting { host: _host, configuration, .. } = admitting(plane, &dir, &ns, &["--webhook-failure-policy=Fail"])?;
    let refused = apply_answered(plane, &ns, &foo_yaml("bad", Some("Bad_Name"))).await.expect_err("refused");
    assert!(refused.contains("admission webhook \"guest-foo-go.kwop.dev\" denied the request"), "{refused}");
    assert!(refused.contains("spec.deploymentName: \"Bad_Name\" is not a valid Deployment name"), "{refused}");
    let missing = apply_answered(plane, &ns, &foo_yaml("missing", None)).await.expect_err("refused");
    assert!(missing.contains("spec.deploymentName: is required"), "{missing}");
    let theirs: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "taken" },
        "spec": { "selector": { "matchLabels": { "app": "t" } },
            "template": { "metadata": { "labels": { "app": "t" } }, "spec": { "containers": [{ "name": "c", "image": "busybox" }] } } }
    }))?;
    Api::<Deployment>::namespaced(client.clone(), &ns).create(&PostParams::default(), &theirs).await?;
    let foreign = apply_answered(plane, &ns, &foo_yaml("grabby", Some("taken"))).await.expect_err("refused");
    assert!(
        foreign.contains("Deployment \"taken\" already exists in namespace")
            && foreign.contains("not managed by this Foo"),
        "{foreign}"
    );
    for n in ["bad", "missing", "grabby"] {
        assert!(foos(&client, &ns).get_opt(n).await?.is_none(), "{n} was stored");
    }
    apply_answered(plane, &ns, &foo_yaml("good", Some("good"))).await.map_err(anyhow::Error::msg)?;
    deployment_where(&client, &ns, "good", "the good Foo's Deployment", |_| true).await?;
    remove_configuration(&client, &configuration).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn go_panics_and_errors_reach_events_and_the_failure_policy_in_gos_words() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("go-faults.wasm", &go_faults().display().to_string())])?;
    for (policy, ignore) in [("Fail", false), ("Ignore", true)] {
        let ns = plane.namespace(&format!("go-{}", policy.to_lowercase()))?;
        let Admitting { host, configuration, .. } =
            admitting(plane, &dir, &ns, &[&format!("--webhook-failure-policy={policy}")])?;
        let yaml = |name: &str, spec: &str| {
            format!("apiVersion: test.kwop.dev/v1\nkind: Fin\nmetadata:\n  name: {name}\nspec: {spec}\n")
        };
        // The plugin's own refusal holds under either policy.
        let denied = apply_answered(plane, &ns, &yaml("deny", "{validate: deny}")).await.expect_err("deny refuses");
        assert!(denied.contains("spec.validate: go-faults says no"), "{denied}");
        // A panic or an error in Validate is not a refusal: the policy decides, with Go's message.
        for (name, why) in [
            ("vpanic", "panic: runtime error: index out of range [6] with length 0"),
            ("verror", "Validate failed: the quota service is down"),
        ] {
            let r = apply_answered(plane, &ns, &yaml(name, &format!("{{validate: {}}}", &name[1..]))).await;
            match (ignore, &r) {
                (false, Err(e)) => {
                    assert!(e.contains("go-faults could not validate the object") && e.contains(why), "{e}")
                }
                (true, Ok(_)) => assert!(fins(&client, &ns).get_opt(name).await?.is_some()),
                _ => panic!("{policy} {name}: {r:?}"),
            }
        }
        if ignore {
            assert!(host.log().contains("the quota service is down"), "the host logs an ignored failure");
            for n in ["vpanic", "verror"] {
                fins(&client, &ns).delete(n, &DeleteParams::default()).await?;
            }
            wait::until("the admitted Fins gone", Duration::from_secs(30), || async {
                let left = fins(&client, &ns).list(&Default::default()).await.map_err(|e| e.to_string())?.items.len();
                Ok((left == 0).then_some(()))
            })
            .await?;
            remove_configuration(&client, &configuration).await;
            continue;
        }
        // Reconcile panics: a Warning event with Go's message and the user's frame.
        apply_answered(plane, &ns, &yaml("rpanic", "{reconcile: panic}")).await.map_err(anyhow::Error::msg)?;
        let e = event_with_reason(&client, &ns, "rpanic", "ReconcileFailed").await?;
        let note = e.note.unwrap_or_default();
        assert!(
            note.contains("panic: assignment to entry in nil map") && note.contains("kwop.dev/go-faults/broken.go:"),
            "{note}"
        );
        assert!(!note.contains("cannot sleep"), "{note}");
        // Finalize returns an error: the deletion waits, FinalizeFailed says the code's message.
        apply_answered(plane, &ns, &yaml("ferror", "{finalize: error}")).await.map_err(anyhow::Error::msg)?;
        configmap_where(&client, &ns, "ferror-ok", "the Fin's ConfigMap", |_| true).await?;
        fins(&client, &ns).delete("ferror", &DeleteParams::default()).await?;
        let e = event_with_reason(&client, &ns, "ferror", "FinalizeFailed").await?;
        assert!(e.note.unwrap_or_default().contains("the bucket of ferror is still in use"));
        let f = fins(&client, &ns).get("ferror").await?;
        assert!(
            f.metadata.deletion_timestamp.is_some() && !f.metadata.finalizers.unwrap_or_default().is_empty(),
            "the deletion waits"
        );
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        assert!(cms.get_opt("ferror-ok").await?.is_some(), "nothing was deleted on a failure");
        // Fixed, it lets go.
        let patch = json!({ "spec": { "finalize": "" } });
        fins(&client, &ns)
            .patch("ferror", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
            .await?;
        wait::until("the Fin gone", Duration::from_secs(30), || async {
            Ok(fins(&client, &ns).get_opt("ferror").await.map_err(|e| e.to_string())?.is_none().then_some(()))
        })
        .await?;
        // Let the host release the rest before it stops.
        let patch = json!({ "spec": { "reconcile": "" } });
        fins(&client, &ns)
            .patch("rpanic", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
            .await?;
        fins(&client, &ns).delete("rpanic", &DeleteParams::default()).await?;
        wait::until("the Fins gone", Duration::from_secs(30), || async {
            let left = fins(&client, &ns).list(&Default::default()).await.map_err(|e| e.to_string())?.items.len();
            Ok((left == 0).then_some(()))
        })
        .await?;
        remove_configuration(&client, &configuration).await;
    }
    Ok(())
}
