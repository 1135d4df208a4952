//! The deletion lifecycle of `kwop:reconciler@0.2` on a real control plane, with the finalizer
//! test plugin (tests/plugins/finalizer): its `Fin` objects get ConfigMap copies in other
//! namespaces (a kind owned across namespaces, tracked by labels), the finalizer `kwop.dev/finalizer`
//! is on a Fin before anything is written for it, `finalize` cleans up once per deletion, and a
//! `finalize` that fails, traps or oversteps is visible while the deletion waits.

mod common;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use kwop_tests::{plugins, wait, ControlPlane, Host, Mode};
use serde_json::{json, Value};
use std::time::Duration;

const FINALIZER: &str = "kwop.dev/finalizer";
const WITHIN: Duration = Duration::from_secs(60);

fn fins(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("test.kwop.dev", "v1", "Fin")),
    )
}

async fn create_fin(client: &Client, ns: &str, name: &str, spec: Value) -> anyhow::Result<DynamicObject> {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "test.kwop.dev/v1", "kind": "Fin", "metadata": { "name": name }, "spec": spec
    }))?;
    Ok(fins(client, ns).create(&PostParams::default(), &obj).await?)
}

/// One host at a time: each watches Fins in every namespace (their copies live elsewhere), and
/// two hosts running one plugin without leader election would both finalize every Fin.
static ONE_HOST: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Setup {
    plane: &'static ControlPlane,
    /// The Fins' namespace.
    ns: String,
    /// Where their copies go.
    b: String,
    c: String,
    client: Client,
    host: Host,
    /// Released after the host is stopped (fields drop in order).
    _one: tokio::sync::MutexGuard<'static, ()>,
}

/// The finalizer plugin in a host watching every namespace (copies live elsewhere).
async fn setup(test: &str) -> anyhow::Result<Setup> {
    let one = ONE_HOST.lock().await;
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace(test)?;
    let (b, c) = (plane.namespace(&format!("{test}-b"))?, plane.namespace(&format!("{test}-c"))?);
    let dir = plugins::folder(&[("finalizer.wasm", plugins::FINALIZER)])?;
    let host = host(plane, &dir, &["--resync-period=10m"])?;
    let client = plane.client().await?;
    Ok(Setup { plane, ns, b, c, client, host, _one: one })
}

fn finalizers(o: &DynamicObject) -> Vec<String> {
    o.metadata.finalizers.clone().unwrap_or_default()
}

async fn copy_gone(client: &Client, ns: &str, name: &str, what: &str) -> anyhow::Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    wait::until(what, WITHIN, || async {
        Ok(api.get_opt(name).await.map_err(|e| e.to_string())?.is_none().then_some(()))
    })
    .await
}

async fn fin_gone(client: &Client, ns: &str, name: &str) -> anyhow::Result<()> {
    let api = fins(client, ns);
    wait::until(&format!("Fin {name} gone"), WITHIN, || async {
        match api.get_opt(name).await.map_err(|e| e.to_string())? {
            None => Ok(Some(())),
            Some(f) => Err(format!("still there, finalizers {:?}", finalizers(&f))),
        }
    })
    .await
}

