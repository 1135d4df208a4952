//! `kwop plugin push | pull`: plugin components to and from OCI registries (the wasm layout).

use crate::cli::SandboxArgs;
use crate::source::oci::{self, Auth, OciConfig};
use anyhow::{anyhow, Context};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Shown under `kwop plugin push --help`.
pub(super) const PUSH_HELP: &str = "\
The artifact is in the CNCF TAG Runtime wasm layout (config application/vnd.wasm.config.v0+json,
one application/wasm layer), as wkg, Spin and other wasm OCI tools write it. The file is checked
first, as `kwop plugin inspect` does: only a valid kwop plugin is pushed.

Pushes are reproducible: the same file gives the same manifest digest. The config's `created`
time is $SOURCE_DATE_EPOCH (seconds since the epoch) if set, else 1970-01-01T00:00:00Z.

Prints the pushed reference pinned to its manifest digest (REGISTRY/REPO@sha256:...), one line;
use that in a ReconcilerPlugin's spec.source so the cluster runs exactly what you pushed.

Examples:
  kwop plugin push dist/plugin.wasm ghcr.io/acme/foo-plugin:1.0
  kwop plugin push foo.wasm 127.0.0.1:5000/foo:dev       (loopback: plain HTTP, no flag)
  kwop plugin push foo.wasm lab-registry:5000/foo:dev --insecure-registry lab-registry:5000
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) kwop plugin push foo.wasm registry.example.com/foo:$(git rev-parse --short HEAD)";

/// Shown under `kwop plugin pull --help`.
pub(super) const PULL_HELP: &str = "\
Verifies what it downloads: the manifest against the reference's digest (when given), the wasm
layout's media types and single layer, the layer's size against --max-size before downloading,
and the layer's bytes against the manifest's digest. Nothing is written unless all of that holds.

Prints the reference pinned to the manifest's digest (what a tag resolved to), one line.

Examples:
  kwop plugin pull ghcr.io/acme/foo-plugin:1.0 -o foo.wasm
  kwop plugin pull oci://127.0.0.1:5000/foo@sha256:<64 hex>
  kwop plugin pull registry.example.com/team/foo:2 --docker-config ~/.docker/config.json";

/// How to reach the registry.
#[derive(Debug, Clone, Args)]
pub struct RegistryArgs {
    /// Reach this registry over plain HTTP instead of HTTPS (a lab registry); a HOST without a
    /// port covers all its ports. Registries on this machine (localhost, 127.0.0.0/8, ::1) are
    /// plain HTTP without it, as Docker treats them. Repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    pub insecure: Vec<String>,
    /// Credentials: a docker config file (`{"auths": {"HOST[:PORT]": {"auth": base64(user:pass)}}}`,
    /// as `docker login` writes it, or the content of a kubernetes.io/dockerconfigjson Secret)
    /// [default: $DOCKER_CONFIG/config.json, else ~/.docker/config.json, if it exists; else
    /// anonymous]. Credential helpers (credsStore, credHelpers) are not supported.
    #[arg(long, value_name = "PATH")]
    pub docker_config: Option<PathBuf>,
    /// The largest component to send or accept (e.g. 128MiB); a pull checks it from the
    /// manifest, before downloading.
    #[arg(long, value_name = "SIZE", default_value = "128MiB", value_parser = crate::vocab::units::bytes)]
    pub max_size: usize,
    /// The most the whole push or pull may take (e.g. 60s, 5m).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = crate::vocab::units::duration)]
    pub timeout: Duration,
}

/// `kwop plugin push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The component file.
    pub file: PathBuf,
    /// Where to push: REGISTRY/REPO:TAG (an `oci://` or `registry://` prefix is accepted).
    pub reference: String,
    /// Registry options.
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Sandbox limits for checking the file.
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// `kwop plugin pull`.
#[derive(Debug, Args)]
pub struct PullArgs {
    /// What to pull: REGISTRY/REPO:TAG or REGISTRY/REPO@sha256:... (an `oci://` or
    /// `registry://` prefix is accepted).
    pub reference: String,
    /// Where to write the component [default: ./REPO.wasm, REPO being the repository's last
    /// path segment]; written whole or not at all.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Registry options.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

pub(super) fn push(a: PushArgs) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(&a.file).with_context(|| format!("cannot read {}", a.file.display()))?;
    // Parse first: a typo in the reference should not cost a compilation.
    let r = oci::parse_reference(&a.reference)?;
    let engine = a.sandbox.engine()?;
    crate::plugin::LoadedPlugin::load_bytes(&engine, &bytes, &a.file, a.sandbox.limits())
        .map_err(|e| anyhow!("{}: {e}; not pushed", a.file.display()))?;
    drop(engine);
    let (auth, cfg) = registry(&a.registry, r.registry())?;
    let pinned = runtime()?.block_on(oci::push(bytes, &a.reference, &auth, &cfg))?;
    println!("{pinned}");
    Ok(ExitCode::SUCCESS)
}

pub(super) fn pull(a: PullArgs) -> anyhow::Result<ExitCode> {
    let r = oci::parse_reference(&a.reference)?;
    let out = a.output.clone().unwrap_or_else(|| {
        let base = r.repository().rsplit('/').next().unwrap_or("plugin");
        PathBuf::from(format!("{base}.wasm"))
    });
    let (auth, cfg) = registry(&a.registry, r.registry())?;
    let pulled = runtime()?.block_on(oci::pull(&a.reference, &auth, &cfg))?;
    write_atomically(&out, &pulled.bytes).with_context(|| format!("cannot write {}", out.display()))?;
    tracing::info!(file = %out.display(), bytes = pulled.bytes.len(), digest = %pulled.digest, "pulled");
    println!("{}", pulled.pinned);
    Ok(ExitCode::SUCCESS)
}

fn registry(a: &RegistryArgs, registry: &str) -> anyhow::Result<(Auth, OciConfig)> {
    let cfg = OciConfig { insecure: a.insecure.clone(), max_bytes: a.max_size as u64, timeout: a.timeout };
    let file = a.docker_config.clone().or_else(default_docker_config);
    let auth = match file {
        Some(f) => {
            let json = std::fs::read(&f).with_context(|| format!("cannot read the docker config {}", f.display()))?;
            oci::auth_from_docker_config(&json, registry).with_context(|| format!("{}", f.display()))?
        }
        None => Auth::Anonymous,
    };
    Ok((auth, cfg))
}

/// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`, if the file exists.
fn default_docker_config() -> Option<PathBuf> {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")))?;
    Some(dir.join("config.json")).filter(|f| f.is_file())
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_all().build()?)
}

/// Writes through a temporary file in the same folder, so `path` is whole or untouched.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
