//! `kwop run`: the operator host.

use super::RunArgs;
use crate::controller::{ControllerConfig, Shared};
use crate::hotswap::Supervisor;
use crate::leader::gate::{Authority, WriteGate};
use crate::leader::{Election, ElectionConfig, Leadership};
use crate::plugin::{EngineConfig, LimitSet, PluginEngine};
use crate::shard::filter::ShardSelector;
use crate::source::cluster::{ClusterConfig, ClusterSource};
use crate::source::oci::OciConfig;
use crate::source::Command;
use crate::telemetry::{health::Role, http, Health, Metrics};
use anyhow::Context;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use notify::Watcher;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

pub(super) fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let r = rt.block_on(run_async(args));
    // Do not wait for blocking tasks (a compile of a plugin that was being replaced): the
    // shutdown grace is already spent.
    rt.shutdown_timeout(Duration::from_millis(500));
    r?;
    Ok(ExitCode::SUCCESS)
}

/// The default limits (`--plugin-timeout`, `--plugin-memory`) and the `--plugin-limit` overrides.
fn limit_set(args: &RunArgs) -> LimitSet {
    let default = args.sandbox.limits();
    let by_name = args
        .plugin_limits
        .iter()
        .map(|l| {
            let mut x = default.clone();
            x.memory_bytes = l.memory.unwrap_or(x.memory_bytes);
            x.deadline = l.timeout.unwrap_or(x.deadline);
            (l.plugin.clone(), x)
        })
        .collect();
    LimitSet { default, by_name }
}

/// The client configuration: `--kubeconfig`, else the files of `$KUBECONFIG` (a list, merged as
/// kubectl merges them), else `~/.kube/config` — each with `--context` — else in-cluster. A
/// `--context` is never silently dropped: with no kubeconfig to find it in, that is an error.
pub(crate) async fn kube_config(kubeconfig: Option<&std::path::Path>, context: Option<&str>) -> anyhow::Result<Config> {
    let opts = KubeConfigOptions { context: context.map(str::to_string), ..Default::default() };
    if let Some(path) = kubeconfig {
        let kc = Kubeconfig::read_from(path).with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
        return Config::from_custom_kubeconfig(kc, &opts)
            .await
            .with_context(|| format!("invalid kubeconfig {}", path.display()));
    }
    let from_env = std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty());
    let home = std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".kube").join("config"));
    if from_env || home.as_ref().is_some_and(|p| p.is_file()) {
        let kc = Kubeconfig::read().context(if from_env {
            "cannot read the kubeconfig files listed in $KUBECONFIG"
        } else {
            "cannot read ~/.kube/config"
        })?;
        return Config::from_custom_kubeconfig(kc, &opts).await.context("invalid kubeconfig");
    }
    if let Some(c) = context {
        anyhow::bail!("--context {c} given, but there is no kubeconfig (--kubeconfig, $KUBECONFIG or ~/.kube/config)");
    }
    Config::incluster().context(
        "no Kubernetes configuration found (use --kubeconfig, $KUBECONFIG, ~/.kube/config, or run in a cluster)",
    )
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

/// The pod's namespace, from its service account.
fn pod_namespace() -> Option<String> {
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .ok()
        .map(|s| s.trim().to_string())
}

fn election_config(args: &RunArgs, identity: &str) -> anyhow::Result<ElectionConfig> {
    let namespace = args
        .leader_election_namespace
        .clone()
        .or_else(|| args.system_namespace.clone())
        .or_else(pod_namespace)
        .unwrap_or_else(|| "default".into());
    let lease = args.leader_lease_duration;
    let cfg = ElectionConfig {
        namespace,
        name: args.leader_election_id.clone(),
        identity: identity.to_string(),
        lease_duration: lease,
        renew_deadline: args.leader_renew_deadline.unwrap_or(lease.mul_f64(2.0 / 3.0)),
        retry_period: args.leader_retry_period.unwrap_or(lease.div_f64(7.5)),
    };
    cfg.validate().map_err(anyhow::Error::msg)?;
    Ok(cfg)
}

