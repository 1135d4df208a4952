//! Fetching a ReconcilerPlugin's component: from an OCI registry (with the pull Secret named in
//! its spec) or from a ConfigMap key, both in the host's own namespace.

use super::super::oci::{self, Auth, OciConfig};
use crate::vocab::crd::{PluginSource, ReconcilerPlugin};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use kube::{Client, Resource, ResourceExt};

/// A fetched component.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The bytes.
    pub bytes: std::sync::Arc<Vec<u8>>,
    /// sha256 hex of the bytes.
    pub sha256: String,
    /// What `spec.source` said (see [`source_key`]).
    pub key: String,
    /// For OCI: the digest-pinned reference.
    pub pinned: Option<String>,
}

/// Why a fetch failed: a status reason and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchError {
    /// Status reason (NotFound, Unreachable, ..., InvalidSpec).
    pub reason: &'static str,
    /// Why, naming the source.
    pub message: String,
    /// Worth retrying without a spec change (a registry outage; a tag or ConfigMap that may
    /// appear later).
    pub retry: bool,
}

fn invalid(message: String) -> FetchError {
    FetchError { reason: "InvalidSpec", message, retry: false }
}

/// A stable name for what a source points at; a change of it means a new fetch.
pub fn source_key(s: &PluginSource) -> Result<String, String> {
    match (&s.oci, &s.config_map) {
        (Some(r), None) => {
            let r = r.trim();
            if r.is_empty() {
                return Err("spec.source.oci is empty".into());
            }
            Ok(format!("oci:{r}"))
        }
        (None, Some(c)) => {
            if c.name.is_empty() || c.key.is_empty() {
                return Err("spec.source.configMap needs a name and a key".into());
            }
            if s.pull_secret.is_some() {
                return Err("spec.source.pullSecret is only for spec.source.oci".into());
            }
            Ok(format!("configmap:{}/{}", c.name, c.key))
        }
        (Some(_), Some(_)) => Err("spec.source: give either oci or configMap, not both".into()),
        (None, None) => Err("spec.source: give oci (an OCI reference) or configMap (name and key)".into()),
    }
}

/// Fetches the component `source` names. For OCI, `pinned` (a digest reference recorded in the
/// status for this same source) is pulled instead of the tag, so a restart runs what ran.
/// [`fetch`] as its own trace (`plugin.fetch`, with the result and the digest fetched).
pub async fn traced(
    name: &str,
    key: &str,
    client: &Client,
    namespace: &str,
    cfg: &OciConfig,
    source: &PluginSource,
    pinned: Option<&str>,
) -> Result<Fetched, FetchError> {
    use tracing::Instrument;
    let span = tracing::info_span!("plugin.fetch", reconcilerplugin = %name, source = %reference_of(key),
        result = tracing::field::Empty, digest = tracing::field::Empty);
    let r = fetch(client, namespace, cfg, source, pinned).instrument(span.clone()).await;
    match &r {
        Ok(f) => span.record("result", "fetched").record("digest", f.sha256.as_str()),
        Err(e) => span.record("result", e.reason),
    };
    r
}

pub async fn fetch(
    client: &Client,
    namespace: &str,
    cfg: &OciConfig,
    source: &PluginSource,
    pinned: Option<&str>,
) -> Result<Fetched, FetchError> {
    let key = source_key(source).map_err(invalid)?;
    if let Some(reference) = &source.oci {
        let auth = match &source.pull_secret {
            Some(name) => pull_auth(client, namespace, name, reference).await?,
            None => Auth::Anonymous,
        };
        let target = pinned.unwrap_or(reference.trim());
        // A pinned pull that fails is retried as pinned: the tag may have moved since, and
        // replicas must not run different digests (a new reference in the spec moves on).
        let why_pinned = match pinned {
            Some(_) => format!(" (the digest status.source.pinned recorded for {}; kwop does not fall back to the tag: to move on, point spec.source.oci at another reference)", reference.trim()),
            None => String::new(),
        };
        let p = oci::pull(target, &auth, cfg).await.map_err(|e| FetchError {
            reason: e.reason(),
            message: format!("{e}{why_pinned}"),
            retry: e.is_transient() || e.reason() == "NotFound",
        })?;
        let sha256 = crate::plugin::loader::sha256_hex(&p.bytes);
        return Ok(Fetched { bytes: std::sync::Arc::new(p.bytes), sha256, key, pinned: Some(p.pinned) });
    }
    let Some(c) = &source.config_map else {
        return Err(invalid("spec.source has no oci and no configMap".into()));
    };
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let what = format!("ConfigMap {namespace}/{}", c.name);
    let cm = match api.get_opt(&c.name).await {
        Ok(Some(cm)) => cm,
        Ok(None) => {
            return Err(FetchError { reason: "NotFound", message: format!("{what} does not exist"), retry: true })
        }
        Err(e) => return Err(api_error(&what, e)),
    };
    let Some(bytes) = cm.binary_data.as_ref().and_then(|d| d.get(&c.key)) else {
        let hint = if cm.data.as_ref().is_some_and(|d| d.contains_key(&c.key)) {
            " (it is under data; a component is binary and belongs under binaryData, as `kubectl create configmap --from-file` puts it)"
        } else {
            ""
        };
        return Err(FetchError {
            reason: "NotFound",
            message: format!("{what} has no binaryData key {:?}{hint}", c.key),
            retry: true,
        });
    };
    let bytes = bytes.0.clone();
    let sha256 = crate::plugin::loader::sha256_hex(&bytes);
    Ok(Fetched { bytes: std::sync::Arc::new(bytes), sha256, key, pinned: None })
}

