//! The chaos soak (issue 35): three namespace-sharded replicas running guest-foo, config-sync
//! and the finalizer plugin as ReconcilerPlugins from a registry, on a control plane of their
//! own, while a driver creates, changes and deletes primaries and injects faults at random for
//! `KWOP_SOAK_MINUTES` (default 3; `scripts/soak --minutes N`). Each round injects one fault of
//! the cluster or the replicas and one of the plugins overlapping it (see
//! [`faults`]), churning primaries meanwhile; once healed, it measures how long until every live
//! primary has converged (bounded: a violation past `KWOP_SOAK_CONVERGE_SECONDS`, default 120).
//! The invariants ([`checks`]) are checked every round (convergence, hung deletions, memory) and
//! from the audit log every ten rounds and at the end. It prints a table: faults per kind,
//! violations per invariant, convergence after faults (p50, p99, max). `KWOP_SOAK_SEED` replays
//! a run's choices. Positive controls: `KWOP_SOAK_CONTROL_HANG=1` adds a Fin whose `finalize`
//! never finishes (the deletion invariants must count it), `KWOP_SOAK_RSS_MIB=1` the memory one.

#[path = "../common/mod.rs"]
mod common;

mod checks;
mod faults;
mod ops;
mod world;

use checks::{Revoked, Violations};
use faults::Kind;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

fn env_number(name: &str, default: f64) -> anyhow::Result<f64> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(v) => v
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n > 0.0)
            .ok_or_else(|| anyhow::anyhow!("{name}={v:?} is not a positive number")),
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_soak_loses_nothing_and_writes_nothing_twice() -> anyhow::Result<()> {
    let minutes = env_number("KWOP_SOAK_MINUTES", 3.0)?;
    let bound = Duration::from_secs_f64(env_number("KWOP_SOAK_CONVERGE_SECONDS", 120.0)?);
    let rss_bound = (env_number("KWOP_SOAK_RSS_MIB", 512.0)? * 1024.0 * 1024.0) as u64;
    let seed = match std::env::var("KWOP_SOAK_SEED") {
        Ok(s) => s.trim().parse().map_err(|_| anyhow::anyhow!("KWOP_SOAK_SEED={s:?} is not a number"))?,
        Err(_) => fastrand::u64(..),
    };
    println!("soak: {minutes} min, seed {seed} (KWOP_SOAK_SEED={seed} replays the choices)");
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut w = world::World::start(12).await?;
    // A positive control of the deletion invariants: a Fin whose finalize never finishes.
    if std::env::var_os("KWOP_SOAK_CONTROL_HANG").is_some() {
        w.hang_a_deletion().await?;
    }
    let started = Instant::now();
    let end = started + Duration::from_secs_f64(minutes * 60.0);
    let mut v = Violations::default();
    let mut injected: BTreeMap<Kind, usize> = BTreeMap::new();
    let mut revoked: Vec<Revoked> = Vec::new();
    let mut converge: Vec<Duration> = Vec::new();
    let (mut changes, mut rss_max, mut rounds) = (0usize, 0u64, 0usize);
    while Instant::now() < end {
        rounds += 1;
        changes += w.churn(&mut rng).await;
        let plugin = faults::PLUGIN[rng.usize(..faults::PLUGIN.len())];
        let open = faults::open(&mut w, plugin, &mut rng).await?;
        let kind = faults::INFRA[rng.usize(..faults::INFRA.len())];
        changes += faults::infra(&mut w, kind, &mut rng).await?;
        let healed = k8s_openapi::jiff::Timestamp::now();
        revoked.extend(faults::close(&mut w, open, healed).await?);
        *injected.entry(kind).or_default() += 1;
        *injected.entry(plugin).or_default() += 1;
        // Healed: how long until everything converged (changes refused meanwhile made first)?
        let healed = Instant::now();
        w.settle(bound).await?;
        let mut left = w.unconverged().await.unwrap_or_else(|e| vec![e.to_string()]);
        while !left.is_empty() && healed.elapsed() < bound {
            tokio::time::sleep(Duration::from_millis(250)).await;
            left = w.unconverged().await.unwrap_or_else(|e| vec![e.to_string()]);
        }
        if left.is_empty() {
            converge.push(healed.elapsed());
        } else {
            let ring: Vec<String> = (w.ring.shards().iter())
                .map(|(n, s)| {
                    format!("{n}: holding {} unheld {} fresh {}", s["holding"], s["unheldPpm"], s["leaseFresh"])
                })
                .collect();
            let e = &left[..left.len().min(3)];
            v.add(
                checks::CONVERGE,
                format!("round {rounds} after {kind:?}: {} left, e.g. {e:?}; {ring:?}", left.len()),
            );
        }
        checks::deletions(&w, bound, &mut v).await?;
        for (name, bytes) in checks::rss(&w) {
            rss_max = rss_max.max(bytes);
            if bytes > rss_bound {
                v.add(checks::MEMORY, format!("{name}: {} MiB after round {rounds}", bytes >> 20));
            }
        }
        println!("soak: round {rounds} ({kind:?} + {plugin:?}) converged in {} ms", healed.elapsed().as_millis());
        if rounds % 10 == 0 {
            let mut so_far = Violations::default();
            checks::audit(&w, &revoked, &mut so_far);
            let faults: usize = injected.values().sum();
            println!(
                "soak: round {rounds}, {faults} faults, {} s, audit so far: {:?}",
                started.elapsed().as_secs(),
                so_far.0
            );
        }
    }
    checks::audit(&w, &revoked, &mut v);
    converge.sort();

    let faults: usize = injected.values().sum();
    let mut table = String::new();
    table.push_str(&format!(
        "\n## Soak: {minutes} min, seed {seed}, {rounds} rounds, {faults} faults, {changes} primary changes\n\n| fault | injected |\n|---|---:|\n"
    ));
    for k in faults::INFRA.iter().chain(&faults::PLUGIN) {
        table.push_str(&format!("| {} | {} |\n", k.label(), injected.get(k).copied().unwrap_or(0)));
    }
    table.push_str(&format!("| **total** | **{faults}** |\n\n| invariant | violations |\n|---|---:|\n"));
    for i in checks::ALL {
        table.push_str(&format!("| {i} | {} |\n", v.count(i)));
    }
    let ms = |d: Duration| d.as_millis();
    table.push_str(&format!(
        "\nConvergence after a fault healed (all live primaries), {} rounds: p50 {} ms, p99 {} ms, max {} ms. Largest replica RSS: {} MiB.\n",
        converge.len(),
        ms(percentile(&converge, 0.5)),
        ms(percentile(&converge, 0.99)),
        ms(converge.last().copied().unwrap_or_default()),
        rss_max >> 20
    ));
    println!("{table}");
    if let Ok(path) = std::env::var("KWOP_SOAK_REPORT") {
        std::fs::write(&path, &table)?;
    }
    for (i, list) in &v.0 {
        eprintln!(
            "VIOLATION {i}: {} cases, e.g.\n  {}",
            list.len(),
            list.iter().take(5).cloned().collect::<Vec<_>>().join("\n  ")
        );
    }
    w.plane.stop();
    if std::env::var_os("KWOP_KEEP_TEST_DIRS").is_none() {
        let _ = std::fs::remove_dir_all(&w.plane.dir);
    }
    assert_eq!(v.total(), 0, "invariants violated (see above); seed {seed}");
    let floor = (minutes * 4.0).floor() as usize;
    assert!(faults >= floor, "only {faults} faults in {minutes} min (the driver is stuck?)");
    Ok(())
}
