//! The config-sync example plugin (examples/config-sync, `kwop:reconciler@0.2`) on a real control
//! plane: a cluster-scoped ConfigSync keeps a copy of a ConfigMap or Secret in every namespace its
//! label selector picks — a namespace labelled later gets one, one whose label goes loses it, a
//! hand edit is undone, a source change propagates, an object config-sync did not create is never
//! touched (condition and event), deleting the ConfigSync deletes every copy through its finalizer,
//! and a Secret's data appears in no event, log line or status. As a ReconcilerPlugin, its grants
//! bound where copies go, and a grant without `acrossNamespaces` is refused. On namespace-sharded
//! replicas (the API server slicing their watches), it still sees and keeps every copy.

mod common;

use base64::Engine as _;
use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use kwop_tests::shards::{self, Ring};
use kwop_tests::{plugins, wait, ControlPlane, Host, Mode};
use serde_json::{json, Value};
use std::time::Duration;

const WITHIN: Duration = Duration::from_secs(60);
const SECRET_VALUE: &str = "hunter2-do-not-leak-7f3c";

/// One host at a time in this file: each watches every namespace.
static ONE_HOST: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn syncs(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk("examples.kwop.dev", "v1alpha1", "ConfigSync")),
    )
}

async fn create_sync(
    client: &Client,
    name: &str,
    kind: &str,
    ns: &str,
    source: &str,
    label: &str,
) -> anyhow::Result<()> {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "examples.kwop.dev/v1alpha1", "kind": "ConfigSync", "metadata": { "name": name },
        "spec": {
            "source": { "kind": kind, "namespace": ns, "name": source },
            "namespaceSelector": { "matchLabels": { label: "yes" } },
        }
    }))?;
    syncs(client).create(&PostParams::default(), &obj).await?;
    Ok(())
}

async fn label_ns(client: &Client, ns: &str, label: &str, on: bool) -> anyhow::Result<()> {
    let value = if on { json!("yes") } else { Value::Null };
    let api: Api<Namespace> = Api::all(client.clone());
    api.patch(ns, &PatchParams::default(), &Patch::Merge(json!({ "metadata": { "labels": { label: value } } })))
        .await?;
    Ok(())
}

async fn gone<K>(api: &Api<K>, name: &str, what: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    wait::until(what, WITHIN, || async {
        Ok(api.get_opt(name).await.map_err(|e| e.to_string())?.is_none().then_some(()))
    })
    .await
}

fn data_is(c: &ConfigMap, v: &str) -> bool {
    c.data.as_ref().and_then(|d| d.get("setting")).map(String::as_str) == Some(v)
}

async fn sync_status_where(
    client: &Client,
    name: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    let api = syncs(client);
    wait::until(&format!("ConfigSync {name}: {what}"), WITHIN, || async {
        let s = api.get(name).await.map_err(|e| e.to_string())?.data["status"].clone();
        if pred(&s) {
            Ok(Some(s))
        } else {
            Err(format!("status {s}"))
        }
    })
    .await
}

fn ready(s: &Value) -> Option<&Value> {
    s["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready")
}

/// One test's world: the shared plane, a source namespace, `targets` namespaces, and a label key
/// of its own (the plane is shared: other tests' namespaces never match).
struct World {
    plane: &'static ControlPlane,
    client: Client,
    src: String,
    targets: Vec<String>,
    label: String,
}

async fn world(prefix: &str, targets: usize) -> anyhow::Result<World> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let src = plane.namespace(&format!("{prefix}-src"))?;
    let targets = (1..=targets).map(|i| plane.namespace(&format!("{prefix}-t{i}"))).collect::<anyhow::Result<_>>()?;
    Ok(World { plane, client, label: format!("cs-{src}"), src, targets })
}

/// The source ConfigMap `settings` with `setting: 1`.
async fn source_settings(client: &Client, src: &str) -> anyhow::Result<()> {
    let source: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "settings" }, "data": { "setting": "1" } }))?;
    Api::<ConfigMap>::namespaced(client.clone(), src).create(&PostParams::default(), &source).await?;
    Ok(())
}