fn api_error(what: &str, e: kube::Error) -> FetchError {
    match &e {
        kube::Error::Api(s) if s.code == 403 => FetchError {
            reason: "Forbidden",
            message: format!("the host may not read {what}: {}", s.message),
            retry: true,
        },
        _ => FetchError { reason: "Unreachable", message: format!("cannot read {what}: {e}"), retry: true },
    }
}

async fn pull_auth(client: &Client, namespace: &str, name: &str, reference: &str) -> Result<Auth, FetchError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let what = format!("pull Secret {namespace}/{name}");
    let secret = match api.get_opt(name).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            return Err(FetchError { reason: "InvalidSpec", message: format!("{what} does not exist"), retry: true })
        }
        Err(e) => return Err(api_error(&what, e)),
    };
    let Some(json) = secret.data.as_ref().and_then(|d| d.get(".dockerconfigjson")) else {
        return Err(invalid(format!(
            "{what} has no .dockerconfigjson (create it with `kubectl create secret docker-registry`)"
        )));
    };
    let registry = oci::parse_reference(reference)
        .map(|r| r.resolve_registry().to_string())
        .map_err(|e| FetchError { reason: e.reason(), message: e.to_string(), retry: false })?;
    oci::auth_from_docker_config(&json.0, &registry).map_err(|e| invalid(format!("{what}: {e}")))
}

/// The reference as shown in status, from a source key.
pub fn reference_of(key: &str) -> String {
    match key.split_once(':') {
        Some(("oci", r)) => r.to_string(),
        Some(("configmap", r)) => format!("configmap/{r}"),
        _ => key.to_string(),
    }
}

/// The digest to pull for `key` after a restart: `status.source.pinned`, when it was recorded
/// for this same source and passes [`check_pin`]. One that does not is ignored (the spec's
/// reference is pulled), said in the log and in a Warning event `PinIgnored` on the object.
pub fn pinned_of(client: &Client, rp: &ReconcilerPlugin, key: &str) -> Option<String> {
    let s = rp.status.as_ref()?.source.as_ref()?;
    let pinned = s.pinned.as_deref()?;
    let reference = key.strip_prefix("oci:").filter(|_| s.reference == reference_of(key))?;
    let why = match check_pin(reference, pinned) {
        Ok(()) => return Some(pinned.to_string()),
        Err(why) => why,
    };
    let note = format!("status.source.pinned ignored, {reference} is pulled instead: {why}");
    tracing::warn!(reconcilerplugin = %rp.name_any(), "{note}");
    crate::report::host_warning(client, rp.object_ref(&()), "PinIgnored", &note);
    None
}

/// Whether `pinned` (from `status.source.pinned`, which anyone allowed to patch the status can
/// write) may stand for the OCI reference `reference`: a digest, of the same registry and
/// repository, and the reference's own digest if it has one. Otherwise why not.
pub fn check_pin(reference: &str, pinned: &str) -> Result<(), String> {
    let spec = oci::parse_reference(reference).map_err(|e| e.to_string())?;
    let pin = oci::parse_reference(pinned).map_err(|e| e.to_string())?;
    let Some(digest) = pin.digest() else {
        return Err(format!("{pinned:?} is not a digest reference"));
    };
    if pin.tag().is_some() {
        return Err(format!("{pinned:?} has a tag"));
    }
    if (pin.resolve_registry(), pin.repository()) != (spec.resolve_registry(), spec.repository()) {
        return Err(format!("{pinned:?} is not in {reference:?}'s registry and repository"));
    }
    match spec.digest() {
        Some(d) if d != digest => Err(format!("{pinned:?} is not the digest {reference:?} names")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::crd::ConfigMapSource;

    #[test]
    fn a_pin_is_trusted_only_as_a_digest_of_the_specs_own_repository() {
        let d = format!("sha256:{}", "a".repeat(64));
        let e = format!("sha256:{}", "b".repeat(64));
        assert_eq!(check_pin("reg:5000/team/p:v1", &format!("reg:5000/team/p@{d}")), Ok(()));
        assert_eq!(check_pin("oci://reg:5000/team/p:v1", &format!("reg:5000/team/p@{d}")), Ok(()));
        assert_eq!(check_pin(&format!("reg:5000/team/p@{d}"), &format!("reg:5000/team/p@{d}")), Ok(()));
        for bad in [
            format!("evil:5000/team/p@{d}"),    // another registry (the pull Secret would go there)
            format!("reg:5000/team/other@{d}"), // another repository
            "reg:5000/team/p:v2".to_string(),   // a tag
            format!("reg:5000/team/p:v2@{d}"),  // a tag and a digest
            "not a reference".to_string(),
        ] {
            assert!(check_pin("reg:5000/team/p:v1", &bad).is_err(), "{bad} trusted");
        }
        assert!(check_pin(&format!("reg:5000/team/p@{d}"), &format!("reg:5000/team/p@{e}")).is_err());
    }

    #[test]
    fn a_source_names_exactly_one_place() {
        let oci = PluginSource { oci: Some(" reg/x:1 ".into()), ..Default::default() };
        assert_eq!(source_key(&oci).as_deref(), Ok("oci:reg/x:1"));
        let cm = ConfigMapSource { name: "p".into(), key: "foo.wasm".into() };
        let both = PluginSource { config_map: Some(cm.clone()), ..oci.clone() };
        assert!(source_key(&both).is_err());
        assert!(source_key(&PluginSource::default()).is_err());
        let cm_secret = PluginSource { config_map: Some(cm), pull_secret: Some("s".into()), oci: None };
        assert!(source_key(&cm_secret).expect_err("secret").contains("only for"));
    }
}
