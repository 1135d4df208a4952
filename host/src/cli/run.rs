//! `kwop run`: the operator host.

use super::RunArgs;
use crate::controller::{ControllerConfig, Shared};
use crate::hotswap::{Command, Supervisor};
use crate::leader::{Election, ElectionConfig};
use crate::plugin::{EngineConfig, PluginEngine};
use crate::telemetry::{health::Role, http, Health, Metrics};
use anyhow::Context;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use notify::Watcher;
use std::process::ExitCode;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

pub(super) fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(run_async(args))?;
    Ok(ExitCode::SUCCESS)
}

async fn client(args: &RunArgs) -> anyhow::Result<Client> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc =
                Kubeconfig::read_from(path).with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            let opts = KubeConfigOptions { context: args.context.clone(), ..Default::default() };
            Config::from_custom_kubeconfig(kc, &opts).await.context("invalid kubeconfig")?
        }
        // $KUBECONFIG, ~/.kube/config, then the in-cluster service account.
        None => Config::infer()
            .await
            .context("no Kubernetes configuration found (use --kubeconfig, $KUBECONFIG, or run in a cluster)")?,
    };
    Client::try_from(config).context("cannot build a Kubernetes client")
}

fn identity() -> String {
    let host = std::env::var("POD_NAME").or_else(|_| std::env::var("HOSTNAME")).unwrap_or_else(|_| "kwop".into());
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{host}_{:08x}{:04x}", nanos, std::process::id() & 0xffff)
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

async fn run_async(args: RunArgs) -> anyhow::Result<()> {
    let client = client(&args).await?;
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::default());
    let cache_dir = if args.sandbox.no_cache {
        None
    } else {
        args.sandbox.cache_dir.clone().or_else(crate::plugin::engine::default_cache_dir)
    };
    let engine_cfg = EngineConfig {
        cache_dir,
        // The pool's slots must fit the largest memory any plugin may get.
        max_memory_bytes: args
            .plugin_limits
            .iter()
            .filter_map(|l| l.memory)
            .fold(args.sandbox.plugin_memory.max(64 << 20), usize::max),
        ..EngineConfig::default()
    };
    let max_instances = engine_cfg.max_instances as usize;
    let engine = PluginEngine::new(engine_cfg).context("cannot start the WebAssembly engine")?;
    let limits = super::offline::limits(&args.sandbox);

    // Probes and metrics first, so a slow plugin load is visible as "not ready".
    let stop_http = tokio_util::sync::CancellationToken::new();
    let metrics_addr = super::bind_addr(&args.metrics_bind_address)?;
    let probe_addr = super::bind_addr(&args.health_probe_bind_address)?;
    let mut servers = Vec::new();
    let mut addrs = vec![metrics_addr];
    if probe_addr != metrics_addr {
        addrs.push(probe_addr);
    }
    for addr in addrs.into_iter().flatten() {
        let router = http::router(metrics.clone(), health.clone());
        let stop = stop_http.clone();
        let listener_check =
            tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
        drop(listener_check);
        servers.push(tokio::spawn(async move {
            if let Err(e) = http::serve(addr, router, async move { stop.cancelled().await }).await {
                tracing::error!("{e:#}");
            }
        }));
    }

    let config = ControllerConfig {
        workers: args.workers,
        resync: args.resync_period,
        requeue_rate: args.requeue_rate,
        namespace: args.namespace.clone(),
        instance: Some(identity()),
        ..ControllerConfig::default()
    };
    let shared = Arc::new(Shared {
        client: client.clone(),
        metrics: metrics.clone(),
        health: health.clone(),
        config,
        instances: Arc::new(tokio::sync::Semaphore::new(max_instances)),
    });

    let overrides = args
        .plugin_limits
        .iter()
        .map(|l| {
            let mut x = limits.clone();
            x.memory_bytes = l.memory.unwrap_or(x.memory_bytes);
            x.deadline = l.timeout.unwrap_or(x.deadline);
            (l.plugin.clone(), x)
        })
        .collect();
    let mut supervisor = Supervisor::new(args.plugins.clone(), engine, limits, shared).with_overrides(overrides);
    supervisor.initial_scan().await?;
    let (tx, rx) = mpsc::channel(64);
    let sup = tokio::spawn(supervisor.run(rx));

    // Follow the plugin folder. Any event triggers a rescan by content hash.
    let watch_tx = tx.clone();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if res.is_ok() {
            let _ = watch_tx.try_send(Command::Rescan);
        }
    })
    .context("cannot watch the plugin folder")?;
    watcher
        .watch(&args.plugins, notify::RecursiveMode::NonRecursive)
        .with_context(|| format!("cannot watch {}", args.plugins.display()))?;

    let mut election = None;
    if args.leader_elect {
        let namespace = args
            .leader_election_namespace
            .clone()
            .or_else(|| {
                std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                    .ok()
                    .map(|s| s.trim().to_string())
            })
            .unwrap_or_else(|| "default".into());
        let secs = args.leader_lease_duration.as_secs().max(2);
        let cfg = ElectionConfig {
            namespace,
            name: args.leader_election_id.clone(),
            identity: identity(),
            duration_secs: secs,
            grace_secs: (secs / 3).max(1),
        };
        tracing::info!(lease = %format!("{}/{}", cfg.namespace, cfg.name), identity = %cfg.identity, "joining leader election");
        let e = Election::start(client.clone(), &cfg).await.context("cannot start leader election")?;
        election = Some(e);
    } else {
        health.set_role(Role::Leader);
        metrics.leader.set(1);
        let _ = tx.send(Command::SetActive(true)).await;
    }

    let mut leading = election.as_ref().map(|e| e.leading.clone());
    let signal = shutdown_signal();
    tokio::pin!(signal);
    loop {
        let changed = async {
            match leading.as_mut() {
                Some(rx) => rx.changed().await.map(|_| *rx.borrow()),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = &mut signal => break,
            r = changed => match r {
                Ok(is_leader) => {
                    tracing::info!(leader = is_leader, "leadership changed");
                    health.set_role(if is_leader { Role::Leader } else { Role::Standby });
                    metrics.leader.set(i64::from(is_leader));
                    let _ = tx.send(Command::SetActive(is_leader)).await;
                }
                Err(_) => {
                    tracing::error!("leader election stopped; standing by");
                    health.set_role(Role::Standby);
                    metrics.leader.set(0);
                    let _ = tx.send(Command::SetActive(false)).await;
                    leading = None;
                }
            }
        }
    }

    tracing::info!("shutting down: finishing in-flight reconciles");
    drop(watcher);
    let (done_tx, done_rx) = oneshot::channel();
    let _ = tx.send(Command::Shutdown(done_tx)).await;
    let _ = done_rx.await;
    let _ = sup.await;
    // The election task ends (releasing the Lease) once every receiver is gone: ours too.
    drop(leading);
    if let Some(e) = election {
        if tokio::time::timeout(std::time::Duration::from_secs(5), e.release()).await.is_err() {
            tracing::warn!("could not release the leader lease within 5s; the standby takes over when it expires");
        }
    }
    stop_http.cancel();
    for s in servers {
        let _ = s.await;
    }
    tracing::info!("stopped");
    Ok(())
}
