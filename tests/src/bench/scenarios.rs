//! The measurements. Each starts its own API-only control plane (etcd + kube-apiserver), so runs
//! never see each other's objects and sample-controller (which watches every namespace and has no
//! namespace flag) only sees the Foos of its run.

use super::controllers::{self, Controller};
use super::world::{self, Tracker, FOO_GROUP};
use super::{proc_stats, variants, Config, ConvergenceRun, Driver, ManyRun, MemoryRun, SteadyRun};
use crate::plane::{ControlPlane, Mode};
use crate::plugins;
use anyhow::{anyhow, Context, Result};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub(super) fn say(msg: impl AsRef<str>) {
    eprintln!("[bench {}] {}", chrono_now(), msg.as_ref());
}

fn chrono_now() -> String {
    let s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    format!("{:02}:{:02}:{:02}", (s / 3600) % 24, (s / 60) % 60, s % 60)
}

/// A plugin folder holding guest-foo (as shipped).
pub(super) fn guest_foo_dir() -> Result<PathBuf> {
    plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])
}

/// The precompile cache shared by the runs (hot swap uses fresh ones).
pub(super) fn cache_dir(cfg: &Config) -> PathBuf {
    cfg.work.join("precompiled")
}

/// Compiles plugins into the shared precompile cache (`kwop plugin inspect`), so a measured
/// host deserializes them instead of compiling in-process (compiling leaves its heap high-water
/// mark in the RSS of a process that would otherwise never compile).
fn warm_cache(cfg: &Config, files: &[PathBuf]) -> Result<()> {
    for f in files {
        let out = std::process::Command::new(&cfg.kwop)
            .args(["plugin", "inspect"])
            .arg(f)
            .arg(format!("--cache-dir={}", cache_dir(cfg).display()))
            .output()?;
        if !out.status.success() {
            anyhow::bail!("kwop plugin inspect {}: {}", f.display(), String::from_utf8_lossy(&out.stderr));
        }
    }
    Ok(())
}

/// A fresh API-only plane. Retried: the harness picks free ports by binding and releasing them,
/// so planes started side by side (the smoke test) can race for a port.
pub(super) fn start_plane() -> Result<ControlPlane> {
    let mut last = None;
    for _ in 0..3 {
        match ControlPlane::start(Mode::Api) {
            Ok(p) => return Ok(p),
            Err(e) => {
                say(format!("control plane did not start ({e}); retrying"));
                last = Some(e);
            }
        }
    }
    Err(last.unwrap_or_else(|| anyhow!("no attempt")))
}

fn settle(cfg: &Config) -> Duration {
    Duration::from_millis(cfg.settle_ms)
}

fn cpu_of(pid: Option<u32>) -> f64 {
    pid.map(proc_stats::cpu_seconds).unwrap_or(0.0)
}

fn apiserver_pid(plane: &ControlPlane) -> Option<u32> {
    proc_stats::find_pid("kube-apiserver", &plane.dir.display().to_string())
}

/// sample-controller runs its first pass at ~5 requests/s: allow for that.
fn convergence_timeout(driver: Driver, n: usize) -> Duration {
    match driver {
        Driver::SampleController => Duration::from_secs(180 + (n as u64) * 2),
        _ => Duration::from_secs(120 + n as u64 / 5),
    }
}

/// Measurement 2: One convergence run: `n` Foos created at once on a fresh plane, timed until every
/// Deployment exists with the right replicas and every Foo has its status.
pub async fn convergence_run(cfg: &Config, driver: Driver, n: usize) -> Result<ConvergenceRun> {
    convergence_with(cfg, driver, n, &[]).await
}

