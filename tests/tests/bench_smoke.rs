//! The benchmark harness at a tiny scale (issue 9), so it cannot rot between benchmark runs:
//! every measurement of `scripts/bench` runs once with a handful of objects, with the debug kwop,
//! and must produce sensible numbers — and kwop must write nothing while in sync.
//! The figures themselves mean nothing here; BENCHMARKS.md has the real ones.

use kwop::vocab::Gvk;
use kwop_tests::bench::{self, calls, report, scenarios, Config, Driver, Results};
use kwop_tests::plugins;
use std::path::PathBuf;

const KWOP: &str = env!("CARGO_BIN_EXE_kwop-host");

fn config() -> Config {
    let work = bench::target_dir().join("bench-smoke");
    std::fs::create_dir_all(&work).expect("work folder");
    Config::smoke(PathBuf::from(KWOP), work)
}

/// Runs a scenario on its own task with its own copy of the configuration.
fn spawn<T, F, Fut>(cfg: &Config, run: F) -> tokio::task::JoinHandle<anyhow::Result<T>>
where
    F: FnOnce(Config) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>> + Send + 'static,
    T: Send + 'static,
{
    tokio::spawn(run(cfg.clone()))
}

#[test]
fn plugin_call_cost_wasm_fresh_reused_and_native() -> anyhow::Result<()> {
    let engine = calls::engine()?;
    let plugin = calls::load(&engine, std::path::Path::new(plugins::GUEST_FOO))?;
    let (req, cache) = (calls::request(), calls::cache());
    calls::check_raw(&plugin.reconcile(&req, "default/example-foo".into(), cache.clone())?)?;
    let mut session = plugin.session()?;
    calls::check_raw(&session.reconcile(&req, cache.clone())?)?;
    let gvk = Gvk::new("apps", "v1", "Deployment");
    let native = || {
        let lookup = |ns: &str, name: &str| cache.get(&gvk, Some(ns), name);
        guest_foo::reconcile_json(&req.primary, &lookup, guest_foo::Time::EXAMPLE).unwrap_or_default()
    };
    let (apply, status) = native();
    calls::check_outcome(&apply, Some(&status))?;

    let fresh = calls::time_per_call(3, 20, || {
        std::hint::black_box(plugin.reconcile(&req, "default/example-foo".into(), cache.clone()).is_ok());
    });
    let reused = calls::time_per_call(3, 20, || {
        std::hint::black_box(session.reconcile(&req, cache.clone()).is_ok());
    });
    let nat = calls::time_per_call(3, 200, || {
        std::hint::black_box(native());
    });
    eprintln!("fresh {fresh:.0} ns, reused {reused:.0} ns, native {nat:.0} ns");
    assert!(fresh > 0.0 && reused > 0.0 && nat > 0.0);
    // Instantiating costs something on top of the call itself.
    assert!(fresh > reused, "a fresh instance ({fresh} ns) should cost more than a reused one ({reused} ns)");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 10)]
