//! Measurement 6, hot swap: a plugin file renamed into place (folder mode), and a
//! ReconcilerPlugin's `spec.source` edited to another digest (cluster mode), each to the first
//! object written by the new version.

use super::controllers::{self, Controller};
use super::scenarios::{guest_foo_dir, say, start_plane, V2_ANNOTATION};
use super::world::{self, Tracker, FOO_GROUP};
use super::{variants, Config, HotSwapRun};
use crate::plugins;
use anyhow::Result;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Every Deployment written, with when and whether by v2 (its annotation).
fn deployment_writes(deps: Api<Deployment>) -> (mpsc::UnboundedReceiver<(Instant, bool)>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::unbounded_channel::<(Instant, bool)>();
    let task = tokio::spawn(async move {
        let mut w = std::pin::pin!(watcher(deps, watcher::Config::default()));
        while let Some(ev) = w.next().await {
            if let Ok(watcher::Event::Apply(d)) = ev {
                let v2 = d.metadata.annotations.as_ref().and_then(|a| a.get(V2_ANNOTATION)).is_some();
                let _ = tx.send((Instant::now(), v2));
            }
        }
    });
    (rx, task)
}

/// Waits for the first write by the wanted version after `t0`; the host's `/plugins` showing it
/// active is noted on the way (when `active` is asked for).
async fn first_write(
    rx: &mut mpsc::UnboundedReceiver<(Instant, bool)>,
    k: &Controller,
    t0: Instant,
    to_v2: bool,
    mut active: Option<&mut Option<f64>>,
) -> Result<f64> {
    let want_version = if to_v2 { "0.1.0-v2" } else { "0.1.0" };
    let deadline = t0 + Duration::from_secs(60);
    loop {
        if let Some(a) = active.as_deref_mut().filter(|a| a.is_none()) {
            let v = k.plugins().unwrap_or_default();
            if v["plugins"].as_array().into_iter().flatten().any(|p| p["version"] == want_version) {
                *a = Some(t0.elapsed().as_secs_f64());
            }
        }
        match tokio::time::timeout(Duration::from_millis(5), rx.recv()).await {
            Ok(Some((at, v2))) if v2 == to_v2 => return Ok(at.duration_since(t0).as_secs_f64()),
            Ok(None) => anyhow::bail!("the Deployment watch ended"),
            _ => {}
        }
        if Instant::now() > deadline {
            anyhow::bail!("swap to {want_version} not seen within 60s:\n{}", k.proc.tail(20));
        }
    }
}

