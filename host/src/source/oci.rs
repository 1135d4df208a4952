//! Plugins in OCI registries: pull and push WebAssembly components in the CNCF TAG Runtime wasm
//! layout (config `application/vnd.wasm.config.v0+json`, one `application/wasm` layer), as `wkg
//! oci`, Spin and wasm-pkg-tools do, with `oci-client` and `oci-wasm`.
//!
//! A pull checks everything it is given: the manifest's bytes against the reference's digest
//! (when it has one), the media types and the layer count, the layer's size against
//! [`OciConfig::max_bytes`] before downloading it, and the layer's bytes against the manifest's
//! digest. A push is reproducible: the same component gives the same manifest digest.

mod auth;
mod error;

pub use auth::{auth_from_docker_config, Auth};
pub use error::OciError;

use futures::StreamExt as _;
use oci_client::client::{ClientConfig, ClientProtocol, ImageLayer};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::{Client, Reference};
use oci_wasm::{ToConfig as _, WasmConfig, WASM_LAYER_MEDIA_TYPE, WASM_MANIFEST_CONFIG_MEDIA_TYPE};
use sha2::{Digest as _, Sha256};
use std::time::Duration;

/// The OCI image manifest media type, which the wasm layout uses.
pub const MANIFEST_MEDIA_TYPE: &str = oci_wasm::WASM_MANIFEST_MEDIA_TYPE;
/// The default [`OciConfig::max_bytes`]: 128 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 128 << 20;
/// The default [`OciConfig::timeout`]: 60 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How to reach registries.
#[derive(Debug, Clone)]
pub struct OciConfig {
    /// Registries (`host` or `host:port`) reached over plain HTTP instead of HTTPS, e.g. a
    /// loopback registry. A `host` entry covers every port of that host.
    pub insecure: Vec<String>,
    /// The largest component a pull accepts (and a push sends), from the manifest's layer size,
    /// before anything is downloaded.
    pub max_bytes: u64,
    /// The most one pull or push may take, all requests together: a registry that accepts
    /// connections and never answers cannot hang the caller.
    pub timeout: Duration,
}

impl Default for OciConfig {
    fn default() -> Self {
        OciConfig { insecure: Vec::new(), max_bytes: DEFAULT_MAX_BYTES, timeout: DEFAULT_TIMEOUT }
    }
}

/// A pulled and verified component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// The component's bytes (the layer), verified against the manifest's layer digest.
    pub bytes: Vec<u8>,
    /// The manifest's digest, `sha256:<hex>`: what a tag resolved to.
    pub digest: String,
    /// The reference pinned to that digest: `registry/repository@sha256:<hex>`.
    pub pinned: String,
}

/// Pulls the component at `reference` (`host/repo:tag` or `host/repo@sha256:...`, optionally
/// prefixed `oci://` or `registry://`) and verifies it (see the module docs).
pub async fn pull(reference: &str, auth: &Auth, cfg: &OciConfig) -> Result<Pulled, OciError> {
    let r = parse_reference(reference)?;
    let name = r.whole();
    within(cfg.timeout, &name, pull_inner(&r, &name, auth, cfg)).await
}

async fn pull_inner(r: &Reference, name: &str, auth: &Auth, cfg: &OciConfig) -> Result<Pulled, OciError> {
    let client = client(r, cfg);
    let accepted = [
        MANIFEST_MEDIA_TYPE,
        oci_client::manifest::IMAGE_MANIFEST_MEDIA_TYPE,
        // Asked for only to say clearly that an index is not a component.
        oci_client::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE,
        oci_client::manifest::IMAGE_MANIFEST_LIST_MEDIA_TYPE,
    ];
    let (raw, _) =
        client.pull_manifest_raw(r, &auth.to_client(), &accepted).await.map_err(|e| OciError::from_client(name, e))?;
    let digest = verify_manifest(name, r.digest(), &raw)?;
    let layer = wasm_layer(name, &raw)?;
    let size = u64::try_from(layer.size).map_err(|_| OciError::NotAComponent {
        reference: name.into(),
        detail: "its layer has a negative size".into(),
    })?;
    if size > cfg.max_bytes {
        return Err(OciError::TooLarge { reference: name.into(), size, limit: cfg.max_bytes });
    }
    let mut stream = client.pull_blob_stream(r, &layer).await.map_err(|e| OciError::from_client(name, e))?;
    let mut bytes = Vec::with_capacity(size as usize);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| stream_error(name, &layer, e))?;
        if (bytes.len() + chunk.len()) as u64 > size {
            return Err(OciError::DigestMismatch {
                reference: name.into(),
                what: "layer",
                expected: layer.digest.clone(),
                actual: format!("more than the {size} bytes the manifest gives"),
            });
        }
        bytes.extend_from_slice(&chunk);
    }
    verify_layer(name, &layer.digest, &bytes)?;
    if !is_component(&bytes) {
        return Err(OciError::NotAComponent {
            reference: name.into(),
            detail: "its application/wasm layer is not a WebAssembly component (a core module, or not wasm)".into(),
        });
    }
    let pinned = format!("{}/{}@{digest}", r.registry(), r.repository());
    Ok(Pulled { bytes, digest, pinned })
}

