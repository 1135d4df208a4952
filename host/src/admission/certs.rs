//! The webhook's serving certificate. Self-signed (the default): a CA of the host's own and a
//! serving certificate it signs, both kept in one Secret (`ca.crt`, `ca.key`, `tls.crt`,
//! `tls.key`) so every replica serves the same; the leader makes them and renews the serving
//! certificate once two thirds of its life are gone, under the same CA (the API server's
//! `caBundle` does not change, so it keeps calling through a rotation). External (cert-manager):
//! someone else writes `tls.crt` and `tls.key` and the `caBundle`; the host only reads them.
//! Every replica reads the Secret periodically and serves what it holds.

use super::{AdmissionConfig, CertSource, Endpoint};
use crate::leader::Leadership;
use arc_swap::ArcSwapOption;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};
use kube::Client;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// Annotation on the Secret: when the serving certificate expires (Unix seconds).
pub const SERVING_NOT_AFTER: &str = "kwop.dev/serving-not-after";
/// Annotation on the Secret: when it was issued (Unix seconds).
pub const SERVING_NOT_BEFORE: &str = "kwop.dev/serving-not-before";
/// The CA's life: it outlives many serving certificates.
const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// The certificate the TLS server presents now (swapped on rotation).
#[derive(Debug, Default)]
pub struct Resolver {
    current: ArcSwapOption<CertifiedKey>,
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.load_full()
    }
}

impl Resolver {
    /// Whether a certificate is loaded (without one every handshake fails).
    pub fn has_certificate(&self) -> bool {
        self.current.load().is_some()
    }

    /// Serves `chain` (PEM) with `key` (PEM) from now on.
    pub fn set(&self, chain_pem: &[u8], key_pem: &[u8]) -> anyhow::Result<()> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain_pem)
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow::anyhow!("tls.crt: {e}"))?;
        anyhow::ensure!(!chain.is_empty(), "tls.crt holds no certificate");
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| anyhow::anyhow!("tls.key: {e}"))?;
        let signer =
            rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| anyhow::anyhow!("tls.key: {e}"))?;
        self.current.store(Some(Arc::new(CertifiedKey::new(chain, signer))));
        Ok(())
    }

    /// Whether a certificate is loaded.
    pub fn ready(&self) -> bool {
        self.current.load().is_some()
    }
}

/// The names the serving certificate is valid for.
fn names(endpoint: &Endpoint) -> Vec<String> {
    match endpoint {
        Endpoint::Service { namespace, name } => vec![
            format!("{name}.{namespace}.svc"),
            format!("{name}.{namespace}.svc.cluster.local"),
            format!("{name}.{namespace}"),
        ],
        Endpoint::Url(base) => {
            let host = base.parse::<http::Uri>().ok().and_then(|u| u.host().map(str::to_string)).unwrap_or_default();
            vec![host.trim_start_matches('[').trim_end_matches(']').to_string()]
        }
    }
}

fn ca_params(namespace: &str, now: SystemTime) -> anyhow::Result<CertificateParams> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, format!("kwop webhook CA ({namespace})"));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    ca.not_before = (now - Duration::from_secs(60)).into();
    ca.not_after = (now + CA_VALIDITY).into();
    Ok(ca)
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// What the Secret holds (PEM), and its serving certificate's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    /// CA certificate(s).
    pub ca_crt: String,
    /// CA key (self-signed mode only).
    pub ca_key: String,
    /// Serving certificate.
    pub tls_crt: String,
    /// Its key.
    pub tls_key: String,
    /// Issued (Unix seconds).
    pub not_before: u64,
    /// Expires (Unix seconds).
    pub not_after: u64,
}

/// A new CA, if `ca` is `None`, and a serving certificate signed by it for `endpoint`, valid for
/// `validity` from `now`.
pub fn issue(config: &AdmissionConfig, ca: Option<(&str, &str)>, now: SystemTime) -> anyhow::Result<Bundle> {
    let ns = &config.namespace;
    let (ca_crt, ca_key) = match ca {
        Some((crt, key)) => (crt.to_string(), KeyPair::from_pem(key)?),
        None => {
            let key = KeyPair::generate()?;
            let crt = ca_params(ns, now)?.self_signed(&key)?.pem();
            (crt, key)
        }
    };
    let ca_key_pem = ca_key.serialize_pem();
    // The issuer is rebuilt from the same parameters (subject and key): what signed before signs
    // again, without parsing the stored certificate.
    let issuer = Issuer::new(ca_params(ns, now)?, ca_key);
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names(&config.endpoint))?;
    params.distinguished_name.push(DnType::CommonName, "kwop webhook");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let not_before = now - Duration::from_secs(60);
    let not_after = now + config.cert_validity;
    params.not_before = not_before.into();
    params.not_after = not_after.into();
    let crt = params.signed_by(&key, &issuer)?;
    Ok(Bundle {
        ca_crt,
        ca_key: ca_key_pem,
        tls_crt: crt.pem(),
        tls_key: key.serialize_pem(),
        not_before: unix(not_before),
        not_after: unix(not_after),
    })
}

