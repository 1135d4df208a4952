//! A real OCI registry for tests: distribution's `registry` (built by `scripts/k8s-bins` from the
//! Go module proxy) on a free loopback port, plain HTTP, filesystem storage in a temp folder.
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! let reg = kwop_tests::registry::Registry::start()?;
//! let reference = format!("{}/kwop:test", reg.host_port()); // e.g. 127.0.0.1:40123/kwop:test
//! // push with any OCI client (plain HTTP: loopback), then e.g.:
//! let (status, headers, _body) = reg.get("/v2/kwop/manifests/test", "application/vnd.oci.image.manifest.v1+json")?;
//! # Ok(()) }
//! ```
//!
//! Each `start()` gives a registry of its own (its own port and storage); it is stopped when the
//! value is dropped and, like every process of the harness, dies with the test binary. The binary
//! is `$KWOP_REGISTRY_BIN`, else `registry` next to the control-plane binaries, else it is built by
//! `scripts/k8s-bins` (which builds only what is missing).

use crate::procs::{free_port, Proc};
use anyhow::{anyhow, bail, Context, Result};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A running registry.
pub struct Registry {
    proc: Proc,
    port: u16,
    config: PathBuf,
    /// Its storage root (blobs and repositories, distribution's filesystem layout).
    pub storage: PathBuf,
    /// Its log file.
    pub log: PathBuf,
}

/// The registry binary (see the module docs for where it comes from).
pub fn binary() -> Result<PathBuf> {
    static BIN: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| find_binary().map_err(|e| format!("{e:#}"))).clone().map_err(|e| anyhow!(e))
}

fn find_binary() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("KWOP_REGISTRY_BIN") {
        return Ok(PathBuf::from(p));
    }
    if let Ok(dir) = crate::plane::binaries() {
        if dir.join("registry").is_file() {
            return Ok(dir.join("registry"));
        }
    }
    // KUBEBUILDER_ASSETS may point at a folder without it: let k8s-bins build it into its cache.
    let script = crate::repo_root().join("scripts/k8s-bins");
    let out = Command::new("bash")
        .arg(&script)
        .arg("--print-dir")
        .env_remove("KUBEBUILDER_ASSETS")
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !out.status.success() {
        bail!("scripts/k8s-bins failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().lines().last().unwrap_or_default());
    let bin = dir.join("registry");
    if !bin.is_file() {
        bail!("scripts/k8s-bins did not build {}", bin.display());
    }
    Ok(bin)
}

impl Registry {
    /// Starts a registry on a free loopback port and waits until `/v2/` answers.
    pub fn start() -> Result<Registry> {
        Self::start_with(None)
    }

    /// Starts a registry that requires HTTP basic auth: `htpasswd` is the file's content
    /// (`user:bcrypt-hash` lines, as `htpasswd -B` writes them).
    pub fn start_with_htpasswd(htpasswd: &str) -> Result<Registry> {
        Self::start_with(Some(htpasswd))
    }

    fn start_with(htpasswd: Option<&str>) -> Result<Registry> {
        let bin = binary()?;
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join("kwop-test").join(format!("{}-registry-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let storage = dir.join("storage");
        std::fs::create_dir_all(&storage)?;
        let port = free_port()?;
        let config = dir.join("config.yml");
        let mut yaml = format!(
            "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n  secret: kwop-test-{n}\n",
            storage.display()
        );
        if let Some(users) = htpasswd {
            let file = dir.join("htpasswd");
            std::fs::write(&file, users)?;
            yaml.push_str(&format!("auth:\n  htpasswd:\n    realm: kwop-test\n    path: {}\n", file.display()));
        }
        std::fs::write(&config, yaml)?;
        let log = dir.join("registry.log");
        // No OpenTelemetry exporter: nothing listens for it here.
        let envs = [("OTEL_TRACES_EXPORTER", "none")];
        let proc = Proc::spawn("registry", &bin, &["serve".into(), config.display().to_string()], &log, &envs)?;
        let mut reg = Registry { proc, port, config, storage, log };
        reg.wait_up(htpasswd.is_some())?;
        Ok(reg)
    }

    fn wait_up(&mut self, auth: bool) -> Result<()> {
        let (port, log) = (self.port, self.log.clone());
        let proc = &mut self.proc;
        let start = Instant::now();
        loop {
            if !proc.running() {
                bail!("registry exited early ({}):\n{}", log.display(), proc.tail(20));
            }
            // With auth, an anonymous /v2/ is refused: that answer means it is up too.
            if matches!(http(port, "GET", "/v2/", ""), Ok((200, _, _)))
                || (auth && matches!(http(port, "GET", "/v2/", ""), Ok((401, _, _))))
            {
                break;
            }
            if start.elapsed() > Duration::from_secs(30) {
                bail!("registry not answering after 30s ({}):\n{}", log.display(), proc.tail(20));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Stops it (an outage: connections refused) until [`Registry::restart`].
    pub fn stop(&mut self) {
        self.proc.stop(Duration::from_secs(5));
    }

    /// Starts it again on the same port with the same storage (what it held is still there).
    pub fn restart(&mut self) -> Result<()> {
        let bin = binary()?;
        let envs = [("OTEL_TRACES_EXPORTER", "none")];
        static RESTARTS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = RESTARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = self.log.with_file_name(format!("registry.restart-{n}.log"));
        self.proc = Proc::spawn("registry", &bin, &["serve".into(), self.config.display().to_string()], &log, &envs)?;
        let auth = std::fs::read_to_string(&self.config).is_ok_and(|c| c.contains("htpasswd"));
        self.wait_up(auth)
    }

    /// `127.0.0.1:PORT`, the registry part of an image reference (`{host_port}/repo:tag`).
    pub fn host_port(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.host_port())
    }

    /// A plain HTTP GET of `path` (e.g. `/v2/kwop/manifests/test`) with an `Accept` header:
    /// (status, headers as lowercase `name: value` lines, body).
    pub fn get(&self, path: &str, accept: &str) -> Result<HttpResponse> {
        http(self.port, "GET", path, accept)
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.proc.running()
    }
}

/// An HTTP answer: status, headers (lowercase name, value), body.
pub type HttpResponse = (u16, Vec<(String, String)>, Vec<u8>);

/// HTTP/1.0 on loopback (the registry closes the connection, so the body is what follows the
/// headers, whatever its type).
fn http(port: u16, method: &str, path: &str, accept: &str) -> Result<HttpResponse> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let accept = if accept.is_empty() { String::new() } else { format!("Accept: {accept}\r\n") };
    write!(s, "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n{accept}\r\n")?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| anyhow!("no HTTP header end"))?;
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|c| c.parse().ok()).unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok((status, headers, raw[end + 4..].to_vec()))
}
