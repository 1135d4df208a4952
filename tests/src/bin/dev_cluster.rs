//! `kwop-dev-cluster`: the full local control plane for humans, in the foreground.
//!
//! Starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (one fake node),
//! installs the CRDs, starts a local OCI registry (distribution's, plain HTTP on a loopback port:
//! `kwop plugin push` and the host need no flag for it), writes the admin kubeconfig to
//! `--kubeconfig-out` (default `.kwop/dev/kubeconfig`) and the registry's address beside it
//! (`registry`), prints how to use both, and stops everything on Ctrl-C / SIGTERM.

use kwop_tests::{ControlPlane, Mode};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mut out = kwop_tests::repo_root().join(".kwop/dev/kubeconfig");
    let mut mode = Mode::Full;
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--kubeconfig-out" => {
                i += 1;
                out = args.get(i).map(Into::into).ok_or_else(|| anyhow::anyhow!("--kubeconfig-out needs a path"))?;
            }
            "--api-only" => mode = Mode::Api,
            "-h" | "--help" => {
                println!("usage: kwop-dev-cluster [--kubeconfig-out FILE] [--api-only]\n\nRuns a local control plane in the foreground until Ctrl-C.");
                return Ok(());
            }
            other => anyhow::bail!("unknown argument {other:?} (try --help)"),
        }
        i += 1;
    }
    eprintln!("starting the local control plane ({mode:?})...");
    let plane = ControlPlane::start(mode)?;
    let registry = kwop_tests::registry::Registry::start()?;
    if let Some(d) = out.parent() {
        std::fs::create_dir_all(d)?;
    }
    std::fs::copy(&plane.kubeconfig, &out)?;
    println!("control plane ready at {}", plane.server);
    println!("kubeconfig: {}", out.display());
    println!("  export KUBECONFIG={}", out.display());
    println!("  {}/kubectl get nodes", plane.bin.display());
    println!("registry: {} (plain HTTP on loopback)", registry.host_port());
    println!("  kwop plugin push dist/plugin.wasm {}/my-plugin:0.1.0", registry.host_port());
    std::fs::write(out.with_file_name("registry"), registry.host_port())?;
    println!("logs: {}", plane.dir.display());
    println!("Ctrl-C (or SIGTERM) stops it.");
    let ready = out.with_file_name("ready");
    std::fs::write(&ready, plane.server.as_bytes())?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        anyhow::Ok(())
    })?;
    let _ = std::fs::remove_file(&ready);
    eprintln!("stopping the control plane...");
    drop(registry);
    drop(plane);
    Ok(())
}
