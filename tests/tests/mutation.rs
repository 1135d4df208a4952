//! Mutating admission on a real control plane (issue 34): the kube-apiserver calls kwop's
//! `/mutate/<plugin>` (a MutatingWebhookConfiguration the host keeps) and stores what the
//! plugin's `mutate` (WIT 0.3) made of the object, as a JSONPatch the host computed. guest-foo
//! defaults `spec.replicas`, a hot swap changes the default without a restart; a `mutate` that
//! traps, loops, or changes what it did not declare (or the object's name) is refused under Fail
//! and stores the object unchanged under Ignore, saying why.

mod common;

use common::webhook::*;
use common::*;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use kwop_tests::{plugins, wait, ControlPlane, Mode};
use std::time::Duration;

/// A Foo without `spec.replicas`.
fn bare_foo(name: &str) -> String {
    format!("apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata:\n  name: {name}\nspec:\n  deploymentName: {name}\n")
}

async fn replicas(client: &Client, ns: &str, name: &str) -> anyhow::Result<Option<i64>> {
    let f = foos(client, ns).get(name).await?;
    Ok(f.data.pointer("/spec/replicas").and_then(serde_json::Value::as_i64))
}

#[tokio::test(flavor = "multi_thread")]
async fn guest_foo_defaults_replicas_and_a_hot_swap_changes_the_default_without_a_restart() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("mut-foo")?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    let a = admitting(plane, &dir, &ns, &[])?;
    let c = configured_mutating(&client, &a.configuration, "guest-foo").await?;
    let hook = c.webhooks.iter().flatten().next().cloned().unwrap_or_default();
    assert_eq!(hook.side_effects, "None");
    assert_eq!(hook.reinvocation_policy.as_deref(), Some("IfNeeded"));
    assert!(hook.client_config.url.as_deref().is_some_and(|u| u.ends_with("/mutate/guest-foo")), "{hook:?}");

    // Stored with the default; kubectl says "created" and nothing else (no warning).
    let out = apply_answered(plane, &ns, &bare_foo("plain")).await.map_err(anyhow::Error::msg)?;
    assert_eq!(out.trim(), "foo.samplecontroller.k8s.io/plain created");
    assert_eq!(replicas(&client, &ns, "plain").await?, Some(1));
    // Applying the same manifest again changes nothing: the default is not a difference to undo.
    let again = kubectl_apply(plane, &ns, &bare_foo("plain")).map_err(anyhow::Error::msg)?;
    assert_eq!(again.trim(), "foo.samplecontroller.k8s.io/plain unchanged");
    // A count the user set is kept, and reconciled as set.
    apply_answered(plane, &ns, &foo_yaml("set", Some("set"))).await.map_err(anyhow::Error::msg)?;
    assert_eq!(replicas(&client, &ns, "set").await?, Some(1));
    deployment_where(&client, &ns, "plain", "plain's Deployment with the default", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(1)
    })
    .await?;
    assert!(a.host.metric("kwop_mutation_requests_total", &[("result", "mutated")])? >= 1.0, "{}", a.host.log());

    // v2 defaults to 3: new Foos get it, the stored one keeps its count.
    let pid = a.host.proc.pid();
    plugins::replace(&dir, "guest-foo.wasm", plugins::GUEST_FOO_V2)?;
    wait::until("v2 defaulting", Duration::from_secs(60), || async {
        let name = format!("v2-{}", std::time::UNIX_EPOCH.elapsed().map_or(0, |d| d.as_millis()));
        kubectl_apply(plane, &ns, &bare_foo(&name))?;
        match replicas(&client, &ns, &name).await.map_err(|e| e.to_string())? {
            Some(3) => Ok(Some(())),
            other => Err(format!("{name}: replicas {other:?}")),
        }
    })
    .await?;
    assert_eq!(replicas(&client, &ns, "plain").await?, Some(1));
    assert_eq!(a.host.proc.pid(), pid, "the same host process");
    remove_configuration(&client, &a.configuration).await;
    Ok(())
}

fn fin_yaml(name: &str, mutate: &str) -> String {
    format!("apiVersion: test.kwop.dev/v1\nkind: Fin\nmetadata:\n  name: {name}\nspec:\n  mutate: {mutate}\n")
}

