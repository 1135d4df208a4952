//! `kwop plugin test`: runs fixture folders through the offline reconcile and compares (or, with
//! `--update`, records) the outcome; differences are reported field by field.
//!
//! A fixture is a folder with `primary.yaml` (the primary object), an optional `observed.yaml`
//! (what the cache holds: any number of YAML documents or a List), and `expected.json`, exactly
//! what `kwop plugin reconcile` prints for them. An optional `call.json` fixes the reconcile's
//! instant (`startedAtUnixNanos`, as a recording has it), so clock-dependent outcomes (a
//! condition's transition time) are reproducible; `--update` writes one with the instant it used
//! when it writes an `expected.json` beside none, so the updated fixture passes on the next run.
//!
//! Where the plugin converts (`info().converts`), each fixture's `primary.yaml` is also converted
//! to every other version it declares and back, as the host's webhook would: a conversion that
//! fails, changes `metadata` or does not give the object back fails the fixture, with a message.
//!
//! A validation fixture has `object.yaml` (the object admitted) instead of `primary.yaml`, an
//! optional `old.yaml` (then it is an UPDATE) and `observed.yaml`, and `expected.json`, exactly
//! what `kwop plugin validate` prints.

use crate::offline::{read_objects, reconcile_offline_at, Checks};
use crate::plugin::LoadedPlugin;
use crate::schema::Schemas;
use anyhow::{anyhow, bail, Context};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Runs (or updates) every fixture under `roots`; prints one line per fixture and a summary.
pub(super) fn run(
    p: &LoadedPlugin,
    roots: &[PathBuf],
    schemas: &Schemas,
    update: bool,
    ignore: &[String],
) -> anyhow::Result<ExitCode> {
    let mut dirs = Vec::new();
    for r in roots {
        crate::offline::collect(r, update, &mut dirs)?;
    }
    if dirs.is_empty() {
        bail!(
            "no fixtures found (a fixture is a folder with primary.yaml — or object.yaml for a validation \
             fixture — and expected.json; --update creates expected.json)"
        );
    }
    let (mut passed, mut failed, mut written) = (0, 0, 0);
    for d in &dirs {
        match run_one(p, d, schemas, update, ignore) {
            Ok(Verdict::Same) => {
                passed += 1;
                println!("ok   {}", d.display());
            }
            Ok(Verdict::Written) => {
                written += 1;
                let pinned = if d.join("call.json").is_file() { " (instant in call.json)" } else { "" };
                println!("wrote {}{pinned}", d.join("expected.json").display());
            }
            Ok(Verdict::Differs(lines)) => {
                failed += 1;
                println!("FAIL {}", d.display());
                for l in lines {
                    println!("  {l}");
                }
            }
            Err(e) => {
                failed += 1;
                println!("FAIL {}\n  {e:#}", d.display());
            }
        }
    }
    let written =
        if written > 0 { format!("{written} written (review them before committing), ") } else { String::new() };
    println!("{written}{passed} passed, {failed} failed ({} {})", p.info.name, p.info.version);
    if failed > 0 && !update {
        println!("to accept what the plugin returns now: kwop plugin test --update FILE FIXTURES...");
    }
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

enum Verdict {
    Same,
    Written,
    Differs(Vec<String>),
}

fn run_one(
    p: &LoadedPlugin,
    dir: &Path,
    schemas: &Schemas,
    update: bool,
    ignore: &[String],
) -> anyhow::Result<Verdict> {
    let first = |name: &str| -> anyhow::Result<Value> {
        read_objects(&dir.join(name))?.into_iter().next().ok_or_else(|| anyhow!("{name} is empty"))
    };
    let observed_file = dir.join("observed.yaml");
    let observed = if observed_file.exists() { read_objects(&observed_file)? } else { Vec::new() };
    let call_file = dir.join("call.json");
    // Updating without a call.json: the instant used is pinned in one written beside.
    let mut pin = None;
    let started_at = match std::fs::read_to_string(&call_file) {
        Ok(text) => {
            let call: Value = serde_json::from_str(&text).context("call.json is not JSON")?;
            let at = crate::shadow::record::started_at(&call)
                .ok_or_else(|| anyhow!("{}: no startedAtUnixNanos (an integer)", call_file.display()))?;
            Some(at)
        }
        Err(_) if update => {
            let now = std::time::SystemTime::now();
            pin = Some(now);
            Some(now)
        }
        Err(_) => None,
    };
    let mut round_trips = Vec::new();
    let (mut got, _) = if dir.join("object.yaml").is_file() {
        let old = if dir.join("old.yaml").is_file() { Some(first("old.yaml")?) } else { None };
        crate::offline::validate_offline(p, first("object.yaml")?, old, observed, schemas, started_at)
    } else {
        let primary = first("primary.yaml")?;
        if p.info.converts() {
            round_trips = crate::offline::round_trips(p, &primary);
        }
        reconcile_offline_at(p, primary, observed, &Checks { fence: true, schemas }, started_at)
    };
    let expected_file = dir.join("expected.json");
    let mut expected: Option<Value> = match std::fs::read_to_string(&expected_file) {
        Ok(text) => Some(serde_json::from_str(&text).context("expected.json is not JSON")?),
        Err(_) if update => None,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", expected_file.display())),
    };
    for path in ignore {
        remove_path(&mut got, path);
        if let Some(e) = expected.as_mut() {
            remove_path(e, path);
        }
    }
    if expected.as_ref() == Some(&got) && round_trips.is_empty() {
        return Ok(Verdict::Same);
    }
    if update {
        let text = serde_json::to_string_pretty(&got)? + "\n";
        std::fs::write(&expected_file, text).with_context(|| format!("cannot write {}", expected_file.display()))?;
        if let Some(at) = pin {
            let nanos = at.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
            let call = serde_json::json!({ "startedAtUnixNanos": nanos });
            std::fs::write(&call_file, serde_json::to_string_pretty(&call)? + "\n")
                .with_context(|| format!("cannot write {}", call_file.display()))?;
        }
        if round_trips.is_empty() {
            return Ok(Verdict::Written);
        }
    }
    // A conversion that does not round-trip fails the fixture whatever expected.json says.
    let mut lines = round_trips;
    if expected.as_ref() == Some(&got) || update {
        return Ok(Verdict::Differs(lines));
    }
    crate::shadow::compare::diff("", expected.as_ref().unwrap_or(&Value::Null), &got, &mut lines);
    Ok(Verdict::Differs(lines))
}

/// Removes the field at `path` (`.status.conditions`: object keys separated by dots) if there.
fn remove_path(v: &mut Value, path: &str) {
    let keys: Vec<&str> = path.trim_start_matches('.').split('.').filter(|k| !k.is_empty()).collect();
    let Some((last, parents)) = keys.split_last() else { return };
    let mut cur = v;
    for k in parents {
        match cur.get_mut(*k) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(*last);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_ignored_path_is_removed_where_it_is_and_nothing_else() {
        let mut v = serde_json::json!({"status": {"availableReplicas": 1, "conditions": []}, "apply": []});
        super::remove_path(&mut v, ".status.conditions");
        super::remove_path(&mut v, ".status.missing.deeper");
        super::remove_path(&mut v, "");
        assert_eq!(v, serde_json::json!({"status": {"availableReplicas": 1}, "apply": []}));
    }
}
