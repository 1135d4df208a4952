//! Measurement 9: sharding (issue 19). The same world — `shard_foos` Foos in `shard_namespaces`
//! namespaces, on an API server with the `ShardedListAndWatch` feature gate on — reconciled by
//! one unsharded kwop, then by 1, 2 and 3 replicas with `--sharding=namespace`. Per replica: the
//! CPU it spends on a change of every Foo, its memory once it holds its part, and what it caches;
//! as ratios to the unsharded singleton (Ebert's thesis measured about 0.33× each with 3 shards).

use super::controllers::{self, Controller};
use super::report::{mib, ratio, secs};
use super::scenarios::{guest_foo_dir, say};
use super::Config;
use crate::plane::{ControlPlane, Mode};
use crate::shards::{self, FooKey};
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// One configuration: the unsharded singleton (`replicas` 0) or a ring of `replicas`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ShardRow {
    /// Replicas (0: one kwop without `--sharding`).
    pub replicas: usize,
    /// Per replica: CPU seconds from its start until idle (its first pass over its part, in sync).
    pub start_cpu_s: Vec<f64>,
    /// Per replica: CPU seconds for the change of every Foo, until idle again.
    pub change_cpu_s: Vec<f64>,
    /// Per replica: RSS once idle after the change, bytes.
    pub rss: Vec<u64>,
    /// Per replica: anonymous RSS, bytes.
    pub anon: Vec<u64>,
    /// Per replica: Foos in its cache.
    pub cached_foos: Vec<u64>,
    /// From the first change to every Foo converged, seconds.
    pub converge_s: f64,
}

/// The sharding measurement.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ShardsRun {
    /// Foos.
    pub foos: usize,
    /// Namespaces they are spread over.
    pub namespaces: usize,
    /// The API server sliced the watches (the replicas said so in `/plugins`).
    pub server_side: bool,
    /// Singleton first, then 1, 2, 3 replicas.
    pub rows: Vec<ShardRow>,
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}

