//! `kwop run --webhook-*`: serving admission for plugins that validate.

use crate::admission::{AdmissionConfig, CertSource, Endpoint};
use crate::vocab::FailurePolicy;
use clap::Args;
use std::time::Duration;

/// Admission webhook settings of `kwop run`.
#[derive(Debug, Clone, Args)]
pub struct WebhookArgs {
    /// Serve admission for plugins that validate (`info().validates`) on this address, e.g.
    /// `:9443` (HTTPS); the host then keeps a ValidatingWebhookConfiguration for them. Unset or
    /// "0": no admission (plugins that validate only reconcile).
    #[arg(long, default_value = "", env = "KWOP_WEBHOOK_BIND_ADDRESS")]
    pub webhook_bind_address: String,
    /// How the API server reaches this host: the Service `NAMESPACE/NAME` in front of it (port
    /// 443) [default: kwop-webhook in the system namespace].
    #[arg(long, value_name = "NAMESPACE/NAME", conflicts_with = "webhook_url")]
    pub webhook_service: Option<String>,
    /// ...or an HTTPS URL base (`https://HOST:PORT`), for a host outside the cluster; the
    /// serving certificate is made for HOST.
    #[arg(long, value_name = "URL")]
    pub webhook_url: Option<String>,
    /// What happens when a plugin cannot answer (a trap, its deadline) or the host is
    /// unreachable: `Fail` refuses the request, `Ignore` allows it. A ReconcilerPlugin's
    /// `spec.admission.failurePolicy` overrides it.
    #[arg(long, default_value = "Fail", value_parser = |s: &str| s.parse::<FailurePolicy>())]
    pub webhook_failure_policy: FailurePolicy,
    /// The webhook's timeout (the API server's `timeoutSeconds`, 1s–30s); `validate` gets this
    /// less 0.5 s, or the plugin's own deadline if shorter.
    #[arg(long, default_value = "10s", value_parser = crate::vocab::units::duration)]
    pub webhook_timeout: Duration,
    /// The Secret (in the system namespace) holding the serving certificate.
    #[arg(long, default_value = "kwop-webhook-tls")]
    pub webhook_secret: String,
    /// Name of the ValidatingWebhookConfiguration this host keeps (one per host installation).
    #[arg(long, default_value = "kwop")]
    pub webhook_configuration: String,
    /// `self-signed`: the host's own CA and serving certificate in the Secret, renewed after two
    /// thirds of --webhook-cert-validity, the caBundle kept by the host. `external`: cert-manager
    /// (or anyone) writes `tls.crt`/`tls.key` into the Secret and injects the caBundle (the host
    /// annotates its configuration with `cert-manager.io/inject-ca-from-secret`).
    #[arg(long, default_value = "self-signed", value_parser = ["self-signed", "external"])]
    pub webhook_certs: String,
    /// Life of a self-signed serving certificate.
    #[arg(long, default_value = "8760h", value_parser = crate::vocab::units::duration)]
    pub webhook_cert_validity: Duration,
    /// Authenticate the webhook's callers: a PEM file of CA certificates. A connection without a
    /// client certificate signed by one of them is refused in the TLS handshake. Give the API
    /// server a client certificate from this CA (`--admission-control-config-file`, see
    /// docs/admission.md). Unset: the port answers whoever reaches it.
    #[arg(long, value_name = "FILE", env = "KWOP_WEBHOOK_CLIENT_CA")]
    pub webhook_client_ca: Option<std::path::PathBuf>,
}

impl WebhookArgs {
    /// The admission settings, or `None` when admission is off.
    pub fn config(&self, system_namespace: &str, only: Option<&str>) -> anyhow::Result<Option<AdmissionConfig>> {
        let Some(bind) = super::bind_addr(&self.webhook_bind_address)? else {
            return Ok(None);
        };
        let endpoint = match (&self.webhook_url, &self.webhook_service) {
            (Some(url), _) => {
                anyhow::ensure!(url.starts_with("https://"), "--webhook-url must start with https://");
                Endpoint::Url(url.clone())
            }
            (None, Some(s)) => {
                let (namespace, name) = s
                    .split_once('/')
                    .ok_or_else(|| anyhow::anyhow!("--webhook-service must be NAMESPACE/NAME, not {s:?}"))?;
                Endpoint::Service { namespace: namespace.into(), name: name.into() }
            }
            (None, None) => Endpoint::Service { namespace: system_namespace.into(), name: "kwop-webhook".into() },
        };
        anyhow::ensure!(
            (Duration::from_secs(1)..=Duration::from_secs(30)).contains(&self.webhook_timeout),
            "--webhook-timeout must be between 1s and 30s"
        );
        anyhow::ensure!(self.webhook_cert_validity >= Duration::from_secs(10), "--webhook-cert-validity is below 10s");
        let client_ca = self.webhook_client_ca.as_deref().map(client_cas).transpose()?;
        Ok(Some(AdmissionConfig {
            bind,
            endpoint,
            failure_policy: self.webhook_failure_policy,
            timeout: self.webhook_timeout,
            namespace: system_namespace.to_string(),
            secret: self.webhook_secret.clone(),
            configuration: self.webhook_configuration.clone(),
            cert_validity: self.webhook_cert_validity,
            certs: if self.webhook_certs == "external" { CertSource::External } else { CertSource::SelfSigned },
            only_namespace: only.map(str::to_string),
            client_ca,
        }))
    }
}

/// The CA certificates in `path`, checked as the TLS server will use them.
fn client_cas(path: &std::path::Path) -> anyhow::Result<Vec<rustls::pki_types::CertificateDer<'static>>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let what = || format!("--webhook-client-ca {}", path.display());
    let cas = CertificateDer::pem_file_iter(path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", what()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("{}: not PEM certificates: {e}", what()))?;
    anyhow::ensure!(!cas.is_empty(), "{}: no certificate in it", what());
    crate::admission::server::client_verifier(
        cas.clone(),
        std::sync::Arc::new(rustls::crypto::ring::default_provider()),
    )
    .map_err(|e| anyhow::anyhow!("{}: {e:#}", what()))?;
    Ok(cas)
}
