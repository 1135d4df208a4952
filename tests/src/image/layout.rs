//! An OCI image layout read as a runtime reads it: `oci-layout` and `index.json`, then the image
//! manifest, its config and its layers, each blob checked against its size and digest, layers
//! checked against the config's `diff_ids` and applied in order (whiteouts included).

use anyhow::{anyhow, bail, Context, Result};
use flate2::read::GzDecoder;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

// The image-spec's documents, as far as a runtime reads them. (Typed with serde here: the
// oci-spec crate would pull in derive_builder and darling, whose features change how the
// wasmtime dependency chain is compiled, i.e. a full rebuild of it in every target folder.)

const INDEX: &str = "application/vnd.oci.image.index.v1+json";
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const LAYER: &str = "application/vnd.oci.image.layer.v1.tar";
const LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// A content descriptor.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// What the blob is.
    pub media_type: String,
    /// `sha256:<hex>`.
    pub digest: String,
    /// Its length in bytes.
    pub size: u64,
    /// Annotations (e.g. `org.opencontainers.image.ref.name` in an index).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// `index.json`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    /// Must be 2.
    pub schema_version: u32,
    /// The index media type, when given.
    #[serde(default)]
    pub media_type: Option<String>,
    /// The images (here: one).
    pub manifests: Vec<Descriptor>,
}

/// An image manifest.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Must be 2.
    pub schema_version: u32,
    /// The config blob.
    pub config: Descriptor,
    /// The layers, lowest first.
    pub layers: Vec<Descriptor>,
}

/// An image config.
#[derive(Debug, Deserialize)]
pub struct Config {
    /// e.g. `linux`.
    pub os: String,
    /// e.g. `amd64`.
    pub architecture: String,
    /// How to run it.
    #[serde(default)]
    pub config: RunConfig,
    /// The layers' uncompressed digests.
    pub rootfs: RootFs,
}

/// The execution part of an image config.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RunConfig {
    /// `uid[:gid]` or a name.
    pub user: Option<String>,
    /// The program and its first arguments.
    pub entrypoint: Option<Vec<String>>,
    /// Default arguments.
    pub cmd: Option<Vec<String>>,
    /// `K=V` pairs.
    pub env: Option<Vec<String>>,
    /// Labels.
    pub labels: Option<BTreeMap<String, String>>,
    /// The working folder.
    pub working_dir: Option<String>,
}

/// `rootfs`.
#[derive(Debug, Deserialize)]
pub struct RootFs {
    /// `sha256:<hex>` of each uncompressed layer.
    pub diff_ids: Vec<String>,
}

/// One image of a layout folder.
pub struct Image {
    /// The layout folder.
    pub dir: PathBuf,
    /// `index.json`.
    pub index: Index,
    /// The image manifest's digest (`sha256:...`): the image's identity.
    pub digest: String,
    /// The image manifest.
    pub manifest: Manifest,
    /// The image config (user, entrypoint, env, labels, ...).
    pub config: Config,
}

fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

