//! Hot swap of plugins (issue 5) on a real control plane.

mod common;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams};
use kwop_tests::{plugins, wait, ControlPlane, Mode};
use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;

const V2_ANNOTATION: &str = "samplecontroller.k8s.io/reconciled-by";

fn is_v2(d: &Deployment) -> bool {
    d.metadata.annotations.as_ref().and_then(|a| a.get(V2_ANNOTATION)).map(String::as_str) == Some("guest-foo-v2")
}

async fn wait_version(port: u16, version: &str) -> anyhow::Result<()> {
    wait::until(&format!("active plugin version {version}"), Duration::from_secs(30), || async {
        let v = plugins_json(port).map_err(|e| e.to_string())?;
        let ok = v["plugins"].as_array().into_iter().flatten().any(|p| p["version"] == version);
        Ok(ok.then_some(())).map_err(|_: ()| v.to_string())
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn swapping_v1_to_v2_under_load_converges_every_object_without_errors() -> anyhow::Result<()> {
    let Env { ns, dir, host, client, .. } = guest_foo_env("swap-load", Mode::Api).await?;

    // 200 Foos created and updated continuously while the plugin is swapped, a quarter of the way in.
    let load = FooLoad::start(&client, &ns);
    load.reached(FooLoad::TOTAL / 4).await?;
    plugins::replace(&dir, "guest-foo.wasm", plugins::GUEST_FOO_V2)?;
    wait_version(host.port, "0.1.0-v2").await?;
    // Under load: the writes went on after v2 took over.
    let at_swap = load.done();
    assert!(at_swap < FooLoad::TOTAL, "the load was over before the swap ({at_swap} writes)");
    load.finish().await?;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    wait::until("all 200 Deployments reconciled by v2 with 2 replicas", Duration::from_secs(120), || async {
        let list = deployments.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items;
        let good = list.iter().filter(|d| is_v2(d) && d.spec.as_ref().and_then(|s| s.replicas) == Some(2)).count();
        Ok((good == 200).then_some(())).map_err(|_: ()| format!("{good}/200 ({} exist)", list.len()))
    })
    .await?;
    let foos = foos(&client, &ns).list(&ListParams::default()).await?.items;
    assert_eq!(foos.len(), 200);
    assert!(foos.iter().all(|f| f.data["status"]["availableReplicas"] == 0), "every Foo has its status");
    for bad in ["plugin_error", "plugin_failure", "rejected", "write_error"] {
        assert_eq!(host.metric("kwop_reconcile_total", &[("result", bad)])?, 0.0, "{bad} reconciles");
    }
    assert_eq!(host.metric("kwop_plugin_swaps_total", &[("plugin", "guest-foo")])?, 1.0);
    let m = host.metrics()?;
    assert!(m.contains("version=\"0.1.0-v2\""), "plugin_info carries the active version");
    assert!(!m.contains("version=\"0.1.0\""), "the old version's info is gone");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn corrupt_and_wrong_world_files_are_rejected_and_the_last_good_version_keeps_running() -> anyhow::Result<()> {
    let Env { ns, dir, host, client, .. } = guest_foo_env("swap-bad", Mode::Api).await?;

    let good = std::fs::read(plugins::GUEST_FOO)?;
    let truncated = dir.join(".truncated");
    std::fs::write(&truncated, &good[..good.len() / 3])?;
    std::fs::rename(&truncated, dir.join("guest-foo.wasm"))?;
    wait::until("the truncated file to be rejected", Duration::from_secs(30), || async {
        let n = host
            .metric("kwop_plugin_load_failures_total", &[("reason", "not_a_component")])
            .map_err(|e| e.to_string())?;
        Ok((n >= 1.0).then_some(()))
    })
    .await?;
    let p = plugins_json(host.port)?;
    assert!(
        p["plugins"][0]["last_error"].as_str().unwrap_or_default().contains("not a valid WebAssembly component"),
        "{p}"
    );
    assert_eq!(p["plugins"][0]["version"], "0.1.0", "v1 still active");
    create_foo(&client, &ns, "after-corrupt", "after-corrupt", Some(1)).await?;
    deployment_where(&client, &ns, "after-corrupt", "v1 keeps reconciling", |d| !is_v2(d)).await?;

    plugins::replace(&dir, "guest-foo.wasm", plugins::WRONG_WORLD)?;
    wait::until("the wrong-world component to be rejected", Duration::from_secs(30), || async {
        let n =
            host.metric("kwop_plugin_load_failures_total", &[("reason", "wrong_world")]).map_err(|e| e.to_string())?;
        Ok((n >= 1.0).then_some(()))
    })
    .await?;
    create_foo(&client, &ns, "after-wrong", "after-wrong", Some(1)).await?;
    deployment_where(&client, &ns, "after-wrong", "v1 keeps reconciling", |d| !is_v2(d)).await?;
    assert!(host.log().contains("plugin file rejected, previous version keeps running"));

    // A good file afterwards is picked up as usual.
    plugins::replace(&dir, "guest-foo.wasm", plugins::GUEST_FOO_V2)?;
    deployment_where(&client, &ns, "after-wrong", "v2 reconciles everything again", is_v2).await?;
    Ok(())
}

/// The layout kubelet uses for a ConfigMap volume: files are symlinks through `..data`, which is
/// itself a symlink swapped atomically to a new timestamped folder on update.
fn configmap_layout(dir: &Path, version_dir: &str, src: &str) -> anyhow::Result<()> {
    let vd = dir.join(version_dir);
    std::fs::create_dir_all(&vd)?;
    std::fs::copy(src, vd.join("guest-foo.wasm"))?;
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    symlink(version_dir, &tmp)?;
    std::fs::rename(&tmp, dir.join("..data"))?;
    if std::fs::symlink_metadata(dir.join("guest-foo.wasm")).is_err() {
        symlink("..data/guest-foo.wasm", dir.join("guest-foo.wasm"))?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_configmap_style_data_symlink_swap_is_picked_up() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("swap-configmap")?;
    let dir = plugins::folder(&[])?;
    configmap_layout(&dir, "..2026_12_02_10_00_00.000000001", plugins::GUEST_FOO)?;
    let host = host(plane, &dir, &[&format!("--namespace={ns}")])?;
    let client = plane.client().await?;
    create_foo(&client, &ns, "cm", "cm", Some(1)).await?;
    deployment_where(&client, &ns, "cm", "v1", |d| !is_v2(d)).await?;

    configmap_layout(&dir, "..2026_12_02_10_05_00.000000002", plugins::GUEST_FOO_V2)?;
    std::fs::remove_dir_all(dir.join("..2026_12_02_10_00_00.000000001"))?;
    deployment_where(&client, &ns, "cm", "v2 after the ..data swap", is_v2).await?;
    wait_version(host.port, "0.1.0-v2").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn removing_a_plugin_stops_its_controller_and_deletes_nothing() -> anyhow::Result<()> {
    let Env { ns, dir, host, client, .. } = guest_foo_env("swap-remove", Mode::Api).await?;
    create_foo(&client, &ns, "stays", "stays", Some(1)).await?;
    deployment_where(&client, &ns, "stays", "Deployment", |_| true).await?;

    std::fs::remove_file(dir.join("guest-foo.wasm"))?;
    wait::until("the plugin to be gone", Duration::from_secs(30), || async {
        let v = plugins_json(host.port).map_err(|e| e.to_string())?;
        Ok(v["plugins"].as_array().is_some_and(|a| a.is_empty()).then_some(()))
    })
    .await?;
    create_foo(&client, &ns, "unreconciled", "unreconciled", Some(1)).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    assert!(deployments.get_opt("stays").await?.is_some(), "nothing deleted");
    assert!(deployments.get_opt("unreconciled").await?.is_none(), "no controller any more");
    assert!(host.log().contains("controller stopped"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_swap_that_changes_kinds_rebuilds_the_watches() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("swap-kinds")?;
    let dir = plugins::folder(&[("plugin.wasm", plugins::GUEST_FOO)])?;
    let host = host(plane, &dir, &[&format!("--namespace={ns}")])?;
    let client = plane.client().await?;
    create_foo(&client, &ns, "foo", "foo", Some(1)).await?;
    deployment_where(&client, &ns, "foo", "Deployment", |_| true).await?;

    // Same file, now a plugin of other kinds (Chaos → ConfigMap).
    plugins::replace(&dir, "plugin.wasm", plugins::CHAOS)?;
    plane.kubectl_stdin(
        &["apply", "-n", &ns, "-f", "-"],
        "apiVersion: test.kwop.dev/v1\nkind: Chaos\nmetadata: {name: c1}\nspec: {mode: ok}\n",
    )?;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    wait::until("the chaos plugin to reconcile", Duration::from_secs(30), || async {
        Ok(cms.get_opt("c1").await.map_err(|e| e.to_string())?.map(|c| c.data.unwrap_or_default()))
    })
    .await
    .map(|d: BTreeMap<String, String>| assert_eq!(d.get("mode").map(String::as_str), Some("ok")))?;
    assert!(host.log().contains("plugin's kinds changed; rebuilding its watches"));
    Ok(())
}

/// Issue 35 (3): a new version whose `info()` gives another name would leave the old name's
/// finalizers, tracking labels and field manager behind. It is refused (`renamed`), and the
/// running version keeps reconciling under its own name.
#[tokio::test(flavor = "multi_thread")]
async fn a_new_version_with_another_name_is_refused_and_the_running_one_kept() -> anyhow::Result<()> {
    use kwop_tests::wat_plugin::WatPlugin;
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("swap-rename")?;
    let dir = plugins::folder(&[])?;
    let (old, new) = (WatPlugin::chaos("renamed-old"), WatPlugin::chaos("renamed-new"));
    let write = |p: &WatPlugin| -> anyhow::Result<()> {
        std::fs::write(dir.join(".p.wasm"), p.build()?)?;
        Ok(std::fs::rename(dir.join(".p.wasm"), dir.join("p.wasm"))?)
    };
    write(&old)?;
    let host = host(plane, &dir, &[&format!("--namespace={ns}")])?;
    let client = plane.client().await?;
    create_chaos(&client, &ns, "c1", serde_json::json!({})).await?;
    let ev = event_with_reason(&client, &ns, "c1", "ReconcileFailed").await?;
    assert_eq!(ev.note.as_deref(), Some(old.message().as_str()));

    write(&new)?;
    let p = wait::until("the renamed version refused", Duration::from_secs(30), || async {
        let p = plugins_json(host.port).map_err(|e| e.to_string())?;
        let why = p["rejected_files"]["p.wasm"].as_str().unwrap_or_default().to_string();
        if why.contains("\"renamed-new\"") {
            Ok(Some(p))
        } else {
            Err(p.to_string())
        }
    })
    .await?;
    let names: Vec<&str> = p["plugins"].as_array().into_iter().flatten().filter_map(|e| e["name"].as_str()).collect();
    assert_eq!(names, ["renamed-old"], "{p}");
    assert_eq!(host.metric("kwop_plugin_load_failures_total", &[("reason", "renamed")])?, 1.0);
    create_chaos(&client, &ns, "c2", serde_json::json!({})).await?;
    let ev = event_with_reason(&client, &ns, "c2", "ReconcileFailed").await?;
    assert_eq!(ev.note.as_deref(), Some(old.message().as_str()), "the running version still reconciles");
    assert_eq!(host.metric("kwop_plugin_swaps_total", &[])?, 0.0);
    Ok(())
}
