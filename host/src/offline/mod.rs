//! `kwop plugin inspect | reconcile | test | list`: plugins without a cluster (push and pull: `oci`).

use super::{PluginCommand, SandboxArgs};
use crate::vocab::Gvk;
use crate::outcome::{self, FenceContext, OutcomeLimits};
use crate::vocab::tracking;
use crate::plugin::{EngineConfig, Limits, LoadedPlugin, PluginEngine, PrimaryScope, Request, StaticCache};
use crate::schema::Schemas;
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
        PluginCommand::New { name, lang, dir } => super::new::new(&name, &lang, dir),
        PluginCommand::Push(args) => super::oci::push(args),
        PluginCommand::Pull(args) => super::oci::pull(args),
        PluginCommand::Reconcile { file, primary, observed, no_fence, crds, now, sandbox } => {
            let schemas = load_crds(&crds)?;
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
            let checks = Checks { fence: !no_fence, schemas: &schemas };
            let (out, ok) = reconcile_offline_at(&p, primary, objects, &checks, now);
            print_json(&out)?;
            Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        PluginCommand::Validate { file, object, old, observed, crds, now, sandbox } => {
            let schemas = load_crds(&crds)?;
            let engine = engine(&sandbox)?;
            let p = LoadedPlugin::load_file(&engine, &file, limits(&sandbox))
                .map_err(|e| anyhow!("{}: {e}", file.display()))?;
            let one = |path: &Path| -> anyhow::Result<Value> {
                read_objects(path)?
                    .into_iter()
                    .next()
                    .ok_or_else(|| anyhow!("{}: no object in the file", path.display()))
            };
            let object = one(&object)?;
            let old = old.as_deref().map(one).transpose()?;
            let mut objects = Vec::new();
            for f in &observed {
                objects.extend(read_objects(f)?);
            }
            let (out, ok) = super::validate::validate_offline(&p, object, old, objects, &schemas, now);
            print_json(&out)?;
            Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        PluginCommand::Replay { file, recordings, sandbox } => {
            let engine = engine(&sandbox)?;
            let p = LoadedPlugin::load_file(&engine, &file, limits(&sandbox))
                .map_err(|e| anyhow!("{}: {e}", file.display()))?;
            super::replay::run(&p, &recordings)
        }
        PluginCommand::Test { file, fixtures, crds, update, ignore, sandbox } => {
            let schemas = load_crds(&crds)?;
            let engine = engine(&sandbox)?;
            let p = LoadedPlugin::load_file(&engine, &file, limits(&sandbox))
                .map_err(|e| anyhow!("{}: {e}", file.display()))?;
            super::fixtures::run(&p, &fixtures, &schemas, update, &ignore)
        }
        PluginCommand::List { plugins, url, sandbox } => match (plugins, url) {
            (_, Some(url)) => {
                print_json(&fetch_plugins(&url)?)?;
                Ok(ExitCode::SUCCESS)
            }
            (Some(dir), None) => {
                let engine = engine(&sandbox)?;
                let crate::source::folder::Scan { files, errors } =
                    crate::source::folder::scan(&dir).with_context(|| format!("cannot list {}", dir.display()))?;
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

pub(super) fn engine(s: &SandboxArgs) -> anyhow::Result<Arc<PluginEngine>> {
    let cache_dir =
        if s.no_cache { None } else { s.cache_dir.clone().or_else(crate::plugin::engine::default_cache_dir) };
    // One-shot tools: no pooling (it reserves address space up front for many instances).
    PluginEngine::new(EngineConfig {
        pooling: false,
        cache_dir,
        cache_max_bytes: s.precompile_cache_max as u64,
        ..EngineConfig::default()
    })
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
        "ownsAcrossNamespaces": p.info.across,
        "reads": p.info.reads,
        "finalizes": p.info.finalizes,
        "validates": p.info.validates,
        "sha256": p.sha256,
        "world": p.world(),
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

/// Loads CRD files for `--crd`.
pub(super) fn load_crds(files: &[PathBuf]) -> anyhow::Result<Schemas> {
    let mut schemas = Schemas::default();
    for f in files {
        schemas.add_crds(&f.display().to_string(), &read_objects(f)?)?;
    }
    Ok(schemas)
}

/// What an offline reconcile checks besides running the plugin.
pub struct Checks<'a> {
    /// Apply the host's write fence.
    pub fence: bool,
    /// Check objects and status against these schemas (and built-in kinds' types).
    pub schemas: &'a Schemas,
}

/// Whether a kind is namespaced, offline: a CRD says, else the well-known cluster-scoped kinds
/// are not and everything else is.
pub(super) fn namespaced(schemas: &Schemas, g: &Gvk) -> bool {
    schemas.namespaced(g).unwrap_or_else(|| !outcome::fence::well_known_cluster_scoped(g))
}

fn kind_of(o: &Value) -> Gvk {
    Gvk::from_api_version(
        o.get("apiVersion").and_then(Value::as_str).unwrap_or_default(),
        o.get("kind").and_then(Value::as_str).unwrap_or_default(),
    )
}

/// Fills in namespaces as they would be on a cluster: a namespaced primary without one is in
/// `default` (as kubectl does), and observed objects without one are in the primary's.
pub(super) fn place_in_namespaces(primary: &mut Value, observed: &mut [Value], schemas: &Schemas) -> Option<String> {
    let set_ns = |o: &mut Value, ns: &str| {
        if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("namespace".into(), ns.into());
        }
    };
    let ns = match meta_str(primary, "namespace") {
        Some(ns) => Some(ns.to_string()),
        None if namespaced(schemas, &kind_of(primary)) => {
            set_ns(primary, "default");
            Some("default".to_string())
        }
        None => None,
    };
    if let Some(ns) = &ns {
        for o in observed.iter_mut() {
            if meta_str(o, "namespace").is_none() && namespaced(schemas, &kind_of(o)) {
                set_ns(o, ns);
            }
        }
    }
    ns
}

/// One reconcile (or, for a primary being deleted, `finalize`) with a static cache, the plugin's
/// clock at `started_at` (a fixture's or a recording's; now when `None`); returns the JSON to
/// print and whether it succeeded.
pub fn reconcile_offline_at(
    p: &LoadedPlugin,
    mut primary: Value,
    mut observed: Vec<Value>,
    checks: &Checks<'_>,
    started_at: Option<std::time::SystemTime>,
) -> (Value, bool) {
    let ns = place_in_namespaces(&mut primary, &mut observed, checks.schemas);
    let mut cache = StaticCache::default();
    for g in p.info.readable() {
        cache.set_namespaced(g.clone(), namespaced(checks.schemas, g));
    }
    for o in observed {
        cache.insert(o);
    }
    let uid = meta_str(&primary, "uid").unwrap_or_default().to_string();
    // As the host: by controller reference (in the primary's namespace when it has one), and for
    // kinds owned across namespaces by the tracking labels, anywhere; each kind sorted.
    let owned = p
        .info
        .owns
        .iter()
        .flat_map(|g| {
            let mut of_kind: Vec<&Value> = cache
                .all(g)
                .filter(|o| {
                    let by_reference = outcome::fence::controller_uid(o) == Some(uid.as_str())
                        && (ns.is_none() || meta_str(o, "namespace") == ns.as_deref());
                    !uid.is_empty()
                        && (by_reference || (p.info.owns_across(g) && tracking::belongs(o, &uid, &p.info.name)))
                })
                .collect();
            of_kind.sort_by_key(|o| (meta_str(o, "namespace"), meta_str(o, "name")));
            of_kind
        })
        .map(Value::to_string)
        .collect();
    let object = format!("{}/{}", ns.as_deref().unwrap_or(""), meta_str(&primary, "name").unwrap_or(""));
    let deleting = primary.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
    let finalizing = deleting
        && p.info.finalizes
        && primary
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|l| l.iter().any(|f| f.as_str() == Some(&p.info.finalizer())));
    if deleting && !finalizing {
        let why = format!(
            "the primary is being deleted and {} is not finalizing it (it needs finalizes and the finalizer {} on the primary): the host calls nothing",
            p.info.name,
            p.info.finalizer()
        );
        return (json!({ "skipped": why }), true);
    }
    let req = Request { primary: primary.to_string(), owned };
    let cache = Arc::new(cache);
    let view = PrimaryScope::new(cache.clone(), ns.clone());
    let limits = OutcomeLimits::default();
    let error = |message: String, retry: bool| {
        (json!({ "error": { "message": message, "retry": retry, "events": [] } }), false)
    };
    let mut spec = crate::plugin::CallSpec::new(object, &req.primary);
    if let Some(at) = started_at {
        spec.started_at = at;
    }
    let fence_ok = |o: &outcome::Outcome| -> Result<(), outcome::Rejection> {
        if !checks.fence {
            return Ok(());
        }
        let is_namespaced = |g: &Gvk| namespaced(checks.schemas, g);
        let observed = |g: &Gvk, ns: Option<&str>, n: &str| {
            cache.all(g).find(|o| meta_str(o, "name") == Some(n) && meta_str(o, "namespace") == ns).cloned()
        };
        let ctx = FenceContext {
            info: &p.info,
            primary_namespace: ns.as_deref(),
            primary_uid: &uid,
            granted: &p.grants.namespaces,
            namespaced: &is_namespaced,
            observed: &observed,
        };
        outcome::fence(o, &ctx).map(|_| ())
    };
    if finalizing {
        return match p.finalize_with(&req, spec, Arc::new(view)) {
            Err(e) => error(e.to_string(), true),
            Ok(Err(f)) => (outcome::decode_failure(f, &limits).to_json(), false),
            Ok(Ok(raw)) => match outcome::decode_finalize(raw, &limits) {
                Err(r) => error(format!("outcome rejected by the host: {r}"), false),
                Ok(o) => match fence_ok(&o.as_outcome()) {
                    Err(r) => error(format!("outcome rejected by the host: {r}"), false),
                    Ok(()) => (o.to_json(), true),
                },
            },
        };
    }
    match p.reconcile_with(&req, spec, Arc::new(view)) {
        Err(e) => error(e.to_string(), true),
        Ok(Err(f)) => (outcome::decode_failure(f, &limits).to_json(), false),
        Ok(Ok(raw)) => match outcome::decode(raw, &limits) {
            Err(r) => error(format!("outcome rejected by the host: {r}"), false),
            Ok(o) => {
                if let Err(r) = fence_ok(&o) {
                    return error(format!("outcome rejected by the host: {r}"), false);
                }
                let refused = schema_violations(&o, &p.info.primary, checks.schemas);
                if !refused.is_empty() {
                    return error(format!("the API server would refuse this outcome: {}", refused.join("; ")), false);
                }
                (o.to_json(), true)
            }
        },
    }
}

/// Every schema violation of an outcome, each naming the object (or status) and the field path.
fn schema_violations(o: &outcome::Outcome, primary: &Gvk, schemas: &Schemas) -> Vec<String> {
    let mut out = Vec::new();
    for intent in &o.apply {
        for v in schemas.check_object(&intent.body) {
            out.push(format!("{} {:?}: {v}", intent.gvk.kind, intent.name));
        }
    }
    if let Some(status) = &o.status {
        for v in schemas.check_status(primary, status) {
            out.push(format!("status of the {}: {v}", primary.kind));
        }
    }
    out
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