async fn every_benchmark_runs_at_a_tiny_scale() -> anyhow::Result<()> {
    let cfg = config();
    // Each scenario has its own control plane: run them side by side (figures are meaningless
    // here anyway), each on its own task so blocking start-ups do not serialise them.
    let n = cfg.conv_sizes[0];
    let conv: Vec<_> = [Driver::Floor, Driver::FloorSsa, Driver::Kwop, Driver::SampleController]
        .into_iter()
        .map(|d| spawn(&cfg, move |c| async move { scenarios::convergence_run(&c, d, n).await }))
        .collect();
    let steady = spawn(&cfg, |c| async move { scenarios::steady(&c).await });
    let memory = spawn(&cfg, |c| async move { scenarios::memory(&c).await });
    let many = spawn(&cfg, |c| async move { scenarios::many(&c).await });
    let hotswap = spawn(&cfg, |c| async move { kwop_tests::bench::swaps::hotswap(&c).await });
    // 8. Builds side by side: the same debug binary under a second label (the real run compares
    // the glibc release build with the image's static musl binary).
    let other = bench::builds::parse_build(&format!("same binary={KWOP}"))?;
    let builds = spawn(&cfg, move |c| async move { bench::builds::compare(&c, "debug", &[other]).await });
    let shards = spawn(&cfg, |c| async move { bench::shards::shards(&c).await });
    let mut r = Results {
        date: "smoke".into(),
        command: "bench_smoke".into(),
        machine: bench::machine(),
        ..Results::default()
    };
    for c in conv {
        r.convergence.push(c.await??);
    }
    r.steady = steady.await??;
    (r.memory, r.memory_build) = memory.await??;
    r.many = Some(many.await??);
    r.hotswap = Some(hotswap.await??);
    r.builds = Some(builds.await??);
    r.shards = Some(shards.await??);

    // 2. Convergence: one run per driver, each positive.
    for d in [Driver::Floor, Driver::FloorSsa, Driver::Kwop, Driver::SampleController] {
        let runs: Vec<_> = r.convergence.iter().filter(|c| c.driver == d).collect();
        assert_eq!(runs.len(), 1, "{d:?}");
        assert!(runs[0].seconds > 0.0 && runs[0].create_seconds > 0.0, "{:?}", runs[0]);
        assert!(runs[0].writes >= 2.0 * runs[0].n as f64, "at least a create and a status per Foo: {:?}", runs[0]);
        if matches!(d, Driver::Kwop | Driver::SampleController) {
            assert!(runs[0].controller_cpu_s > 0.0 && runs[0].controller_peak_rss > 0, "{:?}", runs[0]);
        }
    }
    // 3. Steady state: kwop resynced several times and wrote nothing; sample-controller wrote.
    let kw = r.steady.iter().find(|s| s.driver == Driver::Kwop).expect("kwop steady run");
    assert_eq!(kw.total, 0.0, "kwop wrote while in sync: {:?}", kw.writes);
    assert_eq!(kw.startup_writes, 0.0, "kwop wrote at start-up of an in-sync world");
    assert!(kw.reconciles.unwrap_or(0.0) >= 2.0 * kw.n as f64, "kwop resynced: {kw:?}");
    // Memoized: resyncs of an in-sync world never call the plugin; with --memoize=false each does.
    assert_eq!(kw.plugin_calls, Some(0.0), "an in-sync resync called the plugin: {kw:?}");
    let before = r.steady.iter().find(|s| s.driver == Driver::KwopNoMemo).expect("kwop --memoize=false run");
    assert_eq!(before.total, 0.0, "kwop --memoize=false wrote while in sync: {:?}", before.writes);
    assert!(before.plugin_calls.unwrap_or(0.0) >= 2.0 * before.n as f64, "every resync called the plugin: {before:?}");
    let sc = r.steady.iter().find(|s| s.driver == Driver::SampleController).expect("sample-controller run");
    assert!(sc.total + sc.startup_writes > 0.0, "sample-controller updates the status at every sync: {sc:?}");
    // 4. Memory: both controllers measured at every size.
    assert_eq!(r.memory.len(), 2 * (1 + cfg.mem_sizes.len()));
    assert!(r.memory.iter().all(|m| m.rss > 0 && m.pss > 0), "{:?}", r.memory);
    // 5. Many plugins.
    let m = r.many.as_ref().expect("many");
    assert!(m.kwop_converged, "every plugin converged its Foos");
    // Every plugin owns Deployments, and the host holds one cache of them: one watch.
    assert_eq!(m.deployment_cache_plugins, Some(m.plugins as f64), "plugins sharing the Deployment cache: {m:?}");
    assert_eq!(m.deployment_watches, Some(1.0), "Deployment watches kwop opened at the API server: {m:?}");
    assert!(m.kwop_rss > 0 && m.kwop_one_rss > 0 && m.sc_one_rss > 0 && m.sc_rss_total > m.sc_one_rss, "{m:?}");
    // 6. Hot swap.
    let h = r.hotswap.as_ref().expect("hot swap");
    assert_eq!((h.warm_s.len(), h.cold_s.len()), (cfg.swaps_warm, cfg.swaps_cold));
    assert!(h.warm_s.iter().chain(&h.cold_s).all(|s| *s > 0.0 && *s < 60.0), "{h:?}");
    assert_eq!(h.rp_warm_s.len(), cfg.swaps_warm, "the ReconcilerPlugin path too: {h:?}");
    assert!(h.rp_warm_s.iter().all(|s| *s > 0.0 && *s < 60.0), "{h:?}");
    // 8. Both builds converged, reconciled in sync and wrote nothing then.
    let b = r.builds.as_ref().expect("builds");
    assert_eq!(b.runs.len(), 2);
    for run in &b.runs {
        assert!(run.conv_s.iter().all(|s| *s > 0.0) && !run.conv_s.is_empty(), "{run:?}");
        assert!(run.us_per_reconcile() > 0.0 && run.steady_writes == 0.0, "{run:?}");
    }
    assert!(bench::builds::parse_build("no-equals-sign").is_err());
    // 9. Sharding: the singleton and 1-3 replicas; the API server sliced each replica's watch,
    // whose caches together hold every Foo once.
    let s = r.shards.as_ref().expect("shards");
    assert_eq!(s.rows.iter().map(|x| x.replicas).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert!(s.server_side, "{s:?}");
    for row in &s.rows {
        assert_eq!(row.change_cpu_s.len(), row.replicas.max(1), "{row:?}");
        assert_eq!(row.cached_foos.iter().sum::<u64>(), s.foos as u64, "every Foo cached once: {row:?}");
        assert!(row.change_cpu_s.iter().all(|c| *c > 0.0) && row.rss.iter().all(|m| *m > 0), "{row:?}");
    }
    assert!(bench::builds::parse_build("x=/nonexistent/kwop").is_err());

    // The report renders every section and the plot.
    let md = report::markdown(&r, Some("plot.svg"));
    for section in ["### 2.", "### 3.", "### 4.", "### 5.", "### 6.", "### 7.", "### 8.", "### 9."] {
        assert!(md.contains(section), "missing {section} in\n{md}");
    }
    let svg = report::plot(&r);
    assert!(svg.starts_with("<svg") && svg.contains("polyline"), "{svg}");
    // Left for a look: target/bench-smoke/results.{md,svg}.
    std::fs::write(cfg.work.join("results.md"), &md)?;
    std::fs::write(cfg.work.join("results.svg"), &svg)?;
    let doc = report::splice("# Benchmarks\n\nintro\n\n", &md);
    assert_eq!(report::splice(&doc, &md), doc, "splicing twice is stable");
    Ok(())
}

/// 11. Admission latency: the same requests without a webhook and through kwop's, one client and
/// several at once; every request "on" went through the webhook as both ends count it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admission_latency_runs_at_a_tiny_scale() -> anyhow::Result<()> {
    let cfg = config();
    let a = bench::admission::admission(&cfg).await?;
    assert_eq!(a.hooks.iter().map(|h| h.hook).collect::<Vec<_>>(), bench::admission::MEASURED);
    for h in &a.hooks {
        let runs = [(&h.seq_off, 1), (&h.seq_on, 1), (&h.conc_off, cfg.adm_clients), (&h.conc_on, cfg.adm_clients)];
        for (l, clients) in runs {
            assert_eq!((l.clients, l.requests), (clients, clients * cfg.adm_requests), "{h:?}");
            assert!(l.p50_s > 0.0 && l.p99_s >= l.p50_s && l.wall_s > 0.0, "{h:?}");
        }
        assert_eq!((h.apiserver_seq.count, h.kwop_seq.count), (cfg.adm_requests as f64, cfg.adm_requests as f64));
        let conc = (cfg.adm_clients * cfg.adm_requests) as f64;
        assert_eq!((h.apiserver_conc.count, h.kwop_conc.count), (conc, conc));
        // kwop's answer is a part of the API server's call to it.
        assert!(h.kwop_seq.mean() > 0.0 && h.kwop_seq.mean() < h.apiserver_seq.mean(), "{h:?}");
        assert!(h.kwop_cpu_s > 0.0, "{h:?}");
    }
    let r = Results { admission: Some(a), ..Results::default() };
    let md = report::markdown(&r, None);
    for hook in ["validate", "mutate", "convert"] {
        let row = format!("| {hook} | 1 × {} |", cfg.adm_requests);
        assert!(md.contains("### 11. Admission latency at the API server") && md.contains(&row), "{md}");
    }
    Ok(())
}