/// Events about a cluster-scoped object (the host records them in `default`).
async fn sync_events(client: &Client, name: &str) -> anyhow::Result<Vec<k8s_openapi::api::events::v1::Event>> {
    events_for(client, "default", name).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_configmap_is_kept_in_every_selected_namespace_and_cleaned_up_on_deletion() -> anyhow::Result<()> {
    keeps_copies(plugins::CONFIG_SYNC, "cs").await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_configmap_is_kept_in_every_selected_namespace_and_cleaned_up_on_deletion_in_go() -> anyhow::Result<()> {
    let wasm = kwop_tests::go_plugins::build("examples/config-sync/go")?;
    keeps_copies(&wasm.display().to_string(), "csgo").await
}

/// The same cases for the TypeScript config-sync (examples/config-sync/ts, built once per test
/// process by its own build.sh, cached by a hash of its sources).
#[tokio::test(flavor = "multi_thread")]
async fn a_configmap_is_kept_in_every_selected_namespace_and_cleaned_up_on_deletion_in_typescript() -> anyhow::Result<()>
{
    let wasm = kwop_tests::js_plugins::build("examples/config-sync/ts", "config-sync-ts")?;
    keeps_copies(&wasm.display().to_string(), "csts").await
}

/// Every case the config-sync example must pass, whatever language `wasm` was written in: copies
/// in the selected namespaces, a namespace labelled later, a label removed, a hand edit undone, a
/// source change propagated, someone else's object left alone, deletion through the finalizer.
async fn keeps_copies(wasm: &str, prefix: &str) -> anyhow::Result<()> {
    let _one = ONE_HOST.lock().await;
    let World { plane, client, src, targets, label } = world(prefix, 4).await?;
    let [t1, t2, t3, t4] = <[String; 4]>::try_from(targets).map_err(|_| anyhow::anyhow!("four namespaces"))?;
    for t in [&t1, &t2] {
        label_ns(&client, t, &label, true).await?;
    }
    source_settings(&client, &src).await?;
    // t4 already holds a ConfigMap of that name that config-sync did not create.
    let theirs: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "settings" }, "data": { "setting": "theirs" } }))?;
    Api::<ConfigMap>::namespaced(client.clone(), &t4).create(&PostParams::default(), &theirs).await?;

    let dir = plugins::folder(&[("config-sync.wasm", wasm)])?;
    let host = host(plane, &dir, &["--resync-period=10m"])?;
    let name = format!("sync-{src}");
    create_sync(&client, &name, "ConfigMap", &src, "settings", &label).await?;

    // Copies in the labelled namespaces, none elsewhere; the ConfigSync carries the finalizer.
    for t in [&t1, &t2] {
        let c = configmap_where(&client, t, "settings", "a copy", |c| data_is(c, "1")).await?;
        let labels = c.metadata.labels.unwrap_or_default();
        assert_eq!(labels.get("kwop.dev/plugin").map(String::as_str), Some("config-sync"));
    }
    let cs = syncs(&client).get(&name).await?;
    assert_eq!(cs.metadata.finalizers.clone().unwrap_or_default(), ["kwop.dev/config-sync"]);
    let s = sync_status_where(&client, &name, "synced 2, Ready", |s| {
        s["synced"] == 2 && ready(s).is_some_and(|r| r["status"] == "True")
    })
    .await?;
    assert_eq!(s["observedGeneration"], cs.metadata.generation.unwrap_or_default());
    assert!(Api::<ConfigMap>::namespaced(client.clone(), &t3).get_opt("settings").await?.is_none());

    // A namespace labelled later gets its copy; one whose label goes loses it.
    label_ns(&client, &t3, &label, true).await?;
    configmap_where(&client, &t3, "settings", "a copy after labelling", |c| data_is(c, "1")).await?;
    label_ns(&client, &t1, &label, false).await?;
    gone(&Api::<ConfigMap>::namespaced(client.clone(), &t1), "settings", "the copy in the unlabelled namespace")
        .await?;

    // A copy edited by hand is restored; a change of the source reaches every copy.
    let pp = PatchParams { field_manager: Some("kubectl-edit".into()), ..PatchParams::default() };
    Api::<ConfigMap>::namespaced(client.clone(), &t2)
        .patch("settings", &pp, &Patch::Merge(json!({ "data": { "setting": "edited" } })))
        .await?;
    configmap_where(&client, &t2, "settings", "the hand edit undone", |c| data_is(c, "1")).await?;
    Api::<ConfigMap>::namespaced(client.clone(), &src)
        .patch("settings", &PatchParams::default(), &Patch::Merge(json!({ "data": { "setting": "2" } })))
        .await?;
    for t in [&t2, &t3] {
        configmap_where(&client, t, "settings", "the source's new data", |c| data_is(c, "2")).await?;
    }

    // Someone else's ConfigMap is never overwritten: a condition and an event say so.
    label_ns(&client, &t4, &label, true).await?;
    let s = sync_status_where(&client, &name, "the conflict reported", |s| {
        s["conflicts"] == json!([t4]) && ready(s).is_some_and(|r| r["status"] == "False" && r["reason"] == "Conflict")
    })
    .await?;
    assert_eq!(s["synced"], 2, "{s}");
    let evs = sync_events(&client, &name).await?;
    let conflict = evs.iter().find(|e| e.reason.as_deref() == Some("ErrResourceExists"));
    assert!(conflict.is_some_and(|e| e.note.as_deref().unwrap_or_default().contains(&t4)), "{evs:?}");
    let t4_cm = Api::<ConfigMap>::namespaced(client.clone(), &t4).get("settings").await?;
    assert!(data_is(&t4_cm, "theirs"), "not overwritten: {:?}", t4_cm.data);
    assert!(t4_cm.metadata.labels.unwrap_or_default().keys().all(|k| !k.starts_with("kwop.dev/")), "not adopted");

    // Deleting the ConfigSync deletes every copy (its finalizer), and only those.
    syncs(&client).delete(&name, &DeleteParams::default()).await?;
    gone(&syncs(&client), &name, "the ConfigSync").await?;
    for t in [&t2, &t3] {
        gone(&Api::<ConfigMap>::namespaced(client.clone(), t), "settings", "a copy after the ConfigSync's deletion")
            .await?;
    }
    assert!(Api::<ConfigMap>::namespaced(client.clone(), &t4).get_opt("settings").await?.is_some(), "theirs stays");
    assert!(
        Api::<ConfigMap>::namespaced(client.clone(), &src).get_opt("settings").await?.is_some(),
        "the source stays"
    );
    assert_eq!(host.metric("kwop_finalize_total", &[("result", "done")])?, 1.0);
    assert_eq!(host.metric("kwop_outcomes_rejected_total", &[])?, 0.0, "{}", host.log());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secrets_data_is_copied_and_appears_nowhere_else() -> anyhow::Result<()> {
    let _one = ONE_HOST.lock().await;
    let World { plane, client, src, targets, label } = world("cs-secret", 2).await?;
    let (t1, t2) = (targets[0].clone(), targets[1].clone());
    label_ns(&client, &t1, &label, true).await?;
    // t2 holds someone else's Secret of that name: the conflict is reported without its data.
    let encoded = base64::engine::general_purpose::STANDARD.encode(SECRET_VALUE);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": "creds" }, "type": "Opaque", "data": { "password": encoded }
    }))?;
    Api::<Secret>::namespaced(client.clone(), &src).create(&PostParams::default(), &secret).await?;
    Api::<Secret>::namespaced(client.clone(), &t2).create(&PostParams::default(), &secret).await?;
    label_ns(&client, &t2, &label, true).await?;

    let dir = plugins::folder(&[("config-sync.wasm", plugins::CONFIG_SYNC)])?;
    let host = Host::start_with_env(
        common::KWOP,
        plane,
        &plane.kubeconfig,
        &dir,
        &["--resync-period=10m"],
        &[("KWOP_LOG", "debug")],
        true,
    )?;
    let name = format!("secret-sync-{src}");
    create_sync(&client, &name, "Secret", &src, "creds", &label).await?;
    let copies: Api<Secret> = Api::namespaced(client.clone(), &t1);
    wait::until("the Secret copied", WITHIN, || async {
        let s = copies.get_opt("creds").await.map_err(|e| e.to_string())?;
        Ok(s.filter(|s| {
            s.data.as_ref().and_then(|d| d.get("password")).is_some_and(|p| p.0 == SECRET_VALUE.as_bytes())
        }))
    })
    .await?;
    let status = sync_status_where(&client, &name, "the conflict in t2", |s| s["conflicts"] == json!([t2])).await?;
    // Events are recorded off the reconcile path: the status may land first.
    let evs = wait::until("an event about the conflict", WITHIN, || async {
        let evs = sync_events(&client, &name).await.map_err(|e| e.to_string())?;
        Ok((!evs.is_empty()).then_some(evs))
    })
    .await?;
    syncs(&client).delete(&name, &DeleteParams::default()).await?;
    gone(&copies, "creds", "the copied Secret after the ConfigSync's deletion").await?;

    // Nowhere but in the Secrets themselves: not the status, not an event, not the host's log
    // (at debug level), not the ConfigSync.
    let text = format!(
        "{status}\n{}\n{}",
        serde_json::to_string(&evs)?,
        serde_json::to_string(
            &Api::<k8s_openapi::api::events::v1::Event>::all(client.clone()).list(&ListParams::default()).await?
        )?
    );
    for needle in [SECRET_VALUE, encoded.as_str()] {
        assert!(!text.contains(needle), "secret data in the status or an event");
        assert!(!host.log().contains(needle), "secret data in the host's log");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn as_a_reconciler_plugin_its_grants_bound_where_copies_go() -> anyhow::Result<()> {
    let _one = ONE_HOST.lock().await;
    let World { plane, client, src, targets, label } = world("cs-rp", 2).await?;
    let (t1, t2) = (targets[0].clone(), targets[1].clone());
    for t in [&t1, &t2] {
        label_ns(&client, t, &label, true).await?;
    }
    source_settings(&client, &src).await?;
    let plugin: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "plugins" },
        "binaryData": { "config-sync.wasm": base64::engine::general_purpose::STANDARD.encode(std::fs::read(plugins::CONFIG_SYNC)?) },
    }))?;
    Api::<ConfigMap>::namespaced(client.clone(), &src).create(&PostParams::default(), &plugin).await?;
    let grants = |across: bool, namespaces: Value| {
        json!({
            "primary": { "apiVersion": "examples.kwop.dev/v1alpha1", "kind": "ConfigSync" },
            "owns": [
                { "apiVersion": "v1", "kind": "ConfigMap", "acrossNamespaces": across },
                { "apiVersion": "v1", "kind": "Secret", "acrossNamespaces": across },
            ],
            "reads": [{ "apiVersion": "v1", "kind": "Namespace" }],
            "namespaces": namespaces,
        })
    };
    let source_spec = json!({ "configMap": { "name": "plugins", "key": "config-sync.wasm" } });
    // Without acrossNamespaces the plugin asks for more than it is granted: not started.
    let rp = format!("config-sync-{src}");
    rp::apply_rp(&client, &rp, &src, json!({ "source": source_spec, "grants": grants(false, json!([src, t1])) }))
        .await?;
    let _host = Host::start_reconciler_plugins(
        common::KWOP,
        plane,
        &plane.kubeconfig,
        &[&format!("--reconciler-plugin-selector=kwop.dev/test={src}"), &format!("--system-namespace={src}")],
        &[],
        true,
    )?;
    let s = rp::status_where(&client, &rp, "Forbidden", WITHIN, |s| rp::degraded(s) == Some("Forbidden")).await?;
    assert!(s.last_error.unwrap_or_default().contains("across namespaces"));

    // Granted across, in the source's namespace and t1 only: t2 is selected but never written.
    rp::apply_rp(&client, &rp, &src, json!({ "source": source_spec, "grants": grants(true, json!([src, t1])) }))
        .await?;
    rp::status_where(&client, &rp, "Ready", WITHIN, rp::ready).await?;
    let name = format!("rp-sync-{src}");
    create_sync(&client, &name, "ConfigMap", &src, "settings", &label).await?;
    configmap_where(&client, &t1, "settings", "the copy where granted", |c| data_is(c, "1")).await?;
    sync_status_where(&client, &name, "synced 1", |s| s["synced"] == 1).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        Api::<ConfigMap>::namespaced(client.clone(), &t2).get_opt("settings").await?.is_none(),
        "t2 is not granted"
    );
    let writes: Vec<_> = plane.audited("kwop/").into_iter().filter(|w| w.namespace == t2).collect();
    assert!(writes.is_empty(), "{writes:?}");
    let in_t1 = plane.audited("kwop/").into_iter().filter(|w| w.namespace == t1 && w.resource == "configmaps").count();
    assert!(in_t1 > 0, "positive control: the audit log sees the copy written in t1");
    syncs(&client).delete(&name, &DeleteParams::default()).await?;
    gone(&syncs(&client), &name, "the ConfigSync").await?;
    gone(&Api::<ConfigMap>::namespaced(client.clone(), &t1), "settings", "its copy").await?;
    rp::rps(&client).delete(&rp, &DeleteParams::default()).await?;
    Ok(())
}

