//! The command line: `kwop run` (the host on a cluster, `run.rs`, with its `sharding.rs` and
//! `webhook.rs` options), the offline `kwop plugin ...` tools (`plugin/`, one file per
//! subcommand over the offline engine) and `kwop explain` (`explain/`, a running host's flight
//! recorder in words). Run as `kubectl-kwop` (a link on PATH), the binary is the kubectl plugin
//! `kubectl kwop` and says so in its usage.
//!
//! Floor 15 of 0–15 (`docs/ARCHITECTURE.md`). May use: `admission`, `controller`, `hotswap`,
//! `leader`, `offline`, `plugin`, `scaffold`, `schema`, `shadow`, `shard`, `source`, `telemetry`,
//! `vocab`, `watch`. Used by: no one (the top).

pub mod explain;
pub mod plugin;
mod run;
pub mod sharding;
pub mod webhook;

use crate::plugin::{EngineConfig, Limits, PluginEngine};
use crate::telemetry::traces::Traces;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// kwop — a Kubernetes operator host whose reconcile logic runs as WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "kwop", version, about, long_about = None, propagate_version = true, after_help = LOG_HELP)]
pub struct Cli {
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "KWOP_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// How to choose what is logged, shown under `--help`.
const LOG_HELP: &str = "\
Logs go to stderr. KWOP_LOG sets the level, as a tracing filter (RUST_LOG is not read):
  KWOP_LOG=debug kwop ...                        everything at debug and above
  KWOP_LOG=info,kwop::plugin=debug kwop ...      plugin output and log calls at debug
  KWOP_LOG=info,kwop::plugin=off kwop ...        no plugin output
Plugin stdout/stderr and log calls use the target kwop::plugin (stdout at info, stderr at warn;
a traceback stays one record). The wasm backtrace of a trap is logged at debug.
Colours only when stderr is a terminal (NO_COLOR=1 turns them off).";

/// Log output format.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Subcommands.
// Parsed once per process: the size of the larger variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run every plugin in a folder as a controller, following the folder for changes.
    Run(RunArgs),
    /// Work with plugin files offline (no cluster needed).
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
    /// Print the ReconcilerPlugin CustomResourceDefinition (what crds/reconcilerplugin.yaml
    /// holds): `kwop crd | kubectl apply --server-side -f -`.
    Crd,
    /// Say in words why an object looks as it does and what kwop last did to it, from a running
    /// host's flight recorder (its /explain).
    #[command(after_help = explain::HELP)]
    Explain(explain::ExplainArgs),
}

/// Sandbox limits for plugin calls.
#[derive(Debug, Clone, Args)]
pub struct SandboxArgs {
    /// Wall-clock budget of one call into a plugin, info() and reconcile alike (e.g. 1s, 500ms):
    /// instantiation and time inside host imports included.
    #[arg(long, default_value = "1s", value_parser = crate::vocab::units::duration, env = "KWOP_PLUGIN_TIMEOUT")]
    pub plugin_timeout: Duration,
    /// Memory one plugin instance may use, all its linear memories and tables together (e.g.
    /// 64Mi, 256Mi).
    #[arg(long, default_value = "64Mi", value_parser = crate::vocab::units::bytes, env = "KWOP_PLUGIN_MEMORY")]
    pub plugin_memory: usize,
    /// Folder of the precompiled-component cache [default: $XDG_CACHE_HOME/kwop/precompiled].
    #[arg(long, env = "KWOP_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Size cap of the precompiled-component cache (e.g. 512MiB, 2Gi): after each write the least
    /// recently used entries are deleted until the cache fits (the entry just written is always
    /// kept; other files in the folder are left alone). 0 disables the cap.
    #[arg(long, default_value = "1GiB", value_name = "SIZE", value_parser = crate::vocab::units::bytes, env = "KWOP_PRECOMPILE_CACHE_MAX")]
    pub precompile_cache_max: usize,
    /// Do not cache compiled components on disk.
    #[arg(long)]
    pub no_cache: bool,
}

