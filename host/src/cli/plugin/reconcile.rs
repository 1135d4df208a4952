//! `kwop plugin reconcile` (one reconcile offline: the cache holds exactly the `--observed`
//! objects), `kwop plugin validate` and `kwop plugin mutate` (one admission request offline): the files read, the
//! offline engine run once, its JSON printed; exit 1 when the plugin fails, the fence rejects
//! the outcome or the object is refused.

use super::{all_objects, first_object, print_json};
use crate::offline::{load_crds, mutate_offline, reconcile_offline_at, validate_offline, Checks};
use crate::plugin::LoadedPlugin;
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

pub(super) fn validate(
    p: &LoadedPlugin,
    object: &Path,
    old: Option<&Path>,
    observed: &[PathBuf],
    crds: &[PathBuf],
    now: Option<SystemTime>,
) -> anyhow::Result<ExitCode> {
    let schemas = load_crds(crds)?;
    let object = first_object(object)?;
    let old = old.map(first_object).transpose()?;
    let objects = all_objects(observed)?;
    let (out, ok) = validate_offline(p, object, old, objects, &schemas, now);
    print_json(&out)?;
    Ok(code(ok))
}

pub(super) fn mutate(
    p: &LoadedPlugin,
    object: &Path,
    old: Option<&Path>,
    observed: &[PathBuf],
    crds: &[PathBuf],
    now: Option<SystemTime>,
) -> anyhow::Result<ExitCode> {
    let schemas = load_crds(crds)?;
    let object = first_object(object)?;
    let old = old.map(first_object).transpose()?;
    let objects = all_objects(observed)?;
    let (out, ok) = mutate_offline(p, object, old, objects, &schemas, now);
    print_json(&out)?;
    Ok(code(ok))
}
