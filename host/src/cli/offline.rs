//! `kwop plugin inspect | reconcile | test | list`: plugins without a cluster.

use super::{PluginCommand, SandboxArgs};
use crate::kinds::Gvk;
use crate::outcome::{self, fence::controller_uid, FenceContext, OutcomeLimits};
use crate::plugin::{wit, CallError, EngineConfig, Limits, LoadedPlugin, PluginEngine, StaticCache};
use anyhow::{anyhow, bail, Context};
use serde_json::{json, Value};
use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

pub(super) fn plugin(cmd: PluginCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PluginCommand::Inspect { file, sandbox } => {
            let engine = engine(&sandbox)?;
            match LoadedPlugin::load_file(&engine, &file, limits(&sandbox)) {
                Ok(p) => {
                    print_json(&describe(&p))?;
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("kwop: {}: {e}", file.display());
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        PluginCommand::Reconcile { file, primary, observed, no_fence, sandbox } => {
            let engine = engine(&sandbox)?;
            let p = LoadedPlugin::load_file(&engine, &file, limits(&sandbox))
                .map_err(|e| anyhow!("{}: {e}", file.display()))?;
            let primary = read_objects(&primary)?
                .into_iter()
                .next()
                .ok_or_else(|| anyhow!("{}: no object in the file", primary.display()))?;
            let mut objects = Vec::new();
            for f in &observed {
                objects.extend(read_objects(f)?);
            }
            let (out, ok) = reconcile_offline(&p, primary, objects, !no_fence);
            print_json(&out)?;
            Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        PluginCommand::Test { file, fixtures, sandbox } => {
            let engine = engine(&sandbox)?;
            let p = LoadedPlugin::load_file(&engine, &file, limits(&sandbox))
                .map_err(|e| anyhow!("{}: {e}", file.display()))?;
            run_fixtures(&p, &fixtures)
        }
        PluginCommand::List { plugins, url, sandbox } => match (plugins, url) {
            (_, Some(url)) => {
                print_json(&fetch_plugins(&url)?)?;
                Ok(ExitCode::SUCCESS)
            }
            (Some(dir), None) => {
                let engine = engine(&sandbox)?;
                let crate::hotswap::folder::Scan { files, errors } =
                    crate::hotswap::folder::scan(&dir).with_context(|| format!("cannot list {}", dir.display()))?;
                let mut out = Vec::new();
                for (name, st) in files {
                    match LoadedPlugin::load_bytes(&engine, &st.bytes, &st.path, limits(&sandbox)) {
                        Ok(p) => out.push(json!({ "file": name, "plugin": describe(&p) })),
                        Err(e) => out.push(json!({ "file": name, "error": e.to_string(), "sha256": st.sha256 })),
                    }
                }
                for (name, e) in errors {
                    out.push(json!({ "file": name, "error": e }));
                }
                print_json(&Value::Array(out))?;
                Ok(ExitCode::SUCCESS)
            }
            (None, None) => bail!("give --plugins DIR or --url http://HOST:PORT"),
        },
    }
}

fn engine(s: &SandboxArgs) -> anyhow::Result<Arc<PluginEngine>> {
    let cache_dir =
        if s.no_cache { None } else { s.cache_dir.clone().or_else(crate::plugin::engine::default_cache_dir) };
    // One-shot tools: no pooling (it reserves address space up front for many instances).
    PluginEngine::new(EngineConfig { pooling: false, cache_dir, ..EngineConfig::default() })
}

/// Limits from the command line.
pub(super) fn limits(s: &SandboxArgs) -> Limits {
    Limits { deadline: s.plugin_timeout, memory_bytes: s.plugin_memory, ..Limits::default() }
}

fn describe(p: &LoadedPlugin) -> Value {
    json!({
        "name": p.info.name,
        "version": p.info.version,
        "primary": p.info.primary,
        "owns": p.info.owns,
        "reads": p.info.reads,
        "sha256": p.sha256,
        "world": "kwop:reconciler@0.1.0",
    })
}

fn print_json(v: &Value) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, v)?;
    writeln!(out)?;
    Ok(())
}

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

fn meta_str<'a>(v: &'a Value, f: &str) -> Option<&'a str> {
    v.get("metadata")?.get(f)?.as_str().filter(|s| !s.is_empty())
}