/// Pushes `bytes` (a WebAssembly component) to `reference` (a tag) in the wasm layout and
/// returns it pinned: `registry/repository@sha256:<manifest digest>`. The config's `created` is
/// `$SOURCE_DATE_EPOCH` (seconds), else the Unix epoch, so the same bytes give the same digest.
pub async fn push(bytes: Vec<u8>, reference: &str, auth: &Auth, cfg: &OciConfig) -> Result<String, OciError> {
    let r = parse_reference(reference)?;
    let name = r.whole();
    if r.digest().is_some() {
        return Err(OciError::InvalidReference {
            reference: reference.into(),
            detail: "a push needs a tag (host/repo:tag), not a digest: the digest is what the push computes".into(),
        });
    }
    if bytes.len() as u64 > cfg.max_bytes {
        return Err(OciError::TooLarge { reference: name, size: bytes.len() as u64, limit: cfg.max_bytes });
    }
    let (manifest, config, layer) = wasm_artifact(&name, bytes, created_time())?;
    within(cfg.timeout, &name, async {
        let client = client(&r, cfg);
        client.store_auth_if_needed(r.resolve_registry(), &auth.to_client()).await;
        let e = |e| OciError::from_client(&name, e);
        client.push_blob(&r, layer.data.clone(), &manifest.layers[0].digest).await.map_err(e)?;
        client.push_blob(&r, config.data.clone(), &manifest.config.digest).await.map_err(e)?;
        let body = serde_json::to_vec(&manifest).map_err(|err| OciError::Registry {
            reference: name.clone(),
            detail: format!("cannot encode the manifest: {err}"),
        })?;
        let digest = sha256_digest(&body);
        let content_type = http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE);
        client.push_manifest_raw(&r, body, content_type).await.map_err(e)?;
        Ok(format!("{}/{}@{digest}", r.registry(), r.repository()))
    })
    .await
}

/// The manifest, config and layer of a component in the wasm layout (pure: no I/O).
pub(crate) fn wasm_artifact(
    name: &str,
    bytes: Vec<u8>,
    created: chrono::DateTime<chrono::Utc>,
) -> Result<(OciImageManifest, oci_client::client::Config, ImageLayer), OciError> {
    if !is_component(&bytes) {
        return Err(OciError::NotAComponent {
            reference: name.into(),
            detail: "the file is not a WebAssembly component (a core module, or not wasm)".into(),
        });
    }
    let not_component = |e: anyhow::Error| OciError::NotAComponent { reference: name.into(), detail: format!("{e:#}") };
    let (mut config, layer) = WasmConfig::from_raw_component(bytes, None).map_err(not_component)?;
    config.created = created;
    let config = config.to_config().map_err(not_component)?;
    let layers = [layer];
    let mut manifest = OciImageManifest::build(&layers, &config, None);
    manifest.media_type = Some(MANIFEST_MEDIA_TYPE.to_string());
    let [layer] = layers;
    Ok((manifest, config, layer))
}

/// `$SOURCE_DATE_EPOCH` if set (and a number of seconds), else the Unix epoch.
pub fn created_time() -> chrono::DateTime<chrono::Utc> {
    std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .unwrap_or(chrono::DateTime::UNIX_EPOCH)
}

/// Parses a reference, with an optional `oci://` or `registry://` prefix. Digests must be
/// `sha256:` and 64 lowercase hex digits. Without a registry, Docker Hub is meant (as for
/// `docker pull`); without a tag or digest, `latest`.
pub fn parse_reference(reference: &str) -> Result<Reference, OciError> {
    let bad = |detail: String| OciError::InvalidReference { reference: reference.into(), detail };
    let s = reference.trim();
    let s = s.strip_prefix("oci://").or_else(|| s.strip_prefix("registry://")).unwrap_or(s);
    if s.is_empty() {
        return Err(bad("it is empty".into()));
    }
    if s.contains("://") {
        return Err(
            bad("only the oci:// and registry:// prefixes are understood (e.g. ghcr.io/org/plugin:1.0)".into()),
        );
    }
    let r: Reference =
        s.parse().map_err(|e| bad(format!("{e} (expected host/repository:tag or host/repository@sha256:...)")))?;
    if let Some(d) = r.digest() {
        let hex = d.strip_prefix("sha256:").unwrap_or_default();
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(bad(format!("digest {d:?} is not sha256: and 64 lowercase hex digits")));
        }
    }
    Ok(r)
}

/// Checks the manifest's bytes against the digest the reference asked for (if any) and returns
/// their digest: what the registry served is what was asked for, whatever its headers say.
pub(crate) fn verify_manifest(name: &str, expected: Option<&str>, raw: &[u8]) -> Result<String, OciError> {
    let actual = sha256_digest(raw);
    match expected {
        Some(want) if want != actual => {
            Err(OciError::DigestMismatch { reference: name.into(), what: "manifest", expected: want.into(), actual })
        }
        _ => Ok(actual),
    }
}