async fn settled(ring: &[Controller], timeout: Duration) -> Result<()> {
    let start = Instant::now();
    loop {
        let ok = ring.iter().all(|c| {
            c.plugins().is_ok_and(|p| {
                let s = &p["shard"];
                s["members"].as_u64() == Some(ring.len() as u64)
                    && s["holding"].as_str().is_some_and(|h| !h.is_empty())
                    && s["holding"] == s["target"]
            })
        });
        if ok {
            return Ok(());
        }
        if start.elapsed() > timeout {
            bail!("{} replicas did not settle within {timeout:?}", ring.len());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn change_all(client: &kube::Client, foos: &[FooKey], replicas: i64) -> Result<()> {
    use futures::{StreamExt, TryStreamExt};
    let client = client.clone();
    futures::stream::iter(foos.iter().cloned().map(move |k| {
        let client = client.clone();
        async move { shards::set_replicas(&client, &k, replicas).await }
    }))
    .buffer_unordered(16)
    .try_collect::<Vec<()>>()
    .await?;
    Ok(())
}

/// Runs the measurement.
pub async fn shards(cfg: &Config) -> Result<ShardsRun> {
    let plane = ControlPlane::start_with(Mode::Api, &["--feature-gates=ShardedListAndWatch=true"])?;
    let client = plane.client().await?;
    let leases = plane.namespace("kwop-system")?;
    let per = cfg.shard_foos.div_ceil(cfg.shard_namespaces.max(1));
    let namespaces = shards::namespaces(&plane, "bench", cfg.shard_namespaces.max(1))?;
    say(format!("shards: {} Foos in {} namespaces", per * namespaces.len(), namespaces.len()));
    let foos = shards::create_foos(&client, &namespaces, per).await?;
    let dir = guest_foo_dir()?;
    let cache = cfg.work.join("precompiled");
    // The world in sync first (every Deployment written), so each configuration starts alike.
    let mut warm = controllers::kwop(&cfg.kwop, &plane, &dir, &cache, &[])?;
    shards::converged(&client, &foos, Duration::from_secs(900)).await?;
    warm.wait_idle(Duration::from_millis(cfg.settle_ms), Duration::from_secs(600)).await?;
    warm.stop();

    let sharding = [
        "--sharding=namespace".to_string(),
        format!("--leader-election-namespace={leases}"),
        "--leader-lease-duration=6s".into(),
        "--leader-renew-deadline=4s".into(),
        "--leader-retry-period=1s".into(),
    ];
    let mut run = ShardsRun { foos: foos.len(), namespaces: namespaces.len(), ..ShardsRun::default() };
    for (round, replicas) in [0usize, 1, 2, 3].into_iter().enumerate() {
        say(format!(
            "shards: {} replica(s){}",
            replicas.max(1),
            if replicas == 0 { " without --sharding" } else { "" }
        ));
        let extra: Vec<String> = if replicas == 0 { vec![] } else { sharding.to_vec() };
        let mut ring = Vec::new();
        for _ in 0..replicas.max(1) {
            ring.push(controllers::kwop(&cfg.kwop, &plane, &dir, &cache, &extra)?);
        }
        if replicas > 0 {
            settled(&ring, Duration::from_secs(60)).await?;
            run.server_side = ring.iter().all(|c| c.plugins().is_ok_and(|p| p["shard"]["serverSide"] == true));
        }
        let quiet = Duration::from_millis(cfg.settle_ms);
        for c in ring.iter_mut() {
            c.wait_idle(quiet, Duration::from_secs(600)).await?;
        }
        let c0: Vec<f64> = ring.iter().map(Controller::cpu).collect();
        let started = Instant::now();
        change_all(&client, &foos, 2 + round as i64).await?;
        shards::converged(&client, &foos, Duration::from_secs(900)).await?;
        let converge_s = started.elapsed().as_secs_f64();
        for c in ring.iter_mut() {
            c.wait_idle(quiet, Duration::from_secs(600)).await?;
        }
        let mut row = ShardRow { replicas, converge_s, start_cpu_s: c0.clone(), ..ShardRow::default() };
        for (c, before) in ring.iter().zip(&c0) {
            row.change_cpu_s.push(c.cpu() - before);
            let m = controllers::sample_memory(&[c.pid()], cfg.samples, Duration::from_secs(1)).await;
            row.rss.push(m.rss);
            row.anon.push(m.anon);
            row.cached_foos
                .push(c.metric("kwop_cached_objects", &[("kind", "samplecontroller.k8s.io/v1alpha1/Foo")]) as u64);
        }
        say(format!(
            "  change CPU per replica {:?} s, RSS {:?} MiB, cached Foos {:?}, converged in {converge_s:.1} s",
            row.change_cpu_s.iter().map(|x| (x * 100.0).round() / 100.0).collect::<Vec<_>>(),
            row.rss.iter().map(|b| b >> 20).collect::<Vec<_>>(),
            row.cached_foos
        ));
        run.rows.push(row);
        for c in ring {
            c.stop();
        }
    }
    Ok(run)
}

/// The Markdown section.
pub fn markdown(s: &ShardsRun) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "### 9. Sharding (per replica, {} Foos in {} namespaces)\n\n\
         One kwop without `--sharding`, then 1, 2 and 3 replicas with `--sharding=namespace` on an API server \
         with `ShardedListAndWatch` {} — each replica's watch carries only its slice. Per replica: CPU for a change \
         of every Foo (until idle again) and for its start (its first pass, in sync), memory once idle, Foos cached; \
         ratios to the unsharded singleton (mean over replicas, worst in brackets).\n",
        s.foos,
        s.namespaces,
        if s.server_side {
            "on (server-side slicing confirmed)"
        } else {
            "on, but the replicas did not see it applied"
        }
    );
    let _ = writeln!(
        o,
        "| replicas | CPU for the change | ratio | CPU at start | ratio | RSS, MiB | ratio | anonymous RSS, MiB | ratio | Foos cached | all converged in |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let Some(base) = s.rows.first() else { return o };
    let f = |v: &[u64]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    let (bc, bs, br, ba) =
        (mean(&base.change_cpu_s), mean(&base.start_cpu_s), mean(&f(&base.rss)), mean(&f(&base.anon)));
    for r in &s.rows {
        let name = if r.replicas == 0 { "1, unsharded".to_string() } else { format!("{} sharded", r.replicas) };
        let (c, st, rss, anon) = (mean(&r.change_cpu_s), mean(&r.start_cpu_s), mean(&f(&r.rss)), mean(&f(&r.anon)));
        let worst = |m: f64, b: f64| if r.replicas > 1 { format!(" ({})", ratio(m, b)) } else { String::new() };
        let _ = writeln!(
            o,
            "| {name} | {:.2} s | {}{} | {:.2} s | {}{} | {} | {}{} | {} | {}{} | {} | {} |",
            c,
            ratio(c, bc),
            worst(max(&r.change_cpu_s), bc),
            st,
            ratio(st, bs),
            worst(max(&r.start_cpu_s), bs),
            mib(rss as u64),
            ratio(rss, br),
            worst(max(&f(&r.rss)), br),
            mib(anon as u64),
            ratio(anon, ba),
            worst(max(&f(&r.anon)), ba),
            r.cached_foos.iter().map(u64::to_string).collect::<Vec<_>>().join(" + "),
            secs(r.converge_s),
        );
    }
    let _ = writeln!(o);
    o
}
