//! Running the kwop host as a process against a control plane.

use crate::plane::ControlPlane;
use crate::procs::{free_port, Proc};
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A running `kwop run`.
pub struct Host {
    /// The process.
    pub proc: Proc,
    /// Port serving /metrics, /healthz, /readyz, /plugins.
    pub port: u16,
    /// Its log file.
    pub log: PathBuf,
}

/// Plain HTTP GET on loopback: (status, body).
pub fn http_get(port: u16, path: &str) -> Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut r = String::new();
    s.read_to_string(&mut r)?;
    let status = r.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = r.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((status, body))
}

impl Host {
    /// Starts `bin run --plugins DIR` with the plane's admin kubeconfig and `extra` flags, and
    /// waits until it is ready (or `ready` is false: until it answers /healthz).
    pub fn start(bin: &str, plane: &ControlPlane, plugins: &Path, extra: &[&str], wait_ready: bool) -> Result<Host> {
        Self::start_with_kubeconfig(bin, plane, &plane.kubeconfig, plugins, extra, wait_ready)
    }

    /// Like [`Host::start`] with another kubeconfig (e.g. a service account's token).
    pub fn start_with_kubeconfig(
        bin: &str,
        plane: &ControlPlane,
        kubeconfig: &Path,
        plugins: &Path,
        extra: &[&str],
        wait_ready: bool,
    ) -> Result<Host> {
        Self::start_with_env(bin, plane, kubeconfig, plugins, extra, &[], wait_ready)
    }

    /// Like [`Host::start_with_kubeconfig`] with more environment variables for kwop.
    pub fn start_with_env(
        bin: &str,
        plane: &ControlPlane,
        kubeconfig: &Path,
        plugins: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
        wait_ready: bool,
    ) -> Result<Host> {
        Self::spawn(bin, plane, kubeconfig, format!("--plugins={}", plugins.display()), extra, env, wait_ready)
    }

    /// `bin run --reconciler-plugins` (the cluster's ReconcilerPlugin objects) with `kubeconfig`,
    /// `extra` flags and more environment variables.
    pub fn start_reconciler_plugins(
        bin: &str,
        plane: &ControlPlane,
        kubeconfig: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
        wait_ready: bool,
    ) -> Result<Host> {
        Self::spawn(bin, plane, kubeconfig, "--reconciler-plugins".into(), extra, env, wait_ready)
    }

    fn spawn(
        bin: &str,
        plane: &ControlPlane,
        kubeconfig: &Path,
        source: String,
        extra: &[&str],
        env: &[(&str, &str)],
        wait_ready: bool,
    ) -> Result<Host> {
        let port = free_port()?;
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = plane.dir.join(format!("kwop-{n}.log"));
        // The precompile cache is keyed by component hash and engine: safe to share across runs.
        let cache =
            std::env::var_os("KWOP_CACHE_DIR").map(PathBuf::from).unwrap_or_else(|| plane.dir.join("precompiled"));
        let mut args: Vec<String> = vec![
            "run".into(),
            source,
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--metrics-bind-address=127.0.0.1:{port}"),
            format!("--health-probe-bind-address=127.0.0.1:{port}"),
            format!("--cache-dir={}", cache.display()),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut envs = vec![("KWOP_LOG", "info,kwop=debug")];
        envs.extend_from_slice(env);
        let proc = Proc::spawn("kwop", Path::new(bin), &args, &log, &envs)?;
        Self::attach(proc, port, wait_ready)
    }

    /// Waits for an already started `kwop run` serving its probes on `127.0.0.1:port` until it
    /// is ready (or, when `wait_ready` is false, until it answers /healthz).
    pub fn attach(mut proc: Proc, port: u16, wait_ready: bool) -> Result<Host> {
        let log = proc.log.clone();
        let start = Instant::now();
        loop {
            if !proc.running() {
                bail!("kwop exited early:\n{}", proc.tail(30));
            }
            let path = if wait_ready { "/readyz" } else { "/healthz" };
            if matches!(http_get(port, path), Ok((200, _))) {
                break;
            }
            // Generous: a 15 MB JS or Python component compiles for a minute or more on a cold cache.
            if start.elapsed() > Duration::from_secs(300) {
                bail!("kwop not ready after 300s:\n{}", proc.tail(30));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Host { proc, port, log })
    }

    /// The /metrics text.
    pub fn metrics(&self) -> Result<String> {
        Ok(http_get(self.port, "/metrics")?.1)
    }

    /// Sum of a metric's samples whose label set contains every `labels` pair.
    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> Result<f64> {
        Ok(sum_metric(&self.metrics()?, name, labels))
    }

    /// The host's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Sums the samples of `name` (exact metric name, e.g. `kwop_writes_total`) matching `labels`.
pub fn sum_metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            if metric != name {
                return None;
            }
            if !labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\""))) {
                return None;
            }
            value.parse::<f64>().ok()
        })
        .sum()
}