/// Checks a layer's bytes against its digest in the manifest.
pub(crate) fn verify_layer(name: &str, expected: &str, bytes: &[u8]) -> Result<(), OciError> {
    let actual = sha256_digest(bytes);
    if actual != expected {
        return Err(OciError::DigestMismatch {
            reference: name.into(),
            what: "layer",
            expected: expected.into(),
            actual,
        });
    }
    Ok(())
}

/// The single `application/wasm` layer of a manifest in the wasm layout, or what was found.
pub(crate) fn wasm_layer(name: &str, raw: &[u8]) -> Result<OciDescriptor, OciError> {
    let not = |detail: String| OciError::NotAComponent { reference: name.into(), detail };
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Probe {
        media_type: Option<String>,
        manifests: Option<serde_json::Value>,
    }
    let probe: Probe = serde_json::from_slice(raw).map_err(|e| not(format!("its manifest is not JSON: {e}")))?;
    let index_types =
        [oci_client::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE, oci_client::manifest::IMAGE_MANIFEST_LIST_MEDIA_TYPE];
    if probe.manifests.is_some() || probe.media_type.as_deref().is_some_and(|t| index_types.contains(&t)) {
        return Err(not("it is an image index (a multi-platform image), not a single wasm artifact".into()));
    }
    let m: OciImageManifest = serde_json::from_slice(raw).map_err(|e| not(format!("unusable image manifest: {e}")))?;
    let layer_types: Vec<&str> = m.layers.iter().map(|l| l.media_type.as_str()).collect();
    let found = || format!("config {}, layers [{}]", m.config.media_type, layer_types.join(", "));
    if m.config.media_type != WASM_MANIFEST_CONFIG_MEDIA_TYPE {
        return Err(not(format!(
            "found {} (expected config {WASM_MANIFEST_CONFIG_MEDIA_TYPE} and one {WASM_LAYER_MEDIA_TYPE} layer: push it with `kwop plugin push`)",
            found()
        )));
    }
    match m.layers.as_slice() {
        [l] if l.media_type == WASM_LAYER_MEDIA_TYPE => Ok(l.clone()),
        _ => Err(not(format!("found {} (expected exactly one {WASM_LAYER_MEDIA_TYPE} layer)", found()))),
    }
}

/// A component, not a core module or something else (the binary header's layer field).
fn is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && &bytes[..4] == b"\0asm" && bytes[6..8] == [1, 0]
}

/// Whether a registry host is this machine (`localhost`, `127.0.0.0/8`, `::1`): plain HTTP by
/// default, as Docker treats it (a local registry, `scripts/dev-cluster start`'s, rarely has TLS).
pub fn is_loopback(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h == "localhost" || h.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// A client for `r`'s registry: plain HTTP if it is listed as insecure, or on this machine.
fn client(r: &Reference, cfg: &OciConfig) -> Client {
    install_crypto_provider();
    let registry = r.resolve_registry().to_string();
    let host = match registry.rsplit_once(':') {
        // `[::1]:5000` splits at the port; a bare `::1` has no port to split off.
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => registry.as_str(),
    };
    let insecure =
        is_loopback(host) || cfg.insecure.iter().map(|s| auth::normalize(s)).any(|s| s == registry || s == host);
    let protocol = if insecure { ClientProtocol::HttpsExcept(vec![registry.clone()]) } else { ClientProtocol::Https };
    Client::new(ClientConfig {
        protocol,
        connect_timeout: Some(cfg.timeout.min(Duration::from_secs(10))),
        read_timeout: Some(cfg.timeout),
        // An index is refused with a clear message rather than resolved to some platform.
        platform_resolver: None,
        ..ClientConfig::default()
    })
}

/// Makes ring the process's rustls provider (reqwest is built without one; kube would choose ring
/// too, the only one compiled in). Installing twice is harmless. Call before building any HTTPS
/// client outside kube (oci-client's, or one in tests).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Runs `f` within `timeout`, else an `Unreachable` error naming the reference.
async fn within<T>(
    timeout: Duration,
    name: &str,
    f: impl std::future::Future<Output = Result<T, OciError>>,
) -> Result<T, OciError> {
    tokio::time::timeout(timeout, f).await.unwrap_or_else(|_| {
        Err(OciError::Unreachable {
            reference: name.into(),
            detail: format!("no complete answer within {}", humantime::format_duration(timeout)),
        })
    })
}

/// An error while reading a layer: a digest mismatch found by the client, else the connection.
fn stream_error(name: &str, layer: &OciDescriptor, e: std::io::Error) -> OciError {
    if let Some(oci_client::errors::DigestError::VerificationError { expected, actual }) =
        e.get_ref().and_then(|i| i.downcast_ref::<oci_client::errors::DigestError>())
    {
        return OciError::DigestMismatch {
            reference: name.into(),
            what: "layer",
            expected: expected.clone(),
            actual: actual.clone(),
        };
    }
    OciError::Unreachable { reference: name.into(), detail: format!("reading layer {}: {e}", layer.digest) }
}

fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

#[cfg(test)]
mod tests;
