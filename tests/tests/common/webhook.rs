//! The webhook side of the admission tests (admission.rs and each language's lang_*.rs): a host
//! serving admission on a free port, its ValidatingWebhookConfiguration, and `kubectl apply`
//! retried until the webhook answers.

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use kube::api::{Api, DeleteParams};
use kube::Client;
use kwop_tests::{procs::free_port, wait, ControlPlane, Host};
use std::path::Path;
use std::time::{Duration, Instant};

/// A host serving admission, with the names it was given.
pub struct Admitting {
    pub host: Host,
    /// Its ValidatingWebhookConfiguration.
    pub configuration: String,
    /// The Secret holding its serving certificate.
    pub secret: String,
    /// The webhook's port.
    pub port: u16,
}

/// A host serving admission on a free port for the plugins in `dir`, watching only `ns` (its
/// webhooks are limited to that namespace), its Secret and configuration named after `ns`.
pub fn admitting(plane: &ControlPlane, dir: &Path, ns: &str, extra: &[&str]) -> anyhow::Result<Admitting> {
    admitting_as(plane, &plane.kubeconfig, dir, ns, extra)
}

/// Like [`admitting`], the host authenticating with `kubeconfig` (e.g. a service account's token).
pub fn admitting_as(
    plane: &ControlPlane,
    kubeconfig: &Path,
    dir: &Path,
    ns: &str,
    extra: &[&str],
) -> anyhow::Result<Admitting> {
    let port = free_port()?;
    let (configuration, secret) = (format!("kwop-{ns}"), format!("webhook-{ns}"));
    let mut args = vec![
        format!("--namespace={ns}"),
        format!("--system-namespace={ns}"),
        format!("--webhook-bind-address=127.0.0.1:{port}"),
        format!("--webhook-url=https://127.0.0.1:{port}"),
        format!("--webhook-configuration={configuration}"),
        format!("--webhook-secret={secret}"),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let host = Host::start_with_kubeconfig(super::KWOP, plane, kubeconfig, dir, &args, true)?;
    Ok(Admitting { host, configuration, secret, port })
}

/// The host's webhook configuration `name`, once it names `plugin` with a caBundle.
pub async fn configured(client: &Client, name: &str, plugin: &str) -> anyhow::Result<ValidatingWebhookConfiguration> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    wait::until(&format!("webhook configuration {name} for {plugin}"), Duration::from_secs(90), || async {
        let c = api.get_opt(name).await.map_err(|e| e.to_string())?;
        let ready = c.as_ref().is_some_and(|c| {
            c.webhooks.iter().flatten().any(|w| {
                w.name == format!("{plugin}.kwop.dev")
                    && w.client_config.ca_bundle.as_ref().is_some_and(|b| !b.0.is_empty())
            })
        });
        Ok(c.filter(|_| ready))
    })
    .await
}

/// The host's mutating webhook configuration `name`, once it names `plugin` with a caBundle.
pub async fn configured_mutating(
    client: &Client,
    name: &str,
    plugin: &str,
) -> anyhow::Result<MutatingWebhookConfiguration> {
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    wait::until(&format!("mutating webhook configuration {name} for {plugin}"), Duration::from_secs(90), || async {
        let c = api.get_opt(name).await.map_err(|e| e.to_string())?;
        let ready = c.as_ref().is_some_and(|c| {
            c.webhooks.iter().flatten().any(|w| {
                w.name == format!("{plugin}.kwop.dev")
                    && w.client_config.ca_bundle.as_ref().is_some_and(|b| !b.0.is_empty())
            })
        });
        Ok(c.filter(|_| ready))
    })
    .await
}

/// Deletes the webhook configurations `name` (the plane is shared: a stopped host's would stay).
pub async fn remove_configuration(client: &Client, name: &str) {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let _ = api.delete(name, &DeleteParams::default()).await;
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let _ = api.delete(name, &DeleteParams::default()).await;
}

/// A Foo as YAML, with `spec.deploymentName` when given.
pub fn foo_yaml(name: &str, deployment: Option<&str>) -> String {
    let dep = deployment.map(|d| format!("  deploymentName: \"{d}\"\n")).unwrap_or_default();
    format!("apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata:\n  name: {name}\nspec:\n{dep}  replicas: 1\n")
}

/// `kubectl apply` of `yaml`: Ok(stdout) or Err(what kubectl printed).
pub fn kubectl_apply(plane: &ControlPlane, ns: &str, yaml: &str) -> Result<String, String> {
    plane.kubectl_stdin(&["apply", "-n", ns, "-f", "-"], yaml).map_err(|e| e.to_string())
}

/// Applies until the webhook answers (a new configuration takes the API server a moment, the
/// host a moment to serve): the first answer that is not a failure to call the webhook.
pub async fn apply_answered(plane: &ControlPlane, ns: &str, yaml: &str) -> Result<String, String> {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let r = kubectl_apply(plane, ns, yaml);
        let unanswered = r.as_ref().err().is_some_and(|e| e.contains("failed calling webhook"));
        if !unanswered || Instant::now() > until {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
