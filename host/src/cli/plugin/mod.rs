//! `kwop plugin ...`: the offline tools, one dispatcher over independent subcommands, one file
//! each — `inspect` (and `list`), `rbac`, `reconcile`, `validate` and `mutate`, `test`, `replay`, `new`, `push` and
//! `pull` (`oci`). A subcommand parses nothing and shares nothing with its siblings: what two of
//! them need (reading objects, CRDs and fixture folders, one offline reconcile or admission
//! call) is the offline engine below them (`crate::offline`); what all need from the command
//! line (an engine and limits from `SandboxArgs`, a plugin loaded, JSON printed) is here.
//!
//! Floor: the command line, the top. May use `offline`, `plugin`, `schema`, `scaffold`,
//! `shadow` (recordings), `source` (folders and OCI) and `vocab`.

mod inspect;
mod new;
mod oci;
mod rbac;
mod reconcile;
mod replay;
mod test;

pub use oci::{PullArgs, PushArgs, RegistryArgs};

use super::SandboxArgs;
use crate::plugin::LoadedPlugin;
use anyhow::anyhow;
use clap::Subcommand;
use serde_json::Value;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `kwop plugin ...`: one variant per file of this folder.
#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Print a plugin's info() as JSON; a file that is not a valid plugin exits 1 with one line.
    Inspect {
        /// The component.
        file: PathBuf,
        /// Sandbox limits.
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Run one reconcile offline: the cache holds exactly the --observed objects. Prints the
    /// outcome as JSON, or {"error":{...}} and exits 1 when the plugin fails or its outcome is
    /// rejected by the host's write fence.
    Reconcile {
        /// The component.
        file: PathBuf,
        /// The primary object (JSON or YAML file, or - for stdin).
        #[arg(long)]
        primary: PathBuf,
        /// Observed objects for the cache (JSON or YAML; a file may hold several YAML documents
        /// or a List). Repeatable.
        #[arg(long)]
        observed: Vec<PathBuf>,
        /// Print the outcome even if the write fence would reject it.
        #[arg(long)]
        no_fence: bool,
        /// CustomResourceDefinition files (YAML/JSON, several documents allowed): applied objects
        /// and the status are checked against their openAPIV3Schema, as the API server would.
        /// Built-in kinds (ConfigMap, Deployment...) are always checked against their types.
        #[arg(long = "crd", value_name = "FILE")]
        crds: Vec<PathBuf>,
        /// The reconcile's instant (`request.now`, the plugin's wall clock), RFC 3339, e.g.
        /// 2026-01-01T00:00:00Z [default: now].
        #[arg(long, value_parser = humantime::parse_rfc3339_weak)]
        now: Option<std::time::SystemTime>,
        /// Sandbox limits.
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Run a plugin's `validate` offline, as the host's admission webhook would for a CREATE (or,
    /// with --old, an UPDATE) of the object. Prints {"allowed":..,"warnings":[..],"violations":
    /// [{"field":..,"message":..}]} (with "message", what kubectl would print, when refused);
    /// exits 1 when the object is refused or the plugin fails.
    Validate {
        /// The component.
        file: PathBuf,
        /// The request.
        #[command(flatten)]
        request: reconcile::AdmitArgs,
    },
    /// Run a plugin's `mutate` offline, as the host's mutating webhook would for a CREATE (or,
    /// with --old, an UPDATE) of the object, with the host's check that it changes only what the
    /// plugin declared. Prints the verdict with, when allowed, "patch" (the JSONPatch the API
    /// server would get) and "object" (as it would be stored); exits 1 when the object is refused,
    /// the mutation oversteps or the plugin fails.
    Mutate {
        /// The component.
        file: PathBuf,
        /// The request.
        #[command(flatten)]
        request: reconcile::AdmitArgs,
    },
    /// Re-run reconciles recorded by `kwop run --record` (or any fixtures) with a plugin, each at
    /// its recorded clock, and diff the outcomes against the recorded ones. Prints a JSON report;
    /// exits 1 if any outcome differs or a recording cannot be replayed.
    Replay {
        /// The component (e.g. a new version, to see what it would change on real inputs).
        file: PathBuf,
        /// Recording folders, or folders of them (e.g. the `--record` folder).
        #[arg(required = true)]
        recordings: Vec<PathBuf>,
        /// Sandbox limits.
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Run conformance fixtures (folders with primary, observed and expected outcome) against a
    /// plugin; exits 1 if any differs. A fixture's optional call.json fixes the reconcile's
    /// instant (`{"startedAtUnixNanos": N}`, as `kwop run --record` writes it); without one the
    /// plugin's clock reads now.
    Test {
        /// The component.
        file: PathBuf,
        /// Fixture folders, or folders of fixture folders.
        #[arg(required = true)]
        fixtures: Vec<PathBuf>,
        /// CustomResourceDefinition files to check outcomes against (see `reconcile --crd`).
        #[arg(long = "crd", value_name = "FILE")]
        crds: Vec<PathBuf>,
        /// Write what the plugin returns as each fixture's expected.json (creating missing ones)
        /// instead of comparing. Review the diff before committing it.
        #[arg(long)]
        update: bool,
        /// Leave a field out of the comparison, in the notation of the differences printed
        /// (e.g. `.status.conditions`), in expected and actual alike. Repeatable. For fixtures
        /// written for another plugin of the same kind that reports more (or less) than they say.
        #[arg(long = "ignore", value_name = "PATH")]
        ignore: Vec<String>,
        /// Sandbox limits.
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Write a new plugin folder from a template: reconcile logic (Foo -> ConfigMap), the WIT,
    /// a build script, a native unit test with a fake cache and log, fixtures and a README.
    New {
        /// Plugin name (a DNS label, e.g. my-plugin); also the folder's name unless --dir.
        name: String,
        /// Language: rust, js, python, c or go (one template per folder of host/templates).
        #[arg(long, short = 'l')]
        lang: String,
        /// Folder to create [default: ./NAME]; must not exist or be empty.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Push a plugin component to an OCI registry (the wasm layout); prints REGISTRY/REPO@sha256:...
    #[command(after_help = oci::PUSH_HELP)]
    Push(oci::PushArgs),
    /// Pull a plugin component from an OCI registry, verified; prints REGISTRY/REPO@sha256:...
    #[command(after_help = oci::PULL_HELP)]
    Pull(oci::PullArgs),
    /// Print the Role/ClusterRole and bindings the host's service account needs for a plugin's
    /// grants (from FILE.wasm's info(), -f RECONCILERPLUGIN.yaml or --reconciler-plugin NAME), or
    /// with --reconciler-plugin-skeleton a ReconcilerPlugin granting what FILE.wasm asks for.
    #[command(after_help = rbac::HELP)]
    Rbac(rbac::RbacArgs),
    /// List the plugins in a folder (offline) or of a running host (--url http://HOST:PORT).
    List {
        /// Folder of plugins.
        #[arg(long, conflicts_with = "url")]
        plugins: Option<PathBuf>,
        /// A running host's probe address, e.g. http://127.0.0.1:8081.
        #[arg(long)]
        url: Option<String>,
        /// Sandbox limits.
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
}

/// Runs one `kwop plugin` subcommand.
pub fn run(cmd: PluginCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PluginCommand::Inspect { file, sandbox } => inspect::inspect(&file, &sandbox),
        PluginCommand::List { plugins, url, sandbox } => inspect::list(plugins, url, &sandbox),
        PluginCommand::Reconcile { file, primary, observed, no_fence, crds, now, sandbox } => {
            let p = load(&file, &sandbox)?;
            reconcile::reconcile(&p, &primary, &observed, !no_fence, &crds, now)
        }
        PluginCommand::Validate { file, request } => {
            reconcile::admit(&load(&file, &request.sandbox)?, &request, crate::offline::validate_offline)
        }
        PluginCommand::Mutate { file, request } => {
            reconcile::admit(&load(&file, &request.sandbox)?, &request, crate::offline::mutate_offline)
        }
        PluginCommand::Test { file, fixtures, crds, update, ignore, sandbox } => {
            let schemas = crate::offline::load_crds(&crds)?;
            let p = load(&file, &sandbox)?;
            test::run(&p, &fixtures, &schemas, update, &ignore)
        }
        PluginCommand::Replay { file, recordings, sandbox } => replay::run(&load(&file, &sandbox)?, &recordings),
        PluginCommand::New { name, lang, dir } => new::new(&name, &lang, dir),
        PluginCommand::Push(args) => oci::push(args),
        PluginCommand::Pull(args) => oci::pull(args),
        PluginCommand::Rbac(args) => rbac::run(args),
    }
}

/// Loads the plugin a subcommand runs; a file that is not one is an error naming it.
fn load(file: &Path, sandbox: &SandboxArgs) -> anyhow::Result<LoadedPlugin> {
    let engine = sandbox.engine()?;
    LoadedPlugin::load_file(&engine, file, sandbox.limits()).map_err(|e| anyhow!("{}: {e}", file.display()))
}

/// Prints a JSON value to stdout, pretty, one trailing newline.
fn print_json(v: &Value) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, v)?;
    writeln!(out)?;
    Ok(())
}

/// The first object in a file (JSON or YAML, `-` for stdin).
fn first_object(path: &Path) -> anyhow::Result<Value> {
    crate::offline::read_objects(path)?
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("{}: no object in the file", path.display()))
}

/// Every object in the files, in order.
fn all_objects(files: &[PathBuf]) -> anyhow::Result<Vec<Value>> {
    let mut objects = Vec::new();
    for f in files {
        objects.extend(crate::offline::read_objects(f)?);
    }
    Ok(objects)
}
