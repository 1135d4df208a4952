//! `kwop plugin reconcile` (one reconcile offline: the cache holds exactly the `--observed`
//! objects), `kwop plugin validate` and `kwop plugin mutate` (one admission request offline): the files read, the
//! offline engine run once, its JSON printed; exit 1 when the plugin fails, the fence rejects
//! the outcome or the object is refused.

use super::{all_objects, first_object, print_json};
use crate::offline::{load_crds, reconcile_offline_at, Checks};
use crate::plugin::LoadedPlugin;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

fn code(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

pub(super) fn reconcile(
    p: &LoadedPlugin,
    primary: &Path,
    observed: &[PathBuf],
    fence: bool,
    crds: &[PathBuf],
    now: Option<SystemTime>,
) -> anyhow::Result<ExitCode> {
    let schemas = load_crds(crds)?;
    let primary = first_object(primary)?;
    let objects = all_objects(observed)?;
    let (out, ok) = reconcile_offline_at(p, primary, objects, &Checks { fence, schemas: &schemas }, now);
    print_json(&out)?;
    Ok(code(ok))
}

/// What `kwop plugin validate` and `kwop plugin mutate` are asked (one admission request).
#[derive(clap::Args, Debug)]
pub struct AdmitArgs {
    /// The object to admit (JSON or YAML file, or - for stdin).
    #[arg(long)]
    object: PathBuf,
    /// The stored object, for an UPDATE.
    #[arg(long)]
    old: Option<PathBuf>,
    /// Objects for the cache (as `reconcile --observed`). Repeatable.
    #[arg(long)]
    observed: Vec<PathBuf>,
    /// CustomResourceDefinition files (which kinds are namespaced).
    #[arg(long = "crd", value_name = "FILE")]
    crds: Vec<PathBuf>,
    /// The request's instant, RFC 3339 [default: now].
    #[arg(long, value_parser = humantime::parse_rfc3339_weak)]
    now: Option<SystemTime>,
    /// Sandbox limits.
    #[command(flatten)]
    pub(super) sandbox: super::SandboxArgs,
}

/// The offline engine's answer to one admission request: (what to print, allowed).
type Admit =
    fn(&LoadedPlugin, Value, Option<Value>, Vec<Value>, &crate::schema::Schemas, Option<SystemTime>) -> (Value, bool);

/// One admission request offline, answered by `run` (`validate_offline` or `mutate_offline`).
pub(super) fn admit(p: &LoadedPlugin, a: &AdmitArgs, run: Admit) -> anyhow::Result<ExitCode> {
    let schemas = load_crds(&a.crds)?;
    let object = first_object(&a.object)?;
    let old = a.old.as_deref().map(first_object).transpose()?;
    let objects = all_objects(&a.observed)?;
    let (out, ok) = run(p, object, old, objects, &schemas, a.now);
    print_json(&out)?;
    Ok(code(ok))
}
