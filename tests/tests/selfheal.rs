//! Self-healing that always heals, and reads that trigger (issue 22), on a real control plane:
//! keyed list items edited by hand (a Service port, a container's name) are put back within one
//! reconcile with the foreign item removed, fields the intent does not set stay shared, a change
//! to an object a plugin read wakes it at once, and a typing error from the API server (a 500)
//! becomes a Warning event instead of a quiet retry loop.

mod common;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use kwop_tests::{plugins, wait, ControlPlane, Host, Mode};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn heals(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("test.kwop.dev", "v1", "Heal")),
    )
}

async fn create_heal(client: &Client, ns: &str, name: &str, spec: Value) -> anyhow::Result<()> {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "test.kwop.dev/v1", "kind": "Heal", "metadata": { "name": name }, "spec": spec
    }))?;
    heals(client, ns).create(&PostParams::default(), &obj).await?;
    Ok(())
}

struct Setup {
    ns: String,
    client: Client,
    host: Host,
}

/// The selfheal plugin in a host watching only a fresh namespace; resyncs far away, so whatever
/// happens in a test happens because of a watch event.
async fn setup(test: &str) -> anyhow::Result<Setup> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace(test)?;
    let dir = plugins::folder(&[("selfheal.wasm", plugins::SELFHEAL)])?;
    let host = host(plane, &dir, &[&format!("--namespace={ns}"), "--resync-period=10m"])?;
    let client = plane.client().await?;
    Ok(Setup { ns, client, host })
}

/// A hand edit as `kubectl edit` makes it: an update (not an apply) by another field manager.
async fn hand_edit<K>(api: &Api<K>, name: &str, patch: Value) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let pp = PatchParams { field_manager: Some("kubectl-edit".into()), ..PatchParams::default() };
    api.patch(name, &pp, &Patch::Json::<()>(serde_json::from_value(patch)?)).await?;
    Ok(())
}

