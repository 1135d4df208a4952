//! `kwop plugin inspect` (one plugin's `info()` as JSON) and `kwop plugin list` (every plugin in
//! a folder, offline, or of a running host, from its `/plugins` endpoint).

use super::{print_json, SandboxArgs};
use crate::plugin::LoadedPlugin;
use anyhow::{anyhow, bail, Context};
use serde_json::{json, Value};
use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `inspect`: a file that is not a valid plugin exits 1 with one line.
pub(super) fn inspect(file: &Path, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
    let engine = sandbox.engine()?;
    match LoadedPlugin::load_file(&engine, file, sandbox.limits()) {
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

/// `list`: a folder's plugins (each described, or its error), or a running host's.
pub(super) fn list(plugins: Option<PathBuf>, url: Option<String>, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
    match (plugins, url) {
        (_, Some(url)) => {
            print_json(&fetch_plugins(&url)?)?;
            Ok(ExitCode::SUCCESS)
        }
        (Some(dir), None) => {
            let engine = sandbox.engine()?;
            let crate::source::folder::Scan { files, errors } =
                crate::source::folder::scan(&dir).with_context(|| format!("cannot list {}", dir.display()))?;
            let mut out = Vec::new();
            for (name, st) in files {
                match LoadedPlugin::load_bytes(&engine, &st.bytes, &st.path, sandbox.limits()) {
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
    }
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