/// [`convergence_run`] with more flags for kwop (`extra`; e.g. traces exported: `traced.rs`).
pub async fn convergence_with(cfg: &Config, driver: Driver, n: usize, extra: &[String]) -> Result<ConvergenceRun> {
    let plane = start_plane()?;
    let ns = plane.namespace("conv")?;
    let client = plane.client().await?;
    let api_pid = apiserver_pid(&plane);
    let ctl = match driver {
        Driver::Kwop => Some(controllers::kwop(&cfg.kwop, &plane, &guest_foo_dir()?, &cache_dir(cfg), extra)?),
        Driver::KwopNoMemo => {
            let args = ["--memoize=false".to_string()];
            Some(controllers::kwop(&cfg.kwop, &plane, &guest_foo_dir()?, &cache_dir(cfg), &args)?)
        }
        Driver::SampleController => Some(controllers::sample_controller(&plane, "conv")?),
        Driver::Floor | Driver::FloorSsa => None,
    };
    world::warm_up(&client, &ns).await?;
    let mut tracker = Tracker::start(&client, FOO_GROUP, &ns, n).await?;
    let pid = ctl.as_ref().map(Controller::pid);
    let (w0, cpu0, api0) = (world::apiserver_writes(&plane)?, cpu_of(pid), cpu_of(api_pid));
    let t0 = Instant::now();
    match driver {
        Driver::Floor => world::floor(&client, &ns, 0..n, cfg.create_concurrency).await?,
        Driver::FloorSsa => world::floor_ssa(&client, &ns, 0..n, cfg.create_concurrency).await?,
        _ => world::create_foos(&client, FOO_GROUP, &ns, 0..n, cfg.create_concurrency).await?,
    }
    let create_seconds = t0.elapsed().as_secs_f64();
    let end = tracker
        .wait_all(convergence_timeout(driver, n))
        .await
        .with_context(|| format!("{} converging {n} Foos", driver.label()))?;
    let seconds = end.duration_since(t0).as_secs_f64();
    let (cpu1, api1) = (cpu_of(pid), cpu_of(api_pid));
    let writes = world::total(&world::writes_between(&w0, &world::apiserver_writes(&plane)?));
    let controller_peak_rss = ctl.as_ref().map(Controller::peak_rss).unwrap_or(0);
    if let Some(c) = ctl {
        c.stop();
    }
    Ok(ConvergenceRun {
        driver,
        n,
        seconds,
        create_seconds,
        controller_cpu_s: cpu1 - cpu0,
        apiserver_cpu_s: api1 - api0,
        controller_peak_rss,
        writes,
    })
}