async fn run_async(args: RunArgs) -> anyhow::Result<()> {
    let identity = identity();
    // Sharded, every replica reconciles its part; a leader still writes what is written once.
    let leader_elect = args.leader_elect || args.shard.sharding.is_some();
    let election_cfg = if leader_elect { Some(election_config(&args, &identity)?) } else { None };
    let mut sharding = election_cfg.as_ref().and_then(|e| args.shard.config(e)).map(super::sharding::Sharding::new);
    let mut config = kube_config(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    // Requests carry this replica's identity, so the API server's audit log tells replicas apart.
    if let Ok(ua) = ::http::header::HeaderValue::from_str(&format!("kwop/{} ({identity})", env!("CARGO_PKG_VERSION"))) {
        config.headers.push((::http::header::USER_AGENT, ua));
    }
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::default());
    let flight = Arc::new(crate::telemetry::flight::FlightRecorder::default());
    let leadership = if leader_elect { Leadership::elected() } else { Leadership::always() };
    let lease_client = Client::try_from(config.clone()).context("cannot build a Kubernetes client")?;
    // Every other request goes through the write gate: of the leader, or sharded, of the shard.
    let authority: Arc<dyn Authority> = match &sharding {
        Some(s) => s.shard.clone(),
        None => leadership.clone(),
    };
    let gate = WriteGate::new(authority, metrics.writes_refused_not_leader.clone());
    // Sharded, the watch pool lists and watches its slices with the shard selector (reads only).
    let sliced = match &sharding {
        Some(s) => Some(
            kube::client::ClientBuilder::try_from(config.clone())
                .context("cannot build a Kubernetes client")?
                .with_layer(&ShardSelector::new(s.shard.clone()))
                .build(),
        ),
        None => None,
    };
    let client = kube::client::ClientBuilder::try_from(config)
        .context("cannot build a Kubernetes client")?
        .with_layer(&gate)
        .build();
    let cache_dir = if args.sandbox.no_cache {
        None
    } else {
        args.sandbox.cache_dir.clone().or_else(crate::plugin::engine::default_cache_dir)
    };
    let limits = limit_set(&args);
    let memory_budget = args.plugin_memory_budget.or_else(crate::plugin::admission::default_budget);
    let engine_cfg = EngineConfig {
        cache_dir,
        cache_max_bytes: args.sandbox.precompile_cache_max as u64,
        // The pool's slots must fit the largest memory any plugin may get.
        max_memory_bytes: args.plugin_memory_max.unwrap_or_else(|| {
            let floor = if args.reconciler_plugins { 256 << 20 } else { 64 << 20 };
            limits.ceiling().memory_bytes.max(floor)
        }),
        memory_budget,
        ..EngineConfig::default()
    };
    let engine = PluginEngine::new(engine_cfg).context("cannot start the WebAssembly engine")?;
    engine.admission.check(limits.ceiling().memory_bytes).context("plugin limits")?;
    tracing::info!(budget_bytes = ?memory_budget, "plugin memory budget");
    health.attach_engine(engine.clone());

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
        let router = http::router(metrics.clone(), health.clone(), flight.clone());
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

    let grace = args.shutdown_grace;
    let config = ControllerConfig {
        workers: args.workers,
        resync: args.resync_period,
        memoize: args.memoize,
        requeue_rate: args.requeue_rate,
        namespace: args.namespace.clone(),
        instance: Some(identity.clone()),
        shutdown_grace: grace,
        finalize_patience: args.finalize_patience,
        ..ControllerConfig::default()
    };
    let recorder = match &args.record {
        Some(dir) => Some(Arc::new(
            crate::shadow::record::Recorder::new(dir.clone(), args.record_max as u64)
                .with_context(|| format!("--record {}", dir.display()))?,
        )),
        None => None,
    };
    let mut pool = crate::watch::Pool::new(client.clone(), config.namespace.clone(), metrics.clone());
    if let (Some(s), Some(sliced)) = (&sharding, sliced) {
        pool = pool.sharded(s.shard.clone(), sliced);
    }
    let pool = Arc::new(pool);
    if let Some(s) = sharding.as_mut() {
        s.start(lease_client.clone(), pool.clone(), metrics.clone(), health.clone()).await;
    }
    let system_namespace = args.system_namespace.clone().or_else(pod_namespace).unwrap_or_else(|| "kwop-system".into());
    let admission = match args.webhook.config(&system_namespace, args.namespace.as_deref())? {
        Some(cfg) => Some(
            crate::admission::start(
                cfg,
                client.clone(),
                pool.clone(),
                metrics.clone(),
                leadership.clone(),
                health.clone(),
                stop_http.clone(),
            )
            .await?,
        ),
        None => None,
    };
    let shared = Arc::new(Shared {
        admission,
        pool,
        client,
        metrics: metrics.clone(),
        health: health.clone(),
        config,
        candidates: Default::default(),
        recorder,
        flight,
        shard: sharding.as_ref().map(|s| s.shard.clone()),
    });
    let (tx, mut rx) = mpsc::channel(64);
    let stop_source = tokio_util::sync::CancellationToken::new();
    let mut watcher = None;
    let mut supervisor = match &args.plugins {
        Some(dir) => {
            let supervisor = Supervisor::new(dir.clone(), engine, limits, shared.clone());
            // Follow the plugin folder. Any event triggers a rescan by content hash.
            let watch_tx = tx.clone();
            let mut w = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
                if let Ok(ev) = res {
                    let _ = watch_tx.try_send(rescan_for(&ev.kind));
                }
            })
            .context("cannot watch the plugin folder")?;
            if dir.is_dir() {
                w.watch(dir, notify::RecursiveMode::NonRecursive)
                    .with_context(|| format!("cannot watch {}", dir.display()))?;
            }
            watcher = Some(w);
            supervisor
        }
        None => {
            let (reports_tx, reports_rx) = mpsc::unbounded_channel();
            let supervisor = Supervisor::pushed(engine, limits, shared.clone(), reports_tx);
            let cfg = ClusterConfig {
                namespace: system_namespace.clone(),
                selector: args.reconciler_plugin_selector.clone(),
                oci: OciConfig {
                    insecure: args.insecure_registries.clone(),
                    max_bytes: args.max_plugin_size as u64,
                    ..OciConfig::default()
                },
            };
            tracing::info!(namespace = %cfg.namespace, "running the cluster's ReconcilerPlugins");
            let source = ClusterSource::new(
                shared.client.clone(),
                cfg,
                leadership.clone(),
                health.clone(),
                shared.candidates.clone(),
            );
            tokio::spawn(source.run(tx.clone(), reports_rx, stop_source.clone()));
            supervisor
        }
    };
    supervisor.initial_scan(&mut rx).await?;
    let sup = tokio::spawn(supervisor.run(rx));

    let mut election = None;
    // Sharded, controllers run on every replica; the shard decides what each reconciles.
    let sharded = sharding.is_some();
    if sharded {
        let _ = tx.send(Command::SetActive(true)).await;
    }
    match election_cfg {
        Some(cfg) => {
            tracing::info!(lease = %format!("{}/{}", cfg.namespace, cfg.name), identity = %cfg.identity,
                renew_deadline = ?cfg.renew_deadline, "joining leader election");
            election = Some(Election::start(lease_client.clone(), cfg, leadership.clone()));
        }
        None => {
            health.set_role(Role::Leader);
            metrics.leader.set(1);
            let _ = tx.send(Command::SetActive(true)).await;
        }
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
                    if !sharded {
                        let _ = tx.send(Command::SetActive(is_leader)).await;
                    }
                }
                Err(_) => {
                    tracing::error!("leader election stopped; standing by");
                    health.set_role(Role::Standby);
                    metrics.leader.set(0);
                    if !sharded {
                        let _ = tx.send(Command::SetActive(false)).await;
                    }
                    leading = None;
                }
            }
        }
    }

    // Everything below is bounded: the controllers get the grace, the rest a little more.
    tracing::info!(grace = ?grace, "shutting down: finishing in-flight reconciles");
    drop(watcher);
    // Sharded: the part goes to the others first (its reconciles drained), then the rest stops.
    if let Some(s) = sharding {
        s.leave(lease_client.clone(), grace).await;
    }
    stop_source.cancel();
    let (done_tx, done_rx) = oneshot::channel();
    let _ = tx.send(Command::Shutdown(done_tx)).await;
    if tokio::time::timeout(grace + Duration::from_secs(1), done_rx).await.is_err() {
        tracing::warn!("controllers not stopped within the shutdown grace; exiting anyway");
        sup.abort();
    }
    drop(leading);
    if let Some(e) = election {
        if tokio::time::timeout(Duration::from_secs(3), e.release()).await.is_err() {
            tracing::warn!("could not release the leader lease within 3s; the standby takes over when it expires");
        }
    }
    stop_http.cancel();
    for s in servers {
        let _ = tokio::time::timeout(Duration::from_secs(1), s).await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// A file renamed into place or closed after writing is complete: scan at once. Anything else
/// (a create, a partial write, a removal: a `cp` or a ConfigMap update under way) is debounced.
fn rescan_for(kind: &notify::EventKind) -> Command {
    use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
    use notify::EventKind;
    match kind {
        EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both))
        | EventKind::Access(AccessKind::Close(AccessMode::Write)) => Command::RescanNow,
        _ => Command::Rescan,
    }
}