impl Image {
    /// Opens the single image manifest of the layout at `dir`, verifying every blob it reads.
    pub fn open(dir: &Path) -> Result<Image> {
        let marker: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.join("oci-layout")).with_context(|| format!("{} has no oci-layout", dir.display()))?,
        )?;
        if marker["imageLayoutVersion"] != "1.0.0" {
            bail!("unsupported oci-layout {marker}");
        }
        let index: Index = serde_json::from_slice(&std::fs::read(dir.join("index.json"))?).context("index.json")?;
        if index.schema_version != 2 || index.media_type.as_deref().is_some_and(|m| m != INDEX) {
            bail!("index.json: schema {} media type {:?}", index.schema_version, index.media_type);
        }
        let [desc] = index.manifests.as_slice() else {
            bail!("index.json lists {} manifests, want exactly one", index.manifests.len());
        };
        if desc.media_type != MANIFEST {
            bail!("index.json points at a {}, not an image manifest", desc.media_type);
        }
        let digest = desc.digest.clone();
        let manifest: Manifest = serde_json::from_slice(&blob(dir, desc)?).context("image manifest")?;
        if manifest.schema_version != 2 || manifest.config.media_type != CONFIG {
            bail!("manifest: schema {} with a {} config", manifest.schema_version, manifest.config.media_type);
        }
        let config: Config = serde_json::from_slice(&blob(dir, &manifest.config)?).context("image config")?;
        if config.rootfs.diff_ids.len() != manifest.layers.len() {
            bail!("{} layers but {} diff_ids", manifest.layers.len(), config.rootfs.diff_ids.len());
        }
        Ok(Image { dir: dir.to_path_buf(), index, digest, manifest, config })
    }

    /// What a pull transfers: manifest, config and (compressed) layers, in bytes.
    pub fn compressed_size(&self) -> u64 {
        let desc = &self.index.manifests[0];
        desc.size + self.manifest.config.size + self.manifest.layers.iter().map(|l| l.size).sum::<u64>()
    }

    /// A blob of this layout, verified.
    pub fn blob(&self, desc: &Descriptor) -> Result<Vec<u8>> {
        blob(&self.dir, desc)
    }

    /// Applies the layers in order into `root` (created if missing), keeping modes and numeric
    /// owners. Returns the uncompressed size of the layers.
    pub fn unpack(&self, root: &Path) -> Result<u64> {
        std::fs::create_dir_all(root)?;
        let mut total = 0;
        for (layer, diff_id) in self.manifest.layers.iter().zip(&self.config.rootfs.diff_ids) {
            let compressed = self.blob(layer)?;
            let tar = match layer.media_type.as_str() {
                LAYER_GZIP => {
                    let mut out = Vec::new();
                    GzDecoder::new(compressed.as_slice()).read_to_end(&mut out).context("gunzip layer")?;
                    out
                }
                LAYER => compressed,
                other => bail!("layer media type {other} is not supported"),
            };
            let got = format!("sha256:{}", sha256_hex(&tar));
            if &got != diff_id {
                bail!("layer {} uncompresses to {got}, the config says {diff_id}", layer.digest);
            }
            total += tar.len() as u64;
            apply_layer(&tar, root).with_context(|| format!("layer {}", layer.digest))?;
        }
        Ok(total)
    }
}

/// Reads `blobs/<algorithm>/<hex>` and checks its size and sha256.
fn blob(dir: &Path, desc: &Descriptor) -> Result<Vec<u8>> {
    let d = &desc.digest;
    let Some(hex) = d.strip_prefix("sha256:") else { bail!("digest {d}: only sha256 is supported") };
    if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        bail!("malformed digest {d}");
    }
    let path = dir.join("blobs/sha256").join(hex);
    let data = std::fs::read(&path).with_context(|| format!("missing blob {}", path.display()))?;
    if data.len() as u64 != desc.size {
        bail!("blob {d} has {} bytes, its descriptor says {}", data.len(), desc.size);
    }
    if sha256_hex(&data) != hex {
        bail!("blob {d} does not match its digest");
    }
    Ok(data)
}

/// One layer: whiteouts remove what lower layers put there, everything else is extracted with
/// its mode and numeric owner; paths escaping `root` are refused.
fn apply_layer(tar: &[u8], root: &Path) -> Result<()> {
    let mut archive = tar::Archive::new(tar);
    archive.set_preserve_permissions(true);
    archive.set_preserve_ownerships(true);
    archive.set_unpack_xattrs(false);
    archive.set_overwrite(true);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        if let Some(hidden) = name.strip_prefix(".wh.") {
            let parent = root.join(path.parent().unwrap_or(Path::new("")));
            if !parent.starts_with(root) || path.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
                bail!("whiteout {} escapes the root", path.display());
            }
            if hidden == ".wh..opq" {
                for e in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
                    remove(&e.path())?;
                }
            } else {
                remove(&parent.join(hidden))?;
            }
            continue;
        }
        if !entry.unpack_in(root).with_context(|| format!("extracting {}", path.display()))? {
            return Err(anyhow!("layer entry {} escapes the root", path.display()));
        }
    }
    Ok(())
}

fn remove(p: &Path) -> Result<()> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p)?,
        Ok(_) => std::fs::remove_file(p)?,
        Err(_) => {}
    }
    Ok(())
}
