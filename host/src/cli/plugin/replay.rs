//! `kwop plugin replay`: recorded reconciles (`kwop run --record`) run again with a plugin, each
//! at its recorded clock, and their outcomes compared with the recorded ones, as a JSON report.

use crate::offline::{read_objects, reconcile_offline_at, Checks};
use crate::plugin::LoadedPlugin;
use crate::schema::Schemas;
use crate::shadow::{compare, record};
use anyhow::{anyhow, Context};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Replays every recording under `roots` and prints the report.
pub(super) fn run(p: &LoadedPlugin, roots: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let mut dirs = Vec::new();
    for r in roots {
        crate::offline::collect(r, false, &mut dirs)?;
    }
    if dirs.is_empty() {
        anyhow::bail!("no recordings found (a recording is a folder with primary.yaml and expected.json, as `kwop run --record` writes)");
    }
    let (mut identical, mut differences, mut unreadable) = (0u64, Vec::new(), Vec::new());
    let mut recorded_with = std::collections::BTreeSet::new();
    for d in &dirs {
        match replay_one(p, d) {
            Ok((object, sha, paths)) => {
                recorded_with.extend(sha);
                if paths.is_empty() {
                    identical += 1;
                } else {
                    differences.push(json!({ "recording": d, "object": object, "paths": paths }));
                }
            }
            Err(e) => unreadable.push(json!({ "recording": d, "error": format!("{e:#}") })),
        }
    }
    let report = json!({
        "plugin": p.info.name, "version": p.info.version, "sha256": p.sha256,
        "recordedWith": recorded_with,
        "replayed": dirs.len(), "identical": identical, "differing": differences.len(),
        "unreadable": unreadable.len(),
        "differences": differences, "errors": unreadable,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(if differences.is_empty() && unreadable.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// One recording: its object, the plugin digest it was recorded with, and what differs.
fn replay_one(p: &LoadedPlugin, dir: &Path) -> anyhow::Result<(String, Option<String>, Vec<String>)> {
    let primary =
        read_objects(&dir.join("primary.yaml"))?.into_iter().next().ok_or_else(|| anyhow!("primary.yaml is empty"))?;
    let observed_file = dir.join("observed.yaml");
    let observed = if observed_file.exists() { read_objects(&observed_file)? } else { Vec::new() };
    let text = std::fs::read_to_string(dir.join("expected.json")).context("cannot read expected.json")?;
    let expected: Value = serde_json::from_str(&text).context("expected.json is not JSON")?;
    let call: Value = match std::fs::read_to_string(dir.join("call.json")) {
        Ok(t) => serde_json::from_str(&t).context("call.json is not JSON")?,
        Err(_) => Value::Null,
    };
    let object = call.get("object").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| {
        let m = |f: &str| primary.pointer(&format!("/metadata/{f}")).and_then(Value::as_str).unwrap_or("").to_string();
        format!("{}/{}", m("namespace"), m("name"))
    });
    let sha = call.get("sha256").and_then(Value::as_str).map(str::to_string);
    // As the host ran it: the plugin's outcome before the write fence, no schema checks.
    let schemas = Schemas::default();
    let checks = Checks { fence: false, schemas: &schemas };
    let (got, _) = reconcile_offline_at(p, primary, observed, &checks, record::started_at(&call));
    Ok((object, sha, compare::differences(&expected, &got)))
}