fn reasons(evs: &[k8s_openapi::api::events::v1::Event], reason: &str) -> usize {
    evs.iter().filter(|e| e.reason.as_deref() == Some(reason)).count()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_finalizer_is_on_before_the_first_write_and_off_after_finalize() -> anyhow::Result<()> {
    let s = setup("fin-life").await?;
    let fin = create_fin(&s.client, &s.ns, "f1", json!({ "elsewhere": [s.b, s.c] })).await?;
    let uid = fin.metadata.uid.clone().unwrap_or_default();
    // Copies in both other namespaces, tracked by the host's labels (no owner reference).
    for ns in [&s.b, &s.c] {
        let copy = configmap_where(&s.client, ns, "f1", "a tracked copy", |c| {
            c.metadata.labels.as_ref().and_then(|l| l.get("kwop.dev/owner-uid")) == Some(&uid)
        })
        .await?;
        let labels = copy.metadata.labels.unwrap_or_default();
        assert_eq!(labels.get("kwop.dev/plugin").map(String::as_str), Some("finalizer"));
        let owner = copy.metadata.annotations.unwrap_or_default().get("kwop.dev/owner").cloned();
        assert_eq!(owner, Some(format!("{}/f1", s.ns)));
        assert!(copy.metadata.owner_references.unwrap_or_default().is_empty(), "no owner reference across namespaces");
    }
    let f = fins(&s.client, &s.ns).get("f1").await?;
    assert_eq!(finalizers(&f), [FINALIZER]);
    assert_eq!(f.data["status"]["copies"], 2);
    assert_eq!(f.data["status"]["conditions"][0]["type"], "Ready");

    // The API server saw the finalizer patch before any write of a copy.
    let writes: Vec<_> = s.plane.audited("kwop/").into_iter().filter(|w| w.field_manager == "kwop-finalizer").collect();
    let first_fin = writes.iter().position(|w| w.resource == "fins" && w.name == "f1" && w.namespace == s.ns);
    let first_copy = writes.iter().position(|w| w.resource == "configmaps" && w.name == "f1");
    assert!(first_fin.is_some() && first_copy.is_some(), "{writes:?}");
    assert!(first_fin < first_copy, "the finalizer comes first: {writes:?}");
    assert_eq!(writes[first_fin.unwrap_or_default()].verb, "patch");

    // A copy edited by hand is put back; one whose namespace is dropped is deleted.
    let copies_b: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.b);
    let pp = PatchParams { field_manager: Some("kubectl-edit".into()), ..PatchParams::default() };
    copies_b.patch("f1", &pp, &Patch::Merge(json!({ "data": { "from": "someone" } }))).await?;
    configmap_where(&s.client, &s.b, "f1", "the hand edit undone", |c| {
        c.data.as_ref().and_then(|d| d.get("from")).map(String::as_str) == Some("f1")
    })
    .await?;
    fins(&s.client, &s.ns)
        .patch("f1", &PatchParams::default(), &Patch::Merge(json!({ "spec": { "elsewhere": [s.b] } })))
        .await?;
    copy_gone(&s.client, &s.c, "f1", "the copy in the dropped namespace deleted").await?;

    // Deleting the Fin: finalize deletes the last copy, then the finalizer goes, then the Fin.
    fins(&s.client, &s.ns).delete("f1", &DeleteParams::default()).await?;
    fin_gone(&s.client, &s.ns, "f1").await?;
    copy_gone(&s.client, &s.b, "f1", "the last copy deleted by finalize").await?;
    let evs = events_for(&s.client, &s.ns, "f1").await?;
    assert_eq!(reasons(&evs, "Finalized"), 1, "{evs:?}");
    assert_eq!(s.host.metric("kwop_finalize_total", &[("result", "done")])?, 1.0);
    // Its finalizer came off after the copy's deletion (deletes carry no field manager).
    let writes: Vec<_> = s.plane.audited("kwop/").into_iter().filter(|w| w.name == "f1").collect();
    let deleted = writes.iter().rposition(|w| w.verb == "delete" && w.namespace == s.b);
    let released = writes.iter().rposition(|w| w.resource == "fins" && w.name == "f1");
    assert!(deleted.is_some() && deleted < released, "{writes:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn finalize_completes_once_per_deletion_woken_by_its_own_deletions() -> anyhow::Result<()> {
    let s = setup("fin-once").await?;
    let names: Vec<String> = (0..5).map(|i| format!("slow-{i}")).collect();
    for n in &names {
        create_fin(&s.client, &s.ns, n, json!({ "elsewhere": [s.b], "finalize": "slow" })).await?;
    }
    for n in &names {
        configmap_where(&s.client, &s.b, n, "a copy", |_| true).await?;
    }
    for n in &names {
        fins(&s.client, &s.ns).delete(n, &DeleteParams::default()).await?;
    }
    // `slow` says not yet (retry in 10 minutes) until its copy is gone: each deletion completes
    // only because the copy's deletion wakes the Fin again.
    for n in &names {
        fin_gone(&s.client, &s.ns, n).await?;
        copy_gone(&s.client, &s.b, n, "the copy").await?;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    for n in &names {
        let evs = events_for(&s.client, &s.ns, n).await?;
        assert_eq!(reasons(&evs, "Finalized"), 1, "{n}: {evs:?}");
    }
    let done = s.host.metric("kwop_finalize_total", &[("result", "done")])?;
    let log: Vec<String> = s.host.log().lines().filter(|l| l.contains("finaliz")).map(str::to_string).collect();
    assert_eq!(done, names.len() as f64, "{}", log.join("\n"));
    assert!(s.host.metric("kwop_finalize_total", &[("result", "pending")])? >= names.len() as f64);
    assert_eq!(s.host.metric("kwop_finalize_total", &[("result", "error")])?, 0.0, "{}", s.host.log());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_finalize_is_visible_and_the_deletion_waits_until_it_is_fixed() -> anyhow::Result<()> {
    let s = setup("fin-fail").await?;
    create_fin(&s.client, &s.ns, "fails", json!({ "elsewhere": [s.b], "finalize": "fail" })).await?;
    create_fin(&s.client, &s.ns, "traps", json!({ "elsewhere": [s.b], "finalize": "trap" })).await?;
    for n in ["fails", "traps"] {
        configmap_where(&s.client, &s.b, n, "a copy", |_| true).await?;
        fins(&s.client, &s.ns).delete(n, &DeleteParams::default()).await?;
    }
    // Visible: a Warning event, the condition Finalized=False with the reason, the metric.
    let e = event_with_reason(&s.client, &s.ns, "fails", "FinalizeFailed").await?;
    assert!(e.note.unwrap_or_default().contains("cannot clean up yet"));
    let e = event_with_reason(&s.client, &s.ns, "traps", "FinalizeFailed").await?;
    assert!(e.note.unwrap_or_default().contains("finalize exploded"));
    let api = fins(&s.client, &s.ns);
    let f = wait::until("the Finalized condition", WITHIN, || async {
        let f = api.get("fails").await.map_err(|e| e.to_string())?;
        let conds = f.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
        match conds.iter().find(|c| c["type"] == "Finalized") {
            Some(c) if c["status"] == "False" && c["reason"] == "FinalizeFailed" => Ok(Some(f)),
            _ => Err(format!("conditions {conds:?}")),
        }
    })
    .await?;
    assert!(f.metadata.deletion_timestamp.is_some() && finalizers(&f) == [FINALIZER], "the deletion waits");
    assert!(s.host.metric("kwop_finalize_total", &[("result", "failure")])? >= 1.0);
    assert!(s.host.metric("kwop_finalize_total", &[("result", "error")])? >= 1.0);
    let copies: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.b);
    assert!(copies.get_opt("fails").await?.is_some(), "nothing was deleted on a failure");

    // Fixed (a terminating object's spec can still change): the deletions complete.
    for n in ["fails", "traps"] {
        api.patch(n, &PatchParams::default(), &Patch::Merge(json!({ "spec": { "finalize": "ok" } }))).await?;
    }
    for n in ["fails", "traps"] {
        fin_gone(&s.client, &s.ns, n).await?;
        copy_gone(&s.client, &s.b, n, "the copy").await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_finalize_that_never_finishes_is_said_after_the_patience() -> anyhow::Result<()> {
    let _one = ONE_HOST.lock().await;
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("fin-never")?;
    let dir = plugins::folder(&[("finalizer.wasm", plugins::FINALIZER)])?;
    let host = host(plane, &dir, &["--resync-period=10m", "--finalize-patience=3s"])?;
    let client = plane.client().await?;
    create_fin(&client, &ns, "stubborn", json!({ "finalize": "never" })).await?;
    let api = fins(&client, &ns);
    wait::until("the finalizer on", WITHIN, || async {
        Ok(api.get("stubborn").await.map_err(|e| e.to_string())?.metadata.finalizers.filter(|f| !f.is_empty()))
    })
    .await?;
    api.delete("stubborn", &DeleteParams::default()).await?;
    // Not a failure — it keeps saying not yet — but after the patience the deletion is not silent.
    let e = event_with_reason(&client, &ns, "stubborn", "FinalizeWaiting").await?;
    assert!(e.note.unwrap_or_default().contains("keeps saying not yet"));
    let f = wait::until("the Finalized condition", WITHIN, || async {
        let f = api.get("stubborn").await.map_err(|e| e.to_string())?;
        let conds = f.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
        Ok(conds.iter().any(|c| c["type"] == "Finalized" && c["reason"] == "FinalizeWaiting").then_some(f))
    })
    .await?;
    assert_eq!(finalizers(&f), [FINALIZER], "still waiting");
    assert!(host.metric("kwop_finalize_total", &[("result", "pending")])? >= 2.0);
    // The way out for an admin (docs/cluster-admins.md): the finalizer by hand.
    let patch = json!([{ "op": "remove", "path": "/metadata/finalizers/0" }]);
    api.patch("stubborn", &PatchParams::default(), &Patch::Json::<()>(serde_json::from_value(patch)?)).await?;
    fin_gone(&client, &ns, "stubborn").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn finalize_cannot_delete_what_is_not_its_own() -> anyhow::Result<()> {
    let s = setup("fin-fence").await?;
    let cms: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.ns);
    let theirs: ConfigMap = serde_json::from_value(json!({ "metadata": { "name": "theirs" }, "data": { "k": "v" } }))?;
    cms.create(&PostParams::default(), &theirs).await?;
    create_fin(&s.client, &s.ns, "grabby", json!({ "elsewhere": [s.b], "finalize": "foreign", "foreign": "theirs" }))
        .await?;
    create_fin(&s.client, &s.ns, "wider", json!({ "elsewhere": [s.b], "finalize": "undeclared" })).await?;
    for n in ["grabby", "wider"] {
        configmap_where(&s.client, &s.b, n, "a copy", |_| true).await?;
        fins(&s.client, &s.ns).delete(n, &DeleteParams::default()).await?;
    }
    let e = event_with_reason(&s.client, &s.ns, "grabby", "FinalizeFailed").await?;
    assert!(e.note.unwrap_or_default().contains("not controlled by anyone"), "the fence names why");
    let e = event_with_reason(&s.client, &s.ns, "wider", "FinalizeFailed").await?;
    assert!(e.note.unwrap_or_default().contains("not declared in owns"));
    assert!(s.host.metric("kwop_finalize_total", &[("result", "rejected")])? >= 2.0);
    assert!(cms.get_opt("theirs").await?.is_some(), "someone else's ConfigMap survives");
    for n in ["grabby", "wider"] {
        let f = fins(&s.client, &s.ns).get(n).await?;
        assert_eq!(finalizers(&f), [FINALIZER], "{n}: the deletion waits");
    }
    // An admin's way out of a stuck finalizer (docs/cluster-admins.md): remove it by hand.
    for n in ["grabby", "wider"] {
        let patch = json!([{ "op": "remove", "path": "/metadata/finalizers/0" }]);
        fins(&s.client, &s.ns)
            .patch(n, &PatchParams::default(), &Patch::Json::<()>(serde_json::from_value(patch)?))
            .await?;
        fin_gone(&s.client, &s.ns, n).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn plugins_of_0_1_and_0_2_run_unchanged_beside_a_0_3_plugin() -> anyhow::Result<()> {
    let _one = ONE_HOST.lock().await;
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("fin-v01")?;
    let b = plane.namespace("fin-v01-b")?;
    let v01 = plugins::guest_foo_v01();
    // The finalizer as built for 0.2 (finalize and all), guest-foo for 0.1, selfheal on 0.3.
    let fin02 = plugins::wit_0_2("finalizer");
    let dir = plugins::folder(&[
        ("guest-foo.wasm", v01.as_str()),
        ("finalizer.wasm", fin02.as_str()),
        ("selfheal.wasm", plugins::SELFHEAL),
    ])?;
    let host = host(plane, &dir, &[])?;
    let client = plane.client().await?;
    let listed = plugins_json(host.port)?;
    let worlds: Vec<String> = listed["plugins"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["world"].as_str().map(str::to_string))
        .collect();
    assert!(worlds.contains(&"kwop:reconciler@0.1.0".to_string()), "{listed}");
    assert!(worlds.contains(&"kwop:reconciler@0.2.0".to_string()), "{listed}");
    assert!(worlds.contains(&"kwop:reconciler@0.3.0".to_string()), "{listed}");

    create_foo(&client, &ns, "old", "old", Some(2)).await?;
    create_fin(&client, &ns, "new", json!({ "elsewhere": [b] })).await?;
    deployment_where(&client, &ns, "old", "guest-foo 0.1's Deployment", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(2)
    })
    .await?;
    let foo = foo_status_where(&client, &ns, "old", "guest-foo 0.1's status", |s| s["availableReplicas"] == 0).await?;
    assert!(foo.data["status"].get("conditions").is_none(), "0.1 guest-foo reports no conditions");
    assert!(finalizers(&foo).is_empty(), "a 0.1 plugin never finalizes");
    configmap_where(&client, &b, "new", "the 0.2 plugin's copy", |_| true).await?;
    fins(&client, &ns).delete("new", &DeleteParams::default()).await?;
    fin_gone(&client, &ns, "new").await?;
    Ok(())
}

/// Issue 35 (2): narrowing a ReconcilerPlugin's `grants.namespaces` under a plugin that owns
/// ConfigMaps across namespaces. Its copies in the revoked namespace leave what it is shown (they
/// stay where they are: it may not touch them), so its outcomes are not refused as a whole and
/// syncing goes on where it is still granted; its `finalize` completes; and a Fin in the revoked
/// namespace, deleted, has its finalizer released with a Warning event saying why.
#[tokio::test(flavor = "multi_thread")]
async fn narrowing_the_granted_namespaces_neither_wedges_syncing_nor_hangs_deletions() -> anyhow::Result<()> {
    use base64::Engine as _;
    let _one = ONE_HOST.lock().await;
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let a = plane.namespace("fin-narrow")?;
    let (b, c) = (plane.namespace("fin-narrow-b")?, plane.namespace("fin-narrow-c")?);
    let wasm = base64::engine::general_purpose::STANDARD.encode(std::fs::read(plugins::FINALIZER)?);
    let plugin: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "plugins" }, "binaryData": { "finalizer.wasm": wasm },
    }))?;
    Api::<ConfigMap>::namespaced(client.clone(), &a).create(&PostParams::default(), &plugin).await?;
    let spec = |namespaces: &[&String]| {
        json!({
            "source": { "configMap": { "name": "plugins", "key": "finalizer.wasm" } },
            "grants": {
                "primary": { "apiVersion": "test.kwop.dev/v1", "kind": "Fin" },
                "owns": [{ "apiVersion": "v1", "kind": "ConfigMap", "acrossNamespaces": true }],
                "namespaces": namespaces,
            },
        })
    };
    let rp_name = format!("finalizer-{a}");
    rp::apply_rp(&client, &rp_name, &a, spec(&[&a, &b, &c])).await?;
    let host = Host::start_reconciler_plugins(
        KWOP,
        plane,
        &plane.kubeconfig,
        &[&format!("--reconciler-plugin-selector=kwop.dev/test={a}"), &format!("--system-namespace={a}")],
        &[],
        true,
    )?;
    rp::status_where(&client, &rp_name, "Ready", WITHIN, rp::ready).await?;
    create_fin(&client, &a, "narrow-1", json!({ "elsewhere": [b, c] })).await?;
    create_fin(&client, &c, "narrow-2", json!({ "elsewhere": [b] })).await?;
    for (ns, name) in [(&b, "narrow-1"), (&c, "narrow-1"), (&b, "narrow-2")] {
        configmap_where(&client, ns, name, "a copy", |_| true).await?;
    }
    wait::until("narrow-2's finalizer", WITHIN, || async {
        let f = fins(&client, &c).get("narrow-2").await.map_err(|e| e.to_string())?;
        Ok((finalizers(&f) == [FINALIZER]).then_some(()))
    })
    .await?;

    // c is revoked: the running version swaps to the narrower grants.
    rp::apply_rp(&client, &rp_name, &a, spec(&[&a, &b])).await?;
    wait::until("the swap to the narrower grants", WITHIN, || async {
        let n = host.metric("kwop_plugin_swaps_total", &[("plugin", "finalizer")]).map_err(|e| e.to_string())?;
        Ok((n >= 1.0).then_some(()))
    })
    .await?;
    let narrowed = plane.audited("kwop/").len();
    // f1 drops c: its copy there is not its to delete any more, and the rest of its outcome
    // (status: 1 copy) is written, not refused whole (WrongNamespace, every reconcile).
    let drop_c = json!({ "spec": { "elsewhere": [b] } });
    fins(&client, &a).patch("narrow-1", &PatchParams::default(), &Patch::Merge(drop_c)).await?;
    wait::until("narrow-1 synced to one copy", WITHIN, || async {
        let f = fins(&client, &a).get("narrow-1").await.map_err(|e| e.to_string())?;
        match &f.data["status"]["copies"] {
            n if *n == 1 => Ok(Some(())),
            n => Err(format!("status.copies {n}")),
        }
    })
    .await?;
    // The Fin in the revoked namespace, deleted: released, with a Warning saying why.
    fins(&client, &c).delete("narrow-2", &DeleteParams::default()).await?;
    fin_gone(&client, &c, "narrow-2").await?;
    let e = event_with_reason(&client, &c, "narrow-2", "FinalizerReleased").await?;
    assert!(e.note.unwrap_or_default().contains("not among the namespaces"), "the event says why");
    // f1's deletion completes: finalize deletes the copy it is still granted.
    fins(&client, &a).delete("narrow-1", &DeleteParams::default()).await?;
    fin_gone(&client, &a, "narrow-1").await?;
    copy_gone(&client, &b, "narrow-1", "the granted copy deleted by finalize").await?;
    let left: Api<ConfigMap> = Api::namespaced(client.clone(), &c);
    assert!(left.get_opt("narrow-1").await?.is_some(), "the copy in the revoked namespace is left in place");
    // In c, since the narrowing: nothing written but narrow-2's finalizer coming off (and its event).
    let in_c: Vec<_> = plane
        .audited("kwop/")
        .into_iter()
        .skip(narrowed)
        .filter(|w| w.namespace == c && w.resource != "events")
        .collect();
    assert!(in_c.iter().all(|w| w.resource == "fins" && w.name == "narrow-2" && w.verb == "patch"), "{in_c:?}");
    assert_eq!(in_c.len(), 1, "{in_c:?}");
    rp::rps(&client).delete(&rp_name, &DeleteParams::default()).await?;
    Ok(())
}