fn fins(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("test.kwop.dev", "v1", "Fin"));
    Api::namespaced_with(client.clone(), ns, &ar)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mutate_that_traps_loops_or_oversteps_is_refused_under_fail_and_passes_unchanged_under_ignore(
) -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("finalizer.wasm", plugins::FINALIZER)])?;
    for (policy, allowed) in [("Fail", false), ("Ignore", true)] {
        let ns = plane.namespace(&format!("mut-{}", policy.to_lowercase()))?;
        let a =
            admitting(plane, &dir, &ns, &[&format!("--webhook-failure-policy={policy}"), "--plugin-timeout=500ms"])?;
        let c = configured_mutating(&client, &a.configuration, "finalizer").await?;
        let hook = c.webhooks.iter().flatten().next().cloned().unwrap_or_default();
        assert_eq!(hook.failure_policy.as_deref(), Some(policy));
        // The plugin's own answers hold under either policy.
        apply_answered(plane, &ns, &fin_yaml("default", "default")).await.map_err(anyhow::Error::msg)?;
        let stored = fins(&client, &ns).get("default").await?;
        assert_eq!(stored.data.pointer("/spec/note").and_then(|v| v.as_str()), Some("set by mutate"));
        let denied = apply_answered(plane, &ns, &fin_yaml("deny", "deny")).await.expect_err("deny refuses");
        assert!(denied.contains("spec.mutate: mutate says no"), "{denied}");
        // A trap, an endless loop, an undeclared field, the object's name: the policy decides.
        for (name, why) in [
            ("trap", "finalizer could not mutate the object: plugin trapped"),
            ("loop", "exceeded its deadline"),
            (
                "outside",
                "finalizer's mutation changes spec.validate, which it did not declare (plugin-info.mutates: spec.note)",
            ),
            ("rename", "finalizer's mutation changes metadata.name, which no mutation may change"),
        ] {
            let r = apply_answered(plane, &ns, &fin_yaml(name, name)).await;
            match (allowed, &r) {
                (false, Err(e)) => assert!(e.contains(why), "{policy} {name}: {e}"),
                (true, Ok(out)) => {
                    // Stored as sent: nothing of the refused mutation.
                    let f = fins(&client, &ns).get(name).await?;
                    assert!(f.data.pointer("/spec/validate").is_none() && f.metadata.name.as_deref() == Some(name));
                    assert!(out.contains("created"), "{out}");
                }
                _ => panic!("{policy} {name}: {r:?}"),
            }
        }
        let label = if allowed { "error_ignored" } else { "error" };
        assert!(a.host.metric("kwop_mutation_requests_total", &[("result", label)])? >= 4.0, "{}", a.host.log());
        // Fins carry the plugin's finalizer: let the host take them away before it stops.
        let api = fins(&client, &ns);
        let _ = api.delete_collection(&Default::default(), &Default::default()).await;
        wait::until("the Fins gone", Duration::from_secs(30), || async {
            let left = api.list(&Default::default()).await.map_err(|e| e.to_string())?.items.len();
            Ok((left == 0).then_some(()))
        })
        .await?;
        remove_configuration(&client, &a.configuration).await;
    }
    Ok(())
}

#[test]
fn kwop_plugin_mutate_shows_the_patch_offline_and_refuses_an_undeclared_change() -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join("kwop-test").join(format!("{}-mutate", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let foo = dir.join("foo.yaml");
    std::fs::write(&foo, "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata: {name: x, namespace: d}\nspec: {deploymentName: x}\n")?;
    let (ok, out, err) = kwop(&["plugin", "mutate", plugins::GUEST_FOO, "--object", &foo.display().to_string()]);
    assert!(ok, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out)?;
    assert_eq!(v["patch"], serde_json::json!([{"op": "add", "path": "/spec/replicas", "value": 1}]));
    assert_eq!(v["object"]["spec"]["replicas"], 1);
    for (mode, why) in [
        (
            "outside",
            "finalizer's mutation changes spec.validate, which it did not declare (plugin-info.mutates: spec.note)",
        ),
        ("rename", "finalizer's mutation changes metadata.name, which no mutation may change"),
        ("trap", "mutate exploded"),
    ] {
        let fin = dir.join(format!("{mode}.yaml"));
        std::fs::write(&fin, format!("apiVersion: test.kwop.dev/v1\nkind: Fin\nmetadata: {{name: f, namespace: d}}\nspec: {{mutate: {mode}}}\n"))?;
        let (ok, out, err) = kwop(&["plugin", "mutate", plugins::FINALIZER, "--object", &fin.display().to_string()]);
        assert!(!ok, "{mode}: {out}");
        let v: serde_json::Value = serde_json::from_str(&out).map_err(|e| anyhow::anyhow!("{e}: {out}{err}"))?;
        assert!(v["message"].as_str().is_some_and(|m| m.contains(why)), "{mode}: {out}");
    }
    Ok(())
}
