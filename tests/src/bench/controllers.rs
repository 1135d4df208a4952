//! The controllers under test, as processes: `kwop run` and sample-controller.

use super::proc_stats;
use crate::host::{http_get, sum_metric};
use crate::plane::ControlPlane;
use crate::procs::{free_port, Proc};
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A controller process.
pub struct Controller {
    /// The process.
    pub proc: Proc,
    /// kwop's metrics port (None for sample-controller).
    pub port: Option<u16>,
    /// When it was started.
    pub started: Instant,
}

impl Controller {
    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.proc.child.id()
    }

    /// Resident memory now, bytes.
    pub fn rss(&self) -> u64 {
        proc_stats::rss(self.pid())
    }

    /// Proportional set size now, bytes.
    pub fn pss(&self) -> u64 {
        proc_stats::pss(self.pid())
    }

    /// Peak resident memory, bytes.
    pub fn peak_rss(&self) -> u64 {
        proc_stats::peak_rss(self.pid())
    }

    /// CPU time so far, seconds.
    pub fn cpu(&self) -> f64 {
        proc_stats::cpu_seconds(self.pid())
    }

    /// A kwop metric (sum over series matching `labels`); 0 for sample-controller.
    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let Some(port) = self.port else { return 0.0 };
        http_get(port, "/metrics").map(|(_, body)| sum_metric(&body, name, labels)).unwrap_or(0.0)
    }

    /// kwop's `/plugins` document.
    pub fn plugins(&self) -> Result<serde_json::Value> {
        let port = self.port.ok_or_else(|| anyhow::anyhow!("not kwop"))?;
        Ok(serde_json::from_str(&http_get(port, "/plugins")?.1)?)
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.proc.log).unwrap_or_default()
    }

    /// Stops it (SIGTERM, then SIGKILL).
    pub fn stop(mut self) {
        self.proc.stop(Duration::from_secs(10));
    }

    /// For kwop: waits until the queue has been empty, and reconciles have stopped growing, for
    /// `quiet` (the initial pass over every object is done). Returns the reconcile count.
    pub async fn wait_idle(&mut self, quiet: Duration, timeout: Duration) -> Result<f64> {
        let start = Instant::now();
        let mut last = (-1.0, Instant::now());
        loop {
            if !self.proc.running() {
                bail!("the controller exited:\n{}", self.proc.tail(30));
            }
            let r = self.metric("kwop_reconcile_total", &[]);
            let depth = self.metric("kwop_queue_depth", &[]);
            if r != last.0 || depth > 0.0 {
                last = (r, Instant::now());
            } else if last.1.elapsed() >= quiet {
                return Ok(r);
            }
            if start.elapsed() > timeout {
                bail!("kwop still busy after {timeout:?} ({r} reconciles, queue depth {depth})");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// Starts `kwop run` on `plane` with the plugins in `dir`; returns once `/readyz` answers (every
/// plugin loaded and its caches listed). Logs at the default level (`info`), as shipped.
pub fn kwop(bin: &Path, plane: &ControlPlane, dir: &Path, cache_dir: &Path, extra: &[String]) -> Result<Controller> {
    kwop_with(bin, plane, &[format!("--plugins={}", dir.display())], cache_dir, extra)
}

/// [`kwop`] with another source of plugins (`source`: e.g. `--reconciler-plugins` and its flags).
pub fn kwop_with(
    bin: &Path,
    plane: &ControlPlane,
    source: &[String],
    cache_dir: &Path,
    extra: &[String],
) -> Result<Controller> {
    let port = free_port()?;
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log = plane.dir.join(format!("bench-kwop-{n}.log"));
    let mut args: Vec<String> = vec!["run".into()];
    args.extend(source.iter().cloned());
    args.extend([
        format!("--kubeconfig={}", plane.kubeconfig.display()),
        format!("--metrics-bind-address=127.0.0.1:{port}"),
        format!("--health-probe-bind-address=127.0.0.1:{port}"),
        format!("--cache-dir={}", cache_dir.display()),
    ]);
    args.extend(extra.iter().cloned());
    // What-if runs (BENCHMARKS.md): extra flags and environment for every kwop started.
    args.extend(std::env::var("KWOP_BENCH_KWOP_ARGS").unwrap_or_default().split_whitespace().map(str::to_string));
    let what_if_env = std::env::var("KWOP_BENCH_KWOP_ENV").unwrap_or_default();
    let mut env: Vec<(&str, &str)> = vec![("KWOP_LOG", "info")];
    env.extend(what_if_env.split_whitespace().filter_map(|kv| kv.split_once('=')));
    let started = Instant::now();
    let mut proc = Proc::spawn("kwop", bin, &args, &log, &env)?;
    loop {
        if !proc.running() {
            bail!("kwop exited early:\n{}", proc.tail(30));
        }
        if matches!(http_get(port, "/readyz"), Ok((200, _))) {
            break;
        }
        if started.elapsed() > Duration::from_secs(300) {
            bail!("kwop not ready after 300s:\n{}", proc.tail(30));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Controller { proc, port: Some(port), started })
}

/// The sample-controller binary built by scripts/k8s-bins.
pub fn sample_controller_bin(plane: &ControlPlane) -> PathBuf {
    plane.bin.join("sample-controller")
}

/// Starts sample-controller as shipped (`--kubeconfig` only); returns once it logged "Started
/// workers" (its caches are synced).
pub fn sample_controller(plane: &ControlPlane, tag: &str) -> Result<Controller> {
    let log = plane.dir.join(format!("bench-sample-controller-{tag}.log"));
    let started = Instant::now();
    let mut proc = Proc::spawn(
        "sample-controller",
        &sample_controller_bin(plane),
        &[format!("--kubeconfig={}", plane.kubeconfig.display())],
        &log,
        &[],
    )?;
    loop {
        if !proc.running() {
            bail!("sample-controller exited early:\n{}", proc.tail(30));
        }
        if std::fs::read_to_string(&log).unwrap_or_default().contains("Started workers") {
            break;
        }
        if started.elapsed() > Duration::from_secs(300) {
            bail!("sample-controller did not start its workers within 300s:\n{}", proc.tail(30));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Controller { proc, port: None, started })
}

/// Memory of processes (sums), bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    /// Resident set size.
    pub rss: u64,
    /// Proportional set size (shared pages divided among their users).
    pub pss: u64,
    /// Anonymous resident memory (heap, stacks), without the mapped binary.
    pub anon: u64,
}

/// Samples the memory of processes `count` times, `every` apart; returns the medians of the sums.
pub async fn sample_memory(pids: &[u32], count: usize, every: Duration) -> Memory {
    let (mut rss, mut pss, mut anon) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..count.max(1) {
        if i > 0 {
            tokio::time::sleep(every).await;
        }
        rss.push(pids.iter().map(|p| proc_stats::rss(*p)).sum());
        pss.push(pids.iter().map(|p| proc_stats::pss(*p)).sum());
        anon.push(pids.iter().map(|p| proc_stats::rss_anon(*p)).sum());
    }
    let m = super::stats::median_u64;
    Memory { rss: m(&rss), pss: m(&pss), anon: m(&anon) }
}