/// Measurement 2: Every convergence run of the configuration, interleaved (floor, kwop, sample-controller for
/// each size and repetition) so slow drifts of the machine hit all three alike.
pub async fn convergence(cfg: &Config) -> Result<Vec<ConvergenceRun>> {
    let mut out = Vec::new();
    for &n in &cfg.conv_sizes {
        for rep in 0..cfg.reps {
            for driver in [Driver::Floor, Driver::FloorSsa, Driver::Kwop, Driver::SampleController] {
                if driver == Driver::SampleController
                    && (cfg.no_sample_controller || (n > 100 && rep >= cfg.sc_reps_large))
                {
                    continue;
                }
                say(format!("convergence: {} N={n} rep {}", driver.label(), rep + 1));
                let r = convergence_run(cfg, driver, n).await?;
                say(format!(
                    "  {:.2}s (creates {:.2}s, controller CPU {:.2}s, apiserver CPU {:.2}s, {} writes)",
                    r.seconds, r.create_seconds, r.controller_cpu_s, r.apiserver_cpu_s, r.writes
                ));
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// Builds `range` Foos with kwop running (kwop creates the Deployments); returns seconds from the
/// first create until all of Foos `0..range.end` converged.
pub(super) async fn build_world(
    cfg: &Config,
    plane: &ControlPlane,
    ns: &str,
    range: std::ops::Range<usize>,
) -> Result<f64> {
    let client = plane.client().await?;
    let mut k = controllers::kwop(&cfg.kwop, plane, &guest_foo_dir()?, &cache_dir(cfg), &[])?;
    world::warm_up(&client, ns).await?;
    let mut tracker = Tracker::start(&client, FOO_GROUP, ns, range.end).await?;
    let t0 = Instant::now();
    let n = range.len();
    world::create_foos(&client, FOO_GROUP, ns, range, cfg.create_concurrency).await?;
    let end = tracker.wait_all(convergence_timeout(Driver::Kwop, n)).await?;
    k.wait_idle(settle(cfg), Duration::from_secs(600)).await?;
    k.stop();
    Ok(end.duration_since(t0).as_secs_f64())
}

/// Waits until a fresh kwop has reconciled at least `n` objects (its initial pass).
async fn wait_reconciled(k: &Controller, n: usize, timeout: Duration) -> Result<()> {
    let start = Instant::now();
    while k.metric("kwop_reconcile_total", &[]) < n as f64 {
        if start.elapsed() > timeout {
            anyhow::bail!(
                "kwop reconciled only {} of {n} objects in {timeout:?}",
                k.metric("kwop_reconcile_total", &[])
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Measurement 3: Steady state: `steady_n` Foos in sync; write requests during a window, for kwop (short
/// resync period) and sample-controller (30 s resync, hard-coded).
pub async fn steady(cfg: &Config) -> Result<Vec<SteadyRun>> {
    let n = cfg.steady_n;
    let plane = start_plane()?;
    let ns = plane.namespace("steady")?;
    say(format!("steady: building {n} Foos in sync with kwop"));
    build_world(cfg, &plane, &ns, 0..n).await?;
    let window = Duration::from_secs(cfg.steady_window_s);
    let mut out = Vec::new();

    // Before (every resync calls the plugin) and after (memoized reconciles), on the same world.
    for memoize in [false, true] {
        out.push(steady_kwop(cfg, &plane, n, window, memoize, &[]).await?);
    }
    if cfg.no_sample_controller {
        for r in &out {
            say(format!("  {}: {} writes, {:.2} s CPU in {window:?}", r.driver.label(), r.total, r.cpu_s));
        }
        return Ok(out);
    }

    say(format!("steady: sample-controller (resync 30s), window {window:?}"));
    let w_start = world::apiserver_writes(&plane)?;
    let sc = controllers::sample_controller(&plane, "steady")?;
    let warmup = Duration::from_secs(cfg.steady_resync_s.clamp(1, 10));
    tokio::time::sleep(warmup).await;
    let (w0, c0) = (world::apiserver_writes(&plane)?, sc.cpu());
    let startup_writes = world::total(&world::writes_between(&w_start, &w0));
    tokio::time::sleep(window).await;
    let (w1, c1) = (world::apiserver_writes(&plane)?, sc.cpu());
    let writes = world::writes_between(&w0, &w1);
    out.push(SteadyRun {
        driver: Driver::SampleController,
        n,
        window_s: window.as_secs_f64(),
        resync_s: 30.0,
        total: world::total(&writes),
        writes,
        reconciles: None,
        plugin_calls: None,
        cpu_s: c1 - c0,
        startup_writes,
    });
    sc.stop();
    for r in &out {
        say(format!(
            "  {}: {} writes in {:.0}s ({:.0}/h) {:?}",
            r.driver.label(),
            r.total,
            r.window_s,
            r.per_hour(),
            r.writes
        ));
    }
    Ok(out)
}

/// kwop's part of measurement 3: restarted on an in-sync world with a short resync, with or
/// without `--memoize`.
pub(super) async fn steady_kwop(
    cfg: &Config,
    plane: &ControlPlane,
    n: usize,
    window: Duration,
    memoize: bool,
    extra: &[String],
) -> Result<SteadyRun> {
    let resync = cfg.steady_resync_s;
    say(format!("steady: kwop --memoize={memoize}, resync {resync}s, window {window:?}"));
    // Counted from before the process starts: what it writes before /readyz is start-up too.
    let w_start = world::apiserver_writes(plane)?;
    let k = controllers::kwop(
        &cfg.kwop,
        plane,
        &guest_foo_dir()?,
        &cache_dir(cfg),
        &[vec![format!("--resync-period={resync}s"), format!("--memoize={memoize}")], extra.to_vec()].concat(),
    )?;
    wait_reconciled(&k, n, Duration::from_secs(300)).await?;
    tokio::time::sleep(Duration::from_secs(resync.min(5))).await;
    const CALLS: &str = "kwop_plugin_call_duration_seconds_count";
    let (w0, r0, p0, c0) =
        (world::apiserver_writes(plane)?, k.metric("kwop_reconcile_total", &[]), k.metric(CALLS, &[]), k.cpu());
    let startup_writes = world::total(&world::writes_between(&w_start, &w0));
    tokio::time::sleep(window).await;
    let (w1, r1, p1, c1) =
        (world::apiserver_writes(plane)?, k.metric("kwop_reconcile_total", &[]), k.metric(CALLS, &[]), k.cpu());
    let writes = world::writes_between(&w0, &w1);
    k.stop();
    Ok(SteadyRun {
        driver: if memoize { Driver::Kwop } else { Driver::KwopNoMemo },
        n,
        window_s: window.as_secs_f64(),
        resync_s: resync as f64,
        total: world::total(&writes),
        writes,
        reconciles: Some(r1 - r0),
        plugin_calls: Some(p1 - p0),
        cpu_s: c1 - c0,
        startup_writes,
    })
}

/// Measurement 4: Memory: RSS of each controller, started fresh, with `n` Foos and `n` Deployments to cache,
/// for each size (and 0). The world grows between sizes (kwop creates the Deployments).
pub async fn memory(cfg: &Config) -> Result<(Vec<MemoryRun>, Vec<(usize, f64)>)> {
    warm_cache(cfg, &[PathBuf::from(plugins::GUEST_FOO)])?;
    let plane = start_plane()?;
    let ns = plane.namespace("memory")?;
    let mut sizes = vec![0];
    sizes.extend(cfg.mem_sizes.iter().copied().filter(|&n| n > 0));
    let (mut out, mut build) = (Vec::new(), Vec::new());
    let mut have = 0;
    let samples = cfg.samples;
    for n in sizes {
        if n > have {
            say(format!("memory: growing the world to {n} Foos + Deployments"));
            let s = build_world(cfg, &plane, &ns, have..n).await?;
            build.push((n - have, s));
            have = n;
        }
        say(format!("memory: kwop with {n} + {n} objects"));
        let mut k = controllers::kwop(&cfg.kwop, &plane, &guest_foo_dir()?, &cache_dir(cfg), &[])?;
        wait_reconciled(&k, n, Duration::from_secs(600)).await?;
        k.wait_idle(settle(cfg), Duration::from_secs(600)).await?;
        let ready_s = k.started.elapsed().as_secs_f64();
        let mem = controllers::sample_memory(&[k.pid()], samples, Duration::from_secs(1)).await;
        out.push(MemoryRun { driver: Driver::Kwop, n, rss: mem.rss, pss: mem.pss, anon: mem.anon, ready_s });
        k.stop();
        if cfg.no_sample_controller {
            say(format!("  kwop N={n}: RSS {:.1} MiB (anonymous {:.1} MiB)", mib(mem.rss), mib(mem.anon)));
            continue;
        }

        say(format!("memory: sample-controller with {n} + {n} objects"));
        let sc = controllers::sample_controller(&plane, &format!("mem-{n}"))?;
        let ready_s = sc.started.elapsed().as_secs_f64();
        tokio::time::sleep(settle(cfg)).await;
        let mem = controllers::sample_memory(&[sc.pid()], samples, Duration::from_secs(1)).await;
        out.push(MemoryRun {
            driver: Driver::SampleController,
            n,
            rss: mem.rss,
            pss: mem.pss,
            anon: mem.anon,
            ready_s,
        });
        sc.stop();
        for r in &out[out.len() - 2..] {
            say(format!(
                "  {} N={}: RSS {:.1} MiB (anonymous {:.1} MiB), PSS {:.1} MiB",
                r.driver.label(),
                r.n,
                mib(r.rss),
                mib(r.anon),
                mib(r.pss)
            ));
        }
    }
    Ok((out, build))
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

/// Measurement 5: Many plugins: one kwop host running `many` copies of guest-foo (each its own CRD group,
/// `many_foos` Foos each, in a namespace per group) vs as many sample-controller processes (all
/// on the shipped CRD, `many_foos` Foos). Every process watches every namespace, so each caches
/// every Deployment in both setups.
pub async fn many(cfg: &Config) -> Result<ManyRun> {
    let k = cfg.many.max(1);
    let m = cfg.many_foos;
    let groups: Vec<String> = (0..k).map(variants::group).collect();
    say(format!("many: building {k} copies of guest-foo"));
    let files = tokio::task::block_in_place(|| variants::build_copies(&cfg.work, &groups))?;
    warm_cache(cfg, &files)?;
    let plane = start_plane()?;
    variants::install_crds(&plane, &groups)?;
    let client = plane.client().await?;
    let all_dir = plugins::folder(&[])?;
    for f in &files {
        std::fs::copy(f, all_dir.join(f.file_name().ok_or_else(|| anyhow!("no file name"))?))?;
    }
    say(format!("many: one kwop host with {k} plugins, {m} Foos each"));
    let watches_before = world::apiserver_watches(&plane, "deployments")?;
    let kw = controllers::kwop(&cfg.kwop, &plane, &all_dir, &cache_dir(cfg), &[])?;
    let mut converged = true;
    for g in &groups {
        let ns = plane.namespace(&format!("many-{}", g.split('.').next().unwrap_or("g")))?;
        let mut t = Tracker::start(&client, g, &ns, m).await?;
        world::create_foos(&client, g, &ns, 0..m, cfg.create_concurrency).await?;
        converged &= t.wait_all(Duration::from_secs(120)).await.is_ok();
    }
    tokio::time::sleep(settle(cfg)).await;
    let all = controllers::sample_memory(&[kw.pid()], cfg.samples, Duration::from_secs(1)).await;
    // The trackers' watches are closed by now: what is open is kwop's.
    let deployment_watches = world::apiserver_watches(&plane, "deployments")? - watches_before;
    let deployment_cache_plugins = kw.metric("kwop_cache_plugins", &[("kind", "apps/v1/Deployment")]);
    kw.stop();

    say("many: one kwop host with one plugin");
    let one_dir = plugins::folder(&[])?;
    std::fs::copy(&files[0], one_dir.join("one.wasm"))?;
    let kw = controllers::kwop(&cfg.kwop, &plane, &one_dir, &cache_dir(cfg), &[])?;
    tokio::time::sleep(settle(cfg)).await;
    let one = controllers::sample_memory(&[kw.pid()], cfg.samples, Duration::from_secs(1)).await;
    kw.stop();

    say(format!("many: {k} sample-controller processes, {m} Foos"));
    let ns = plane.namespace("many-sc")?;
    let first = controllers::sample_controller(&plane, "many-0")?;
    let mut t = Tracker::start(&client, FOO_GROUP, &ns, m).await?;
    world::create_foos(&client, FOO_GROUP, &ns, 0..m, cfg.create_concurrency).await?;
    t.wait_all(Duration::from_secs(180)).await?;
    tokio::time::sleep(settle(cfg)).await;
    let sc_one = controllers::sample_memory(&[first.pid()], cfg.samples, Duration::from_secs(1)).await;
    let mut scs = vec![first];
    for i in 1..k {
        scs.push(controllers::sample_controller(&plane, &format!("many-{i}"))?);
    }
    tokio::time::sleep(settle(cfg)).await;
    let pids: Vec<u32> = scs.iter().map(Controller::pid).collect();
    let sc_all = controllers::sample_memory(&pids, cfg.samples, Duration::from_secs(1)).await;
    for s in scs {
        s.stop();
    }
    let r = ManyRun {
        plugins: k,
        foos_each: m,
        kwop_one_rss: one.rss,
        kwop_rss: all.rss,
        kwop_pss: all.pss,
        kwop_anon: all.anon,
        kwop_one_anon: one.anon,
        sc_one_rss: sc_one.rss,
        sc_rss_total: sc_all.rss,
        sc_pss_total: sc_all.pss,
        sc_anon_total: sc_all.anon,
        kwop_converged: converged,
        deployment_watches: Some(deployment_watches),
        deployment_cache_plugins: Some(deployment_cache_plugins),
    };
    say(format!(
        "  kwop: {deployment_watches} Deployment watch(es) for {deployment_cache_plugins} plugins; 1 plugin {:.1} MiB, {k} plugins {:.1} MiB; sample-controller: 1 {:.1} MiB, {k} {:.1} MiB (PSS {:.1} MiB)",
        mib(r.kwop_one_rss),
        mib(r.kwop_rss),
        mib(r.sc_one_rss),
        mib(r.sc_rss_total),
        mib(r.sc_pss_total)
    ));
    Ok(r)
}

/// The annotation guest-foo v2 puts on Deployments.
pub const V2_ANNOTATION: &str = "samplecontroller.k8s.io/reconciled-by";