fn ports(s: &Service) -> Vec<i32> {
    s.spec.as_ref().and_then(|s| s.ports.as_ref()).map(|p| p.iter().map(|p| p.port).collect()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_service_port_edited_by_hand_is_put_back_and_the_foreign_port_removed() -> anyhow::Result<()> {
    let s = setup("heal-port").await?;
    create_heal(&s.client, &s.ns, "web", json!({})).await?;
    let services: Api<Service> = Api::namespaced(s.client.clone(), &s.ns);
    let within = Duration::from_secs(30);
    wait::until("the Service with port 80", within, || async {
        let svc = services.get_opt("web").await.map_err(|e| e.to_string())?;
        Ok(svc.filter(|svc| ports(svc) == [80]).map(|_| ()))
    })
    .await?;

    // Another tool annotates the Service (a field the intent does not set: it stays theirs).
    let pp = PatchParams { field_manager: Some("other-tool".into()), ..PatchParams::default() };
    services.patch("web", &pp, &Patch::Merge(json!({"metadata": {"annotations": {"other.tool/x": "1"}}}))).await?;
    // Someone changes the port by hand: the keyed item (80/TCP) becomes 8080/TCP, owned by them.
    hand_edit(&services, "web", json!([{ "op": "replace", "path": "/spec/ports/0/port", "value": 8080 }])).await?;

    let svc = wait::until("port 80 back and 8080 gone", within, || async {
        let svc = services.get("web").await.map_err(|e| e.to_string())?;
        if ports(&svc) == [80] {
            Ok(Some(svc))
        } else {
            Err(format!("ports {:?}", ports(&svc)))
        }
    })
    .await?;
    let ann = svc.metadata.annotations.unwrap_or_default();
    assert_eq!(ann.get("other.tool/x").map(String::as_str), Some("1"), "another manager's annotation is kept");
    // Within one reconcile: no write was refused on the way (the apply that merges 80 beside
    // 8080 is refused with 422 unless the host replaces the list first).
    assert_eq!(s.host.metric("kwop_write_errors_total", &[])?, 0.0, "{}", s.host.log());
    assert!(events_for(&s.client, &s.ns, "web").await?.iter().all(|e| e.reason.as_deref() != Some("WriteFailed")));
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_container_renamed_by_hand_is_put_back_and_a_restart_annotation_kept() -> anyhow::Result<()> {
    let Env { ns, host, client, .. } = guest_foo_env("heal-container", Mode::Api).await?;
    create_foo(&client, &ns, "app", "app", Some(1)).await?;
    deployment_where(&client, &ns, "app", "the Deployment", |d| d.spec.as_ref().and_then(|s| s.replicas) == Some(1))
        .await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    // `kubectl rollout restart` sets an annotation guest-foo's intent does not set.
    let restart =
        json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "now"}}}}});
    let pp = PatchParams { field_manager: Some("kubectl-rollout".into()), ..PatchParams::default() };
    deployments.patch("app", &pp, &Patch::Merge(&restart)).await?;
    // The container is renamed by hand: for server-side apply a new item (containers are keyed
    // by name) owned by someone else, beside which a plain apply would add "nginx" again.
    hand_edit(
        &deployments,
        "app",
        json!([{ "op": "replace", "path": "/spec/template/spec/containers/0/name", "value": "renamed" }]),
    )
    .await?;

    let names = |d: &Deployment| -> Vec<String> {
        d.spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .map(|p| p.containers.iter().map(|c| c.name.clone()).collect())
            .unwrap_or_default()
    };
    let d = wait::until("one container named nginx", Duration::from_secs(30), || async {
        let d = deployments.get("app").await.map_err(|e| e.to_string())?;
        if names(&d) == ["nginx"] {
            Ok(Some(d))
        } else {
            Err(format!("containers {:?}", names(&d)))
        }
    })
    .await?;
    let ann = d.spec.and_then(|s| s.template.metadata).and_then(|m| m.annotations).unwrap_or_default();
    assert_eq!(ann.get("kubectl.kubernetes.io/restartedAt").map(String::as_str), Some("now"));
    assert_eq!(host.metric("kwop_write_errors_total", &[])?, 0.0, "{}", host.log());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_reacts_at_once_when_an_object_it_read_changes() -> anyhow::Result<()> {
    let s = setup("heal-reads").await?;
    // The Deployment is nobody's child here: the plugin only reads it (there is no
    // controller-manager on this plane, so its status is what the test writes).
    let deployments: Api<Deployment> = Api::namespaced(s.client.clone(), &s.ns);
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "backend" },
        "spec": { "selector": { "matchLabels": { "app": "b" } }, "template": {
            "metadata": { "labels": { "app": "b" } }, "spec": { "containers": [{ "name": "c", "image": "busybox" }] } } }
    }))?;
    deployments.create(&PostParams::default(), &d).await?;
    create_heal(&s.client, &s.ns, "reader", json!({ "deployment": "backend" })).await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.ns);
    let copied = |want: &'static str| {
        let configmaps = configmaps.clone();
        move || {
            let configmaps = configmaps.clone();
            async move {
                let cm = configmaps.get_opt("reader").await.map_err(|e| e.to_string())?;
                let got = cm.and_then(|c| c.data).and_then(|d| d.get("availableReplicas").cloned());
                if got.as_deref() == Some(want) {
                    Ok(Some(()))
                } else {
                    Err(format!("availableReplicas {got:?}"))
                }
            }
        }
    };
    wait::until("the ConfigMap to say unknown", Duration::from_secs(30), copied("unknown")).await?;

    for n in [2, 3] {
        let status = json!({ "status": { "availableReplicas": n, "replicas": n, "readyReplicas": n } });
        deployments.patch_status("backend", &PatchParams::default(), &Patch::Merge(&status)).await?;
        let changed = Instant::now();
        let want: &'static str = if n == 2 { "2" } else { "3" };
        // Within a second, as the issue asks (measured here at ~0.1 s); a resync (10 minutes
        // away) cannot be the cause.
        wait::until("the ConfigMap to follow the Deployment's status", Duration::from_secs(1), copied(want)).await?;
        eprintln!("read change → ConfigMap updated in {:?}", changed.elapsed());
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_typing_error_answered_as_a_500_becomes_a_warning_event_and_is_not_retried() -> anyhow::Result<()> {
    let s = setup("heal-typed").await?;
    create_heal(&s.client, &s.ns, "typed", json!({ "mode": "typed-error" })).await?;
    let ev = event_with_reason(&s.client, &s.ns, "typed", "WriteFailed").await?;
    let note = ev.note.unwrap_or_default();
    assert!(note.contains("expected string"), "the API server's own message reaches the event: {note}");
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    // Not retried quietly forever: the same intent would fail again, so the host waits for a
    // change. (The Service created by the first reconcile is such a change: it may reconcile
    // once more, and fail the same way, then nothing.)
    tokio::time::sleep(Duration::from_secs(2)).await;
    let errors = s.host.metric("kwop_write_errors_total", &[])?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = s.host.metric("kwop_write_errors_total", &[])?;
    assert!(
        (1.0..=2.0).contains(&errors) && later == errors,
        "no retry loop: {errors} then {later}:\n{}",
        s.host.log()
    );
    // Fixing the object (a change) reconciles it again, and it converges.
    let fix = json!({ "spec": { "mode": null } });
    heals(&s.client, &s.ns).patch("typed", &PatchParams::default(), &Patch::Merge(&fix)).await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.ns);
    wait::until("the fixed ConfigMap", Duration::from_secs(30), || async {
        let cm = configmaps.get_opt("typed").await.map_err(|e| e.to_string())?;
        Ok(cm.and_then(|c| c.data).filter(|d| d.contains_key("availableReplicas")).map(|_| ()))
    })
    .await?;
    Ok(())
}