impl SandboxArgs {
    /// An engine for a one-shot tool: no pooling (it reserves address space up front for many
    /// instances), the precompiled cache as the flags say.
    pub fn engine(&self) -> anyhow::Result<Arc<PluginEngine>> {
        let cache_dir =
            if self.no_cache { None } else { self.cache_dir.clone().or_else(crate::plugin::engine::default_cache_dir) };
        PluginEngine::new(EngineConfig {
            pooling: false,
            cache_dir,
            cache_max_bytes: self.precompile_cache_max as u64,
            ..EngineConfig::default()
        })
    }

    /// The limits of one call (`--plugin-timeout`, `--plugin-memory`).
    pub fn limits(&self) -> Limits {
        Limits { deadline: self.plugin_timeout, memory_bytes: self.plugin_memory, ..Limits::default() }
    }
}

/// `kwop run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Folder of plugin components (`*.wasm`); changes are picked up without a restart. Each
    /// plugin's own info() is its authority: for development and the demo.
    #[arg(
        long,
        env = "KWOP_PLUGINS",
        required_unless_present = "reconciler_plugins",
        conflicts_with = "reconciler_plugins"
    )]
    pub plugins: Option<PathBuf>,
    /// Run the plugins of the cluster's ReconcilerPlugin objects (kwop.dev/v1alpha1, see
    /// crds/reconcilerplugin.yaml): each names its component (an OCI artifact or a ConfigMap key)
    /// and the kinds and namespaces the cluster admin grants it. Editing one hot-swaps it.
    #[arg(long)]
    pub reconciler_plugins: bool,
    /// Only the ReconcilerPlugins matching this label selector (e.g. `team=payments`), so
    /// several hosts can split the plugins of one cluster [default: all].
    #[arg(long, value_name = "SELECTOR", requires = "reconciler_plugins")]
    pub reconciler_plugin_selector: Option<String>,
    /// The host's own namespace: ConfigMap sources and pull Secrets of ReconcilerPlugins are read
    /// there only, and the leader Lease lives there [default: the pod's namespace, else
    /// "kwop-system"].
    #[arg(long, env = "KWOP_SYSTEM_NAMESPACE")]
    pub system_namespace: Option<String>,
    /// A registry (host or host:port) pulled from over plain HTTP instead of HTTPS (registries
    /// on this machine — localhost, 127.0.0.0/8, ::1 — are plain HTTP without it). Repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    pub insecure_registries: Vec<String>,
    /// The largest component pulled from a registry (checked from the manifest before download).
    #[arg(long, default_value = "128Mi", value_parser = crate::vocab::units::bytes)]
    pub max_plugin_size: usize,
    /// Record every reconcile's inputs and outcome into this folder (one fixture folder per
    /// reconcile, under one folder per plugin), for `kwop plugin replay` and `kwop plugin test`.
    /// Recordings hold the objects read, so treat the folder like the cluster's data.
    #[arg(long, value_name = "DIR")]
    pub record: Option<std::path::PathBuf>,
    /// Stop recording once the recordings written by this process reach this size.
    #[arg(long, default_value = "256Mi", value_parser = crate::vocab::units::bytes)]
    pub record_max: usize,
    /// The most memory any plugin may get, through --plugin-memory, --plugin-limit or a
    /// ReconcilerPlugin's spec.limits.memory (sizes the sandbox's memory slots) [default: the
    /// largest of those limits, at least 256Mi with --reconciler-plugins, else 64Mi].
    #[arg(long, value_parser = crate::vocab::units::bytes)]
    pub plugin_memory_max: Option<usize>,
    /// Kubeconfig file [default: the files listed in $KUBECONFIG (merged, as kubectl does), else
    /// ~/.kube/config, else the in-cluster service account].
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (from --kubeconfig, $KUBECONFIG or ~/.kube/config) [default: its
    /// current-context]. An unknown context is an error, never a fallback to another cluster.
    #[arg(long)]
    pub context: Option<String>,
    /// Watch and reconcile only this namespace (default: all namespaces).
    #[arg(long, short = 'n', env = "KWOP_NAMESPACE")]
    pub namespace: Option<String>,
    /// Address of /metrics (also serves the probes unless --health-probe-bind-address differs);
    /// "0" disables.
    #[arg(long, alias = "metrics-addr", default_value = "127.0.0.1:8080", env = "KWOP_METRICS_BIND_ADDRESS")]
    pub metrics_bind_address: String,
    /// Address of /healthz, /readyz and /plugins.
    #[arg(long, default_value = "127.0.0.1:8081", env = "KWOP_HEALTH_PROBE_BIND_ADDRESS")]
    pub health_probe_bind_address: String,
    /// Elect a leader through a Lease; only the leader reconciles (with --sharding, every
    /// replica reconciles its part and the leader only writes ReconcilerPlugin status and the
    /// webhook configuration).
    #[arg(long)]
    pub leader_elect: bool,
    /// Namespace of the leader Lease [default: the pod's namespace, else "default"].
    #[arg(long)]
    pub leader_election_namespace: Option<String>,
    /// Name of the leader Lease.
    #[arg(long, default_value = "kwop-leader")]
    pub leader_election_id: String,
    /// Lease duration: how long a crashed leader blocks the standby.
    #[arg(long, default_value = "15s", value_parser = crate::vocab::units::duration)]
    pub leader_lease_duration: Duration,
    /// How long the leader keeps writing without a successful renewal; past it, it stops writing
    /// and steps down — always before another replica can take over [default: 2/3 of the lease
    /// duration, i.e. 10s of 15s, as client-go].
    #[arg(long, value_parser = crate::vocab::units::duration)]
    pub leader_renew_deadline: Option<Duration>,
    /// How often candidates try to acquire, and the leader to renew, the lease [default: the lease
    /// duration / 7.5, i.e. 2s of 15s].
    #[arg(long, value_parser = crate::vocab::units::duration)]
    pub leader_retry_period: Option<Duration>,
    /// How long removing or replacing a plugin, losing leadership or SIGTERM waits for running
    /// reconciles before abandoning them (the next leader or version reconciles again). Keep it
    /// below the pod's terminationGracePeriodSeconds.
    #[arg(long, default_value = "10s", value_parser = crate::vocab::units::duration)]
    pub shutdown_grace: Duration,
    /// How long the deletion of a primary may wait on a `finalize` that keeps saying not yet
    /// before a Warning event `FinalizeWaiting` and the condition `Finalized` say so.
    #[arg(long, default_value = "2m", value_parser = crate::vocab::units::duration)]
    pub finalize_patience: Duration,
    /// Concurrent reconciles per plugin.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Re-check every object this often even without changes (costs no writes when in sync); 0
    /// turns the resync off.
    #[arg(long, default_value = "5m", value_parser = crate::vocab::units::duration)]
    pub resync_period: Duration,
    /// Skip the plugin call for a primary when nothing its last in-sync reconcile depended on
    /// has changed: the resourceVersions of the primary, of what it owns and of what it read, the
    /// plugin and its grants (counted as `kwop_reconcile_total{result="unchanged"}`). `false`
    /// calls the plugin at every resync, e.g. to compare.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub memoize: bool,
    /// Objects per second re-queued after a plugin swap, a resync or a relist.
    #[arg(long, default_value_t = 200.0)]
    pub requeue_rate: f64,
    /// Limits for one plugin (by its info() name), overriding --plugin-timeout/--plugin-memory,
    /// e.g. `--plugin-limit guest-foo-py:memory=128Mi,timeout=2s`. Repeatable. A name that no
    /// loaded plugin has is reported (log and /plugins).
    #[arg(long = "plugin-limit", value_name = "NAME:memory=SIZE,timeout=DURATION", value_parser = crate::vocab::units::plugin_limit)]
    pub plugin_limits: Vec<crate::vocab::units::PluginLimit>,
    /// Memory all running plugin instances together may hold; reconciles wait for their share
    /// (each reserves its plugin's memory limit plus a 2 MiB stack while it runs), so plugins
    /// can never get the pod OOM-killed [default: half of the container's memory limit (cgroup
    /// memory.max), else half of the machine's memory].
    #[arg(long, value_parser = crate::vocab::units::bytes, env = "KWOP_PLUGIN_MEMORY_BUDGET")]
    pub plugin_memory_budget: Option<usize>,
    /// Export OpenTelemetry traces (one per reconcile, admission call and plugin load) over
    /// OTLP/HTTP to this collector, e.g. http://otel-collector:4318 (`/v1/traces` is added)
    /// [default: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else $OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces;
    /// neither set: no traces].
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// The share of traces kept, 0 to 1 (by trace id, so a trace is kept whole or not at all).
    #[arg(long, default_value_t = 1.0, value_name = "RATIO", env = "KWOP_OTLP_SAMPLING")]
    pub otlp_sampling: f64,
    /// Admission webhooks.
    #[command(flatten)]
    pub webhook: webhook::WebhookArgs,
    /// Sharding across replicas.
    #[command(flatten)]
    pub shard: sharding::ShardArgs,
    /// Sandbox limits.
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// Logs to stderr as `KWOP_LOG` says; with `traces`, kwop's spans also go to the trace exporter
/// (whatever the log level: each layer has its own filter).
fn init_tracing(format: LogFormat, traces: Option<&Traces>) {
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, Layer};
    let filter = EnvFilter::try_from_env("KWOP_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour codes only for a person at a terminal, never in a file or a pipe.
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(ansi);
    let fmt = match format {
        LogFormat::Text => fmt.with_filter(filter).boxed(),
        LogFormat::Json => fmt.json().with_filter(filter).boxed(),
    };
    let registry = tracing_subscriber::registry().with(fmt);
    match traces {
        Some(t) => registry.with(t.layer()).init(),
        None => registry.init(),
    }
}

/// The trace pipeline of `kwop run`, when an endpoint is set (flag or environment).
fn start_traces(cli: &Cli) -> anyhow::Result<Option<Traces>> {
    let Command::Run(args) = &cli.command else {
        return Ok(None);
    };
    let Some(endpoint) = crate::telemetry::traces::endpoint(args.otlp_endpoint.as_deref()) else {
        return Ok(None);
    };
    let instance = std::env::var("POD_NAME").or_else(|_| std::env::var("HOSTNAME")).unwrap_or_else(|_| "kwop".into());
    Ok(Some(Traces::start(&endpoint, args.otlp_sampling, &instance)?))
}

/// Parses a bind address; "0" or "" disables the endpoint.
pub fn bind_addr(s: &str) -> anyhow::Result<Option<SocketAddr>> {
    if s.is_empty() || s == "0" {
        return Ok(None);
    }
    let s = if s.starts_with(':') { format!("0.0.0.0{s}") } else { s.to_string() };
    Ok(Some(s.parse().map_err(|e| anyhow::anyhow!("invalid bind address {s:?}: {e}"))?))
}

/// The name kubectl runs its plugin `kubectl kwop` by.
pub const KUBECTL_PLUGIN: &str = "kubectl-kwop";

/// How the binary was called: `kubectl kwop` when its file name (argv[0], a link) is
/// `kubectl-kwop`, else `kwop`.
pub fn program(argv0: Option<&std::ffi::OsStr>) -> &'static str {
    let name = argv0.map(std::path::Path::new).and_then(|p| p.file_name());
    if name.is_some_and(|n| n == KUBECTL_PLUGIN) {
        "kubectl kwop"
    } else {
        "kwop"
    }
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let program = program(std::env::args_os().next().as_deref());
    let cli = if program == "kwop" {
        Cli::parse()
    } else {
        let matches = Cli::command().name(KUBECTL_PLUGIN).bin_name(program).display_name(program).get_matches();
        Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    };
    let traces = match start_traces(&cli) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{program}: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    init_tracing(cli.log_format, traces.as_ref());
    if let (Some(t), Command::Run(a)) = (&traces, &cli.command) {
        tracing::info!(endpoint = %t.endpoint, sampling = a.otlp_sampling, "exporting traces over OTLP/HTTP");
    }
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Plugin(cmd) => plugin::run(cmd),
        Command::Explain(args) => Ok(explain::run(args, program)),
        Command::Crd => crate::vocab::crd::crd_yaml().map_err(anyhow::Error::from).map(|y| {
            print!("{y}");
            ExitCode::SUCCESS
        }),
    };
    // Exports what is left before the process ends.
    drop(traces);
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{program}: {e:#}");
            ExitCode::FAILURE
        }
    }
}