/// Measurement 6: Hot swap: alternate guest-foo v1 and v2 (v2 annotates the Deployment) under one Foo;
/// latency from the file renamed into place to the first Deployment written by the new version.
pub async fn hotswap(cfg: &Config) -> Result<HotSwapRun> {
    let plane = start_plane()?;
    let ns = plane.namespace("hotswap")?;
    let client = plane.client().await?;
    let dir = guest_foo_dir()?;
    // A fresh precompile cache: "cold" swaps must compile.
    let cache = cfg.work.join(format!("hotswap-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let k = controllers::kwop(&cfg.kwop, &plane, &dir, &cache, &[format!("--namespace={ns}")])?;
    let mut tracker = Tracker::start(&client, FOO_GROUP, &ns, 1).await?;
    world::create_foos(&client, FOO_GROUP, &ns, 0..1, 1).await?;
    tracker.wait_all(Duration::from_secs(60)).await?;

    let (mut rx, watch_task) = deployment_writes(Api::namespaced(client.clone(), &ns));
    let staging = dir.join(".staging");
    let mut v2_now = false;
    let swap = |src: PathBuf, marker: Option<String>| -> Result<Instant> {
        match marker {
            Some(m) => variants::with_marker(&src, &staging, &m)?,
            None => {
                std::fs::copy(&src, &staging)?;
            }
        }
        let t0 = Instant::now();
        std::fs::rename(&staging, dir.join("guest-foo.wasm"))?;
        Ok(t0)
    };
    let (v1, v2) = (PathBuf::from(plugins::GUEST_FOO), PathBuf::from(plugins::GUEST_FOO_V2));
    let mut run = HotSwapRun::default();
    // Round 0 fills the precompile cache with v2 (v1 is there since start-up); then warm swaps.
    for (i, cold) in
        std::iter::repeat_n(false, 2 + cfg.swaps_warm).chain(std::iter::repeat_n(true, cfg.swaps_cold)).enumerate()
    {
        let to_v2 = !v2_now;
        while rx.try_recv().is_ok() {}
        let src = if to_v2 { v2.clone() } else { v1.clone() };
        let t0 = swap(src, cold.then(|| format!("cold-{i}-{}", std::process::id())))?;
        let mut active: Option<f64> = None;
        let written = first_write(&mut rx, &k, t0, to_v2, Some(&mut active)).await?;
        v2_now = to_v2;
        if i >= 2 {
            if cold {
                run.cold_s.push(written);
            } else {
                run.warm_s.push(written);
                run.warm_active_s.push(active.unwrap_or(written));
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    watch_task.abort();
    k.stop();
    let _ = std::fs::remove_dir_all(&cache);
    say(format!(
        "hot swap: warm p50 {:.0} ms p99 {:.0} ms; cold p50 {:.0} ms",
        super::stats::median(&run.warm_s) * 1e3,
        super::stats::percentile(&run.warm_s, 99.0) * 1e3,
        super::stats::median(&run.cold_s) * 1e3
    ));
    run.rp_warm_s = reconciler_plugin(cfg).await?;
    say(format!(
        "ReconcilerPlugin swap (spec.source edited): p50 {:.0} ms p99 {:.0} ms",
        super::stats::median(&run.rp_warm_s) * 1e3,
        super::stats::percentile(&run.rp_warm_s, 99.0) * 1e3
    ));
    Ok(run)
}

/// Pushes a component to the registry; the digest-pinned reference.
fn push(cfg: &Config, registry: &str, file: &str, tag: &str) -> Result<String> {
    let out = std::process::Command::new(&cfg.kwop)
        .args(["plugin", "push", file, &format!("{registry}/bench/guest-foo:{tag}")])
        .arg(format!("--insecure-registry={registry}"))
        .output()?;
    anyhow::ensure!(out.status.success(), "kwop plugin push: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8(out.stdout)?.trim().to_string())
}

/// The ReconcilerPlugin path: guest-foo v1 and v2 pushed to a registry, a host running the
/// cluster's ReconcilerPlugins, and `spec.source.oci` edited from one digest to the other; from
/// the edit (the patch request sent) to the first Deployment written by the new version. Both
/// digests have been pulled and compiled once before the measured swaps (warm), as an admin
/// rolling back and forth would find them; each edit is still a watch event, a pull from the
/// registry, a verification, a load from the precompile cache and a swap.
async fn reconciler_plugin(cfg: &Config) -> Result<Vec<f64>> {
    let plane = start_plane()?;
    let ns = plane.namespace("rpswap")?;
    let client = plane.client().await?;
    let registry = crate::registry::Registry::start()?;
    let hp = registry.host_port();
    let (v1, v2) = (push(cfg, &hp, plugins::GUEST_FOO, "v1")?, push(cfg, &hp, plugins::GUEST_FOO_V2, "v2")?);
    let cache = cfg.work.join(format!("rpswap-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let name = format!("bench-{ns}");
    let rps: Api<kwop::vocab::crd::ReconcilerPlugin> = Api::all(client.clone());
    let apply = |oci: &str| {
        serde_json::json!({
            "apiVersion": "kwop.dev/v1alpha1", "kind": "ReconcilerPlugin",
            "metadata": { "name": name, "labels": { "kwop.dev/bench": ns } },
            "spec": { "source": { "oci": oci }, "grants": {
                "primary": { "apiVersion": format!("{FOO_GROUP}/v1alpha1"), "kind": "Foo" },
                "owns": [{ "apiVersion": "apps/v1", "kind": "Deployment" }],
            } },
        })
    };
    let pp = PatchParams::apply("kwop-bench").force();
    rps.patch(&name, &pp, &Patch::Apply(apply(&v1))).await?;
    let empty = guest_foo_dir()?;
    let k = controllers::kwop_with(
        &cfg.kwop,
        &plane,
        &[
            "--reconciler-plugins".into(),
            format!("--reconciler-plugin-selector=kwop.dev/bench={ns}"),
            format!("--system-namespace={ns}"),
            format!("--insecure-registry={hp}"),
            format!("--namespace={ns}"),
        ],
        &cache,
        &[],
    )?;
    drop(empty);
    let mut tracker = Tracker::start(&client, FOO_GROUP, &ns, 1).await?;
    world::create_foos(&client, FOO_GROUP, &ns, 0..1, 1).await?;
    tracker.wait_all(Duration::from_secs(120)).await?;
    let (mut rx, watch_task) = deployment_writes(Api::namespaced(client.clone(), &ns));
    let mut v2_now = false;
    let mut out = Vec::new();
    // Rounds 0 and 1 pull and compile each digest once; the rest are measured.
    for i in 0..(2 + cfg.swaps_warm) {
        let to_v2 = !v2_now;
        while rx.try_recv().is_ok() {}
        let t0 = Instant::now();
        rps.patch(&name, &pp, &Patch::Apply(apply(if to_v2 { &v2 } else { &v1 }))).await?;
        let written = first_write(&mut rx, &k, t0, to_v2, None).await?;
        v2_now = to_v2;
        if i >= 2 {
            out.push(written);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    watch_task.abort();
    k.stop();
    let _ = std::fs::remove_dir_all(&cache);
    Ok(out)
}