/// One reconcile with a static cache; returns the JSON to print and whether it succeeded.
pub fn reconcile_offline(p: &LoadedPlugin, primary: Value, observed: Vec<Value>, fence: bool) -> (Value, bool) {
    let mut cache = StaticCache::default();
    for o in observed {
        cache.insert(o);
    }
    let ns = meta_str(&primary, "namespace").map(str::to_string);
    let uid = meta_str(&primary, "uid").unwrap_or_default().to_string();
    let owned = p
        .info
        .owns
        .iter()
        .flat_map(|g| cache.all(g))
        .filter(|o| {
            meta_str(o, "namespace") == ns.as_deref() && !uid.is_empty() && controller_uid(o) == Some(uid.as_str())
        })
        .map(Value::to_string)
        .collect();
    let object = format!("{}/{}", ns.as_deref().unwrap_or(""), meta_str(&primary, "name").unwrap_or(""));
    let req = wit::Request { primary: primary.to_string(), owned };
    let cache = Arc::new(cache);
    let limits = OutcomeLimits::default();
    let error = |message: String, retry: bool| {
        (json!({ "error": { "message": message, "retry": retry, "events": [] } }), false)
    };
    match p.reconcile(&req, object, cache.clone()) {
        Err(e @ CallError::Deadline(_))
        | Err(e @ CallError::OutOfMemory { .. })
        | Err(e @ CallError::Trap(_))
        | Err(e @ CallError::Instantiate(_)) => error(e.to_string(), true),
        Ok(Err(f)) => (outcome::decode_failure(f, &limits).to_json(), false),
        Ok(Ok(raw)) => match outcome::decode(raw, &limits) {
            Err(r) => error(format!("outcome rejected by the host: {r}"), false),
            Ok(o) => {
                if fence {
                    let namespaced = |g: &Gvk| !outcome::fence::well_known_cluster_scoped(g);
                    let observed = |g: &Gvk, ns: Option<&str>, n: &str| {
                        cache.all(g).find(|o| meta_str(o, "name") == Some(n) && meta_str(o, "namespace") == ns).cloned()
                    };
                    let ctx = FenceContext {
                        info: &p.info,
                        primary_namespace: ns.as_deref(),
                        primary_uid: &uid,
                        namespaced: &namespaced,
                        observed: &observed,
                    };
                    if let Err(r) = outcome::fence(&o, &ctx) {
                        return error(format!("outcome rejected by the host: {r}"), false);
                    }
                }
                (o.to_json(), true)
            }
        },
    }
}

/// Runs every fixture under the given folders; prints one line per fixture and a summary.
fn run_fixtures(p: &LoadedPlugin, roots: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let mut dirs = Vec::new();
    for r in roots {
        collect_fixtures(r, &mut dirs)?;
    }
    if dirs.is_empty() {
        bail!("no fixtures found (a fixture is a folder with primary.yaml and expected.json)");
    }
    let (mut passed, mut failed) = (0, 0);
    for d in &dirs {
        match run_fixture(p, d) {
            Ok(()) => {
                passed += 1;
                println!("ok   {}", d.display());
            }
            Err(e) => {
                failed += 1;
                println!("FAIL {}\n{e:#}", d.display());
            }
        }
    }
    println!("{passed} passed, {failed} failed ({} {})", p.info.name, p.info.version);
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn collect_fixtures(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if dir.join("expected.json").is_file() {
        out.push(dir.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<_> =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if e.path().is_dir() {
            collect_fixtures(&e.path(), out)?;
        }
    }
    Ok(())
}

/// A fixture folder: `primary.yaml`, optional `observed.yaml` (any number of documents), and
/// `expected.json` — exactly what `kwop plugin reconcile` must print.
fn run_fixture(p: &LoadedPlugin, dir: &Path) -> anyhow::Result<()> {
    let primary =
        read_objects(&dir.join("primary.yaml"))?.into_iter().next().ok_or_else(|| anyhow!("primary.yaml is empty"))?;
    let observed_file = dir.join("observed.yaml");
    let observed = if observed_file.exists() { read_objects(&observed_file)? } else { Vec::new() };
    let expected: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json"))?)
        .context("expected.json is not JSON")?;
    let (got, _) = reconcile_offline(p, primary, observed, true);
    if got == expected {
        Ok(())
    } else {
        bail!(
            "  expected: {}\n  got:      {}",
            serde_json::to_string(&expected).unwrap_or_default(),
            serde_json::to_string(&got).unwrap_or_default()
        )
    }
}

fn fetch_plugins(url: &str) -> anyhow::Result<Value> {
    let rest = url.strip_prefix("http://").ok_or_else(|| anyhow!("--url must start with http://"))?;
    let host = rest.split('/').next().unwrap_or(rest);
    let mut s = std::net::TcpStream::connect(host).with_context(|| format!("cannot connect to {host}"))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    write!(s, "GET /plugins HTTP/1.0\r\nHost: {host}\r\n\r\n")?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    let body =
        resp.split_once("\r\n\r\n").map(|(_, b)| b).ok_or_else(|| anyhow!("malformed HTTP response from {host}"))?;
    serde_json::from_str(body).context("the host's /plugins did not return JSON")
}
