//! A local control plane (or an existing cluster) for tests and the dev cluster.

mod access;
mod full;

use crate::certs::{self, Pki};
use crate::procs::{free_port, Proc};
use anyhow::{anyhow, bail, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// What runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// etcd + kube-apiserver (envtest): objects, no Pods running.
    Api,
    /// Plus kube-controller-manager, kube-scheduler and kwok with one fake node: Deployments get
    /// available replicas, the garbage collector deletes owned objects.
    Full,
}

struct Spec {
    program: PathBuf,
    args: Vec<String>,
}

/// A running control plane, or an external cluster.
pub struct ControlPlane {
    /// Working folder (certs, data, logs, kubeconfig).
    pub dir: PathBuf,
    /// Admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// The API server URL.
    pub server: String,
    /// Folder of the binaries (kubectl, sample-controller, ...).
    pub bin: PathBuf,
    /// Whether this is an existing cluster (`KWOP_TEST_KUBECONFIG`).
    pub external: bool,
    procs: Mutex<BTreeMap<String, Proc>>,
    specs: Mutex<BTreeMap<String, Spec>>,
    mode: Mutex<Mode>,
    pki: Option<Pki>,
}

fn run_dir() -> Result<PathBuf> {
    let base = std::env::temp_dir().join("kwop-test");
    std::fs::create_dir_all(&base)?;
    // Remove folders of earlier runs whose process is gone.
    for e in std::fs::read_dir(&base)?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name.split('-').next().and_then(|p| p.parse::<u32>().ok()) {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = base.join(format!("{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Where the control-plane binaries are: `$KUBEBUILDER_ASSETS`, else built by `scripts/k8s-bins`.
pub fn binaries() -> Result<PathBuf> {
    static BIN: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        let script = crate::repo_root().join("scripts/k8s-bins");
        let out = Command::new("bash")
            .arg(&script)
            .arg("--print-dir")
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!("scripts/k8s-bins failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        let dir = String::from_utf8_lossy(&out.stdout).trim().lines().last().unwrap_or_default().to_string();
        Ok(PathBuf::from(dir))
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

fn http_ok(port: u16, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    let mut r = String::new();
    let _ = s.read_to_string(&mut r);
    r.starts_with("HTTP/1.0 200") || r.starts_with("HTTP/1.1 200")
}

impl ControlPlane {
    /// The plane shared by every test of this binary, started on first use (full mode upgrades
    /// an API-only plane by adding the remaining components).
    pub fn shared(mode: Mode) -> Result<&'static ControlPlane> {
        static PLANE: OnceLock<std::result::Result<ControlPlane, String>> = OnceLock::new();
        let plane = PLANE
            .get_or_init(|| ControlPlane::start(mode).map_err(|e| format!("{e:#}")))
            .as_ref()
            .map_err(|e| anyhow!("{e}"))?;
        plane.ensure(mode)?;
        Ok(plane)
    }

    /// A plane of its own (for tests that restart components). Stopped when dropped.
    pub fn start(mode: Mode) -> Result<ControlPlane> {
        Self::start_with(mode, &[])
    }

    /// A plane of its own whose kube-apiserver gets `apiserver_flags` too (e.g. feature gates).
    pub fn start_with(mode: Mode, apiserver_flags: &[&str]) -> Result<ControlPlane> {
        if let Ok(kc) = std::env::var("KWOP_TEST_KUBECONFIG") {
            let bin = binaries().unwrap_or_default();
            let p = ControlPlane {
                dir: run_dir()?,
                kubeconfig: PathBuf::from(kc),
                server: String::new(),
                bin,
                external: true,
                procs: Mutex::new(BTreeMap::new()),
                specs: Mutex::new(BTreeMap::new()),
                mode: Mutex::new(Mode::Full),
                pki: None,
            };
            p.install_crds()?;
            return Ok(p);
        }
        let bin = binaries()?;
        for b in ["etcd", "kube-apiserver"] {
            if !bin.join(b).is_file() {
                bail!("{} has no {b}", bin.display());
            }
        }
        let dir = run_dir()?;
        let pki = certs::generate(&dir)?;
        let (etcd_port, peer_port, api_port) = (free_port()?, free_port()?, free_port()?);
        let server = format!("https://127.0.0.1:{api_port}");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, certs::admin_kubeconfig(&pki, &server))?;
        let p = ControlPlane {
            dir: dir.clone(),
            kubeconfig,
            server,
            bin: bin.clone(),
            external: false,
            procs: Mutex::new(BTreeMap::new()),
            specs: Mutex::new(BTreeMap::new()),
            mode: Mutex::new(Mode::Api),
            pki: Some(pki.clone()),
        };
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        p.define(
            "etcd",
            &bin.join("etcd"),
            vec![
                format!("--data-dir={}", dir.join("etcd").display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=default={peer_url}"),
                "--unsafe-no-fsync=true".into(),
                "--log-level=warn".into(),
            ],
        );
        p.define(
            "kube-apiserver",
            &bin.join("kube-apiserver"),
            vec![
                format!("--etcd-servers={etcd_url}"),
                "--bind-address=127.0.0.1".into(),
                "--advertise-address=127.0.0.1".into(),
                format!("--secure-port={api_port}"),
                format!("--tls-cert-file={}", pki.server_crt.display()),
                format!("--tls-private-key-file={}", pki.server_key.display()),
                format!("--client-ca-file={}", pki.ca_crt.display()),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                format!("--service-account-key-file={}", pki.sa_pub.display()),
                format!("--service-account-signing-key-file={}", pki.sa_key.display()),
                "--service-cluster-ip-range=10.0.0.0/24".into(),
                "--authorization-mode=RBAC".into(),
                "--allow-privileged=true".into(),
                "--disable-admission-plugins=ServiceAccount".into(),
                "--endpoint-reconciler-type=none".into(),
                "--profiling=false".into(),
                format!("--audit-policy-file={}", crate::audit::policy(&dir)?.display()),
                format!("--audit-log-path={}", dir.join("audit.log").display()),
                "--audit-log-format=json".into(),
            ]
            .into_iter()
            .chain(apiserver_flags.iter().map(|f| f.to_string()))
            .collect(),
        );
        p.start_proc("etcd")?;
        p.wait_etcd(etcd_port)?;
        p.start_proc("kube-apiserver")?;
        p.wait_apiserver()?;
        p.install_crds()?;
        p.ensure(mode)?;
        Ok(p)
    }

    /// Writes the API server served whose user agent contains `user_agent`, as (verb,
    /// resource, name) (see [`crate::audit`]).
    pub fn audited_writes(&self, user_agent: &str) -> Result<Vec<(String, String, String)>> {
        Ok(crate::audit::writes(&self.dir, user_agent).into_iter().map(|w| (w.verb, w.resource, w.name)).collect())
    }

    /// Writes the API server served whose user agent contains `user_agent`, with its answers.
    pub fn audited(&self, user_agent: &str) -> Vec<crate::audit::AuditedWrite> {
        crate::audit::writes(&self.dir, user_agent)
    }

    fn define(&self, name: &str, program: &Path, args: Vec<String>) {
        self.specs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.into(), Spec { program: program.to_path_buf(), args });
    }

    fn start_proc(&self, name: &str) -> Result<()> {
        let specs = self.specs.lock().unwrap_or_else(|e| e.into_inner());
        let spec = specs.get(name).ok_or_else(|| anyhow!("no spec for {name}"))?;
        let log = self.dir.join(format!("{name}.log"));
        // Append across restarts.
        let n = self.procs.lock().unwrap_or_else(|e| e.into_inner()).len();
        let log = if log.exists() { self.dir.join(format!("{name}.{n}.log")) } else { log };
        let proc = Proc::spawn(name, &spec.program, &spec.args, &log, &[])?;
        self.procs.lock().unwrap_or_else(|e| e.into_inner()).insert(name.into(), proc);
        Ok(())
    }

    fn check_alive(&self, name: &str) -> Result<()> {
        let mut procs = self.procs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = procs.get_mut(name) {
            if !p.running() {
                bail!("{name} exited; last log lines ({}):\n{}", p.log.display(), p.tail(15));
            }
        }
        Ok(())
    }

    fn wait_etcd(&self, port: u16) -> Result<()> {
        let start = Instant::now();
        while !http_ok(port, "/health") {
            self.check_alive("etcd")?;
            if start.elapsed() > Duration::from_secs(60) {
                bail!("etcd not healthy after 60s (log: {})", self.dir.join("etcd.log").display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Waits until `/readyz` answers ok.
    pub fn wait_apiserver(&self) -> Result<()> {
        let start = Instant::now();
        loop {
            self.check_alive("kube-apiserver")?;
            let out = self.kubectl_output(&["get", "--raw=/readyz"]);
            if matches!(&out, Ok(o) if o.trim() == "ok") {
                return Ok(());
            }
            if start.elapsed() > Duration::from_secs(120) {
                bail!(
                    "kube-apiserver not ready after 120s: {:?} (log: {})",
                    out.err(),
                    self.dir.join("kube-apiserver.log").display()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        *self.mode.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops a component (SIGTERM, then SIGKILL).
    pub fn stop_component(&self, name: &str) {
        if let Some(mut p) = self.procs.lock().unwrap_or_else(|e| e.into_inner()).remove(name) {
            p.stop(Duration::from_secs(10));
        }
    }

    /// Starts a stopped component again with the same flags (and data).
    pub fn start_component(&self, name: &str) -> Result<()> {
        self.start_proc(name)?;
        if name == "kube-apiserver" {
            self.wait_apiserver()?;
        }
        Ok(())
    }

    /// Log file of a component.
    pub fn log_of(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    /// Stops everything (also done on drop and at process exit).
    pub fn stop(&self) {
        let mut procs = self.procs.lock().unwrap_or_else(|e| e.into_inner());
        for name in ["kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"] {
            if let Some(mut p) = procs.remove(name) {
                p.stop(Duration::from_secs(10));
            }
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
        if !self.external && std::env::var_os("KWOP_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