/// Three replicas with `--sharding=namespace`, their watches sliced by the API server: the
/// ConfigSync (cluster-scoped) is reconciled by one of them, while its source and copies live in
/// namespaces the others hold. ConfigMaps are owned across namespaces, so every replica caches
/// them whole (a slice would hide the source and the copies elsewhere: copies never made, hand
/// edits never seen, copies stranded on deletion).
#[tokio::test(flavor = "multi_thread")]
async fn on_namespace_sharded_replicas_it_keeps_copies_in_namespaces_the_others_hold() -> anyhow::Result<()> {
    let _one = ONE_HOST.lock().await;
    let plane = ControlPlane::start_with(Mode::Api, &["--feature-gates=ShardedListAndWatch=true"])?;
    let client = plane.client().await?;
    let leases = plane.namespace("kwop-system")?;
    let src = plane.namespace("sharded-src")?;
    let targets = shards::namespaces(&plane, "sharded-t", 6)?;
    let label = "cs-sharded";
    for t in &targets {
        label_ns(&client, t, label, true).await?;
    }
    source_settings(&client, &src).await?;
    let dir = plugins::folder(&[("config-sync.wasm", plugins::CONFIG_SYNC)])?;
    let flags = vec![
        "--sharding=namespace".to_string(),
        format!("--leader-election-namespace={leases}"),
        "--resync-period=10m".into(),
    ];
    let mut ring = Ring::new(&plane, common::KWOP, &dir, flags);
    for r in ["a", "b", "c"] {
        ring.add(r)?;
    }
    ring.settled(Duration::from_secs(30)).await?;
    let name = "sharded-sync";
    create_sync(&client, name, "ConfigMap", &src, "settings", label).await?;
    for t in &targets {
        configmap_where(&client, t, "settings", "a copy", |c| data_is(c, "1")).await?;
    }
    sync_status_where(&client, name, "synced 6", |s| s["synced"] == 6).await?;

    // Hand edits anywhere are undone; a namespace unlabelled loses its copy; the source's
    // change reaches the rest; deleting the ConfigSync deletes every copy.
    let pp = PatchParams { field_manager: Some("kubectl-edit".into()), ..PatchParams::default() };
    for t in &targets {
        Api::<ConfigMap>::namespaced(client.clone(), t)
            .patch("settings", &pp, &Patch::Merge(json!({ "data": { "setting": "edited" } })))
            .await?;
    }
    for t in &targets {
        configmap_where(&client, t, "settings", "the hand edit undone", |c| data_is(c, "1")).await?;
    }
    label_ns(&client, &targets[0], label, false).await?;
    gone(&Api::<ConfigMap>::namespaced(client.clone(), &targets[0]), "settings", "the unlabelled copy").await?;
    Api::<ConfigMap>::namespaced(client.clone(), &src)
        .patch("settings", &PatchParams::default(), &Patch::Merge(json!({ "data": { "setting": "2" } })))
        .await?;
    for t in &targets[1..] {
        configmap_where(&client, t, "settings", "the source's new data", |c| data_is(c, "2")).await?;
    }
    // Every replica's ConfigMap cache holds the cluster's every ConfigMap, sliced as the Foos
    // would be or not: the API server slices, and ConfigMaps were asked for whole.
    let all = Api::<ConfigMap>::all(client.clone());
    wait::until("every replica caching every ConfigMap", WITHIN, || async {
        let n = all.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items.len() as u64;
        let shards = ring.shards();
        let whole = shards.values().all(|s| s["serverSide"] == true && s["cachedObjects"]["v1/ConfigMap"] == n);
        if whole {
            Ok(Some(()))
        } else {
            Err(format!("{n} ConfigMaps; {shards:#?}"))
        }
    })
    .await?;

    syncs(&client).delete(name, &DeleteParams::default()).await?;
    gone(&syncs(&client), name, "the ConfigSync").await?;
    for t in &targets[1..] {
        gone(&Api::<ConfigMap>::namespaced(client.clone(), t), "settings", "a copy after the deletion").await?;
    }
    for (n, h) in &ring.hosts {
        assert!(h.log().contains("sharded watch: whole"), "{n} says the ConfigMap watch is whole: {}", h.log());
    }
    Ok(())
}
