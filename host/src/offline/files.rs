//! The offline tools' files: Kubernetes objects in JSON or YAML (one, several documents, a
//! `List`, or stdin), CRD files, and folders of fixtures or recordings.

use crate::schema::Schemas;
use anyhow::{bail, Context};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Reads JSON or YAML objects from a file (or `-` for stdin): one object, several YAML
/// documents, or a `List`.
pub fn read_objects(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text = if path == Path::new("-") {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s)?;
        s
    } else {
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?
    };
    let mut out = Vec::new();
    if text.trim_start().starts_with(['{', '[']) {
        let v: Value = serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))?;
        push_objects(v, &mut out, path)?;
    } else {
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v: Value = serde::Deserialize::deserialize(doc)
                .with_context(|| format!("{} is not valid YAML", path.display()))?;
            if !v.is_null() {
                push_objects(v, &mut out, path)?;
            }
        }
    }
    Ok(out)
}

fn push_objects(v: Value, out: &mut Vec<Value>, path: &Path) -> anyhow::Result<()> {
    match v {
        Value::Array(items) => items.into_iter().try_for_each(|i| push_objects(i, out, path)),
        Value::Object(ref o)
            if o.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"))
                && o.contains_key("items") =>
        {
            match v.get("items") {
                Some(Value::Array(items)) => items.iter().cloned().try_for_each(|i| push_objects(i, out, path)),
                _ => bail!("{}: items of a List must be an array", path.display()),
            }
        }
        Value::Object(_) => {
            out.push(v);
            Ok(())
        }
        _ => bail!("{}: expected a Kubernetes object, found {v}", path.display()),
    }
}

/// Loads CRD files for `--crd`.
pub fn load_crds(files: &[PathBuf]) -> anyhow::Result<Schemas> {
    let mut schemas = Schemas::default();
    for f in files {
        schemas.add_crds(&f.display().to_string(), &read_objects(f)?)?;
    }
    Ok(schemas)
}

/// The fixture (or recording) folders under `dir`: folders with `expected.json` (with `update`,
/// also those with only `primary.yaml` or `object.yaml`), in name order.
pub fn collect(dir: &Path, update: bool, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let case = dir.join("primary.yaml").is_file() || dir.join("object.yaml").is_file();
    if dir.join("expected.json").is_file() || (update && case) {
        out.push(dir.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<_> =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if e.path().is_dir() {
            collect(&e.path(), update, out)?;
        }
    }
    Ok(())
}