/// Whether a serving certificate issued at `not_before` and expiring at `not_after` is due for
/// renewal at `now` (two thirds of its life gone).
pub fn due(not_before: u64, not_after: u64, now: SystemTime) -> bool {
    let life = not_after.saturating_sub(not_before);
    unix(now) >= not_before.saturating_add(life / 3 * 2)
}

fn get(s: &Secret, key: &str) -> Option<String> {
    s.data.as_ref()?.get(key).and_then(|b| String::from_utf8(b.0.clone()).ok())
}

fn annotation(s: &Secret, key: &str) -> Option<u64> {
    s.metadata.annotations.as_ref()?.get(key)?.parse().ok()
}

fn to_secret(name: &str, b: &Bundle) -> Secret {
    let data: BTreeMap<String, ByteString> =
        [("ca.crt", &b.ca_crt), ("ca.key", &b.ca_key), ("tls.crt", &b.tls_crt), ("tls.key", &b.tls_key)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), ByteString(v.clone().into_bytes())))
            .collect();
    let mut s = Secret { data: Some(data), type_: Some("kubernetes.io/tls".into()), ..Secret::default() };
    s.metadata.name = Some(name.to_string());
    s.metadata.annotations = Some(
        [(SERVING_NOT_BEFORE, b.not_before), (SERVING_NOT_AFTER, b.not_after)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    s
}

/// Keeps the Secret's certificate served, renewed (by the leader) and published: `ca_bundle`
/// gets the CA the API server must trust (self-signed mode). Runs until `stop`.
pub async fn run(
    config: AdmissionConfig,
    client: Client,
    resolver: Arc<Resolver>,
    leadership: Arc<Leadership>,
    ca_bundle: watch::Sender<Option<String>>,
    stop: tokio_util::sync::CancellationToken,
) {
    let api: Api<Secret> = Api::namespaced(client, &config.namespace);
    // Often enough to renew well before expiry and to pick up a rotation quickly on standbys.
    let period = (config.cert_validity / 12).clamp(Duration::from_secs(1), Duration::from_secs(30));
    let mut served: Option<(String, String)> = None;
    loop {
        if let Err(e) = tick(&config, &api, &resolver, &leadership, &ca_bundle, &mut served).await {
            tracing::warn!(secret = %format!("{}/{}", config.namespace, config.secret), "webhook certificate: {e:#}");
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
    }
}

async fn tick(
    config: &AdmissionConfig,
    api: &Api<Secret>,
    resolver: &Resolver,
    leadership: &Leadership,
    ca_bundle: &watch::Sender<Option<String>>,
    served: &mut Option<(String, String)>,
) -> anyhow::Result<()> {
    let now = SystemTime::now();
    let mut secret = api.get_opt(&config.secret).await?;
    if config.certs == CertSource::SelfSigned && leadership.may_write() {
        let renewal = match &secret {
            None => Some(None),
            Some(s) => {
                let (ca, key) = (get(s, "ca.crt"), get(s, "ca.key"));
                let life = (annotation(s, SERVING_NOT_BEFORE), annotation(s, SERVING_NOT_AFTER));
                let fresh = matches!(life, (Some(b), Some(a)) if !due(b, a, now));
                match (ca, key) {
                    (Some(ca), Some(key)) if !fresh || get(s, "tls.crt").is_none() => Some(Some((ca, key))),
                    (Some(_), Some(_)) => None,
                    // A Secret without its CA: made anew (the caBundle follows).
                    _ => Some(None),
                }
            }
        };
        if let Some(ca) = renewal {
            let b = issue(config, ca.as_ref().map(|(c, k)| (c.as_str(), k.as_str())), now)?;
            let mut next = to_secret(&config.secret, &b);
            let written = match &secret {
                None => api.create(&PostParams::default(), &next).await?,
                Some(old) => {
                    // Replaced only if nobody changed it meanwhile (another leader's rotation).
                    next.metadata.resource_version = old.metadata.resource_version.clone();
                    next.metadata.labels = old.metadata.labels.clone();
                    api.replace(&config.secret, &PostParams::default(), &next).await?
                }
            };
            tracing::info!(not_after = b.not_after, new_ca = ca.is_none(), "webhook serving certificate issued");
            secret = Some(written);
        }
    }
    let Some(s) = secret else {
        anyhow::bail!(
            "the Secret does not exist yet (the leader makes it; with --webhook-certs=external, cert-manager does)"
        );
    };
    let (crt, key) = match (get(&s, "tls.crt"), get(&s, "tls.key")) {
        (Some(c), Some(k)) => (c, k),
        _ => anyhow::bail!("the Secret has no tls.crt and tls.key"),
    };
    if served.as_ref() != Some(&(crt.clone(), key.clone())) {
        resolver.set(crt.as_bytes(), key.as_bytes())?;
        tracing::info!("webhook serving certificate loaded");
        *served = Some((crt, key));
    }
    if config.certs == CertSource::SelfSigned {
        let ca = get(&s, "ca.crt");
        ca_bundle.send_if_modified(|b| {
            let changed = *b != ca;
            *b = ca.clone();
            changed
        });
    }
    Ok(())
}

/// The namespace the certificate's Secret lives in, made if it is missing (a host run outside
/// the cluster, `--system-namespace` not created yet): without it no certificate can be kept and
/// no webhook served, so a host that cannot make it stops at once, saying what to create. A
/// host that may not read namespaces (the in-cluster install: its namespace exists) goes on.
pub async fn ensure_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    let api: Api<Namespace> = Api::all(client.clone());
    match api.get_opt(name).await {
        Ok(Some(_)) | Err(kube::Error::Api(_)) => Ok(()),
        Err(e) => Err(anyhow::anyhow!("cannot check the system namespace {name}: {e}")),
        Ok(None) => {
            let ns: Namespace = serde_json::from_value(serde_json::json!({
                "metadata": { "name": name, "labels": { "app.kubernetes.io/managed-by": "kwop" } }
            }))?;
            match api.create(&PostParams::default(), &ns).await {
                Ok(_) => {
                    tracing::info!(
                        namespace = name,
                        "created the system namespace (it holds the webhook's certificate)"
                    );
                    Ok(())
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                Err(e) => Err(anyhow::anyhow!(
                    "the system namespace {name} does not exist and cannot be created ({e}): create it \
                     (`kubectl create namespace {name}`) or name another with --system-namespace"
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(validity: Duration) -> AdmissionConfig {
        AdmissionConfig {
            bind: ([127, 0, 0, 1], 0).into(),
            endpoint: Endpoint::Url("https://127.0.0.1:9443".into()),
            failure_policy: super::super::FailurePolicy::Fail,
            timeout: Duration::from_secs(10),
            namespace: "kwop-system".into(),
            secret: "kwop-webhook-tls".into(),
            configuration: "kwop".into(),
            cert_validity: validity,
            certs: CertSource::SelfSigned,
            only_namespace: None,
            client_ca: None,
        }
    }

    #[test]
    fn a_renewed_certificate_keeps_its_ca_and_loads() {
        let c = config(Duration::from_secs(3600));
        let now = SystemTime::now();
        let first = issue(&c, None, now).expect("issued");
        assert_eq!(first.not_after - first.not_before, 3660);
        let resolver = Resolver::default();
        resolver.set(first.tls_crt.as_bytes(), first.tls_key.as_bytes()).expect("loads");
        assert!(resolver.ready());
        let second = issue(&c, Some((&first.ca_crt, &first.ca_key)), now).expect("renewed");
        assert_eq!(second.ca_crt, first.ca_crt, "the same CA: the caBundle stays");
        assert_ne!(second.tls_crt, first.tls_crt);
        resolver.set(second.tls_crt.as_bytes(), second.tls_key.as_bytes()).expect("loads");
        assert!(resolver.set(b"garbage", b"garbage").is_err());
    }

    #[test]
    fn renewal_is_due_at_two_thirds_of_the_life() {
        let t = |s: u64| UNIX_EPOCH + Duration::from_secs(s);
        assert!(!due(1000, 1300, t(1100)));
        assert!(due(1000, 1300, t(1200)));
        assert!(due(1000, 1300, t(1400)));
    }

    #[test]
    fn the_certificate_names_the_service_or_the_url_host() {
        let svc = Endpoint::Service { namespace: "kwop-system".into(), name: "kwop-webhook".into() };
        assert!(names(&svc).contains(&"kwop-webhook.kwop-system.svc".to_string()));
        assert_eq!(names(&Endpoint::Url("https://127.0.0.1:9443".into())), ["127.0.0.1"]);
        assert_eq!(names(&Endpoint::Url("https://kwop.example.com".into())), ["kwop.example.com"]);
        assert_eq!(names(&Endpoint::Url("https://[::1]:9443".into())), ["::1"]);
    }
}
