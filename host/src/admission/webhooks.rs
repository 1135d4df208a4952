//! The ValidatingWebhookConfiguration and MutatingWebhookConfiguration the host keeps (both named
//! `--webhook-configuration`): one webhook per plugin that validates (or mutates), for CREATE and
//! UPDATE of its primary kind — and, to validate, UPDATE of its `/scale` — (in the namespaces it
//! is granted), pointing at this host's Service (or URL) with the CA the API server must trust.
//! Written by the leader with
//! server-side apply whenever the plugins, their policies or the CA change, and every minute
//! (a hand edit is put back); a plugin that goes loses its webhook. The configuration stays when
//! the host stops: the failure policy then decides (`Fail`: requests are refused; `Ignore`:
//! allowed).

use super::{AdmissionConfig, CertSource, Endpoint, Registry, Validating};
use crate::leader::Leadership;
use crate::vocab::grants::Namespaces;
use crate::vocab::FailurePolicy;
use crate::watch::Resolved;
use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The field manager of the configuration.
pub const FIELD_MANAGER: &str = "kwop-admission";
/// How often the configuration is applied again even if nothing changed.
const REFRESH: Duration = Duration::from_secs(60);

/// The webhook's name for a plugin (a webhook name must be a qualified name of three parts).
pub fn webhook_name(plugin: &str) -> String {
    format!("{plugin}.kwop.dev")
}

/// How the API server reaches `path` on this host (webhook configurations and CRD conversion
/// alike): this host's Service or URL, and the CA to trust when the host makes its own.
pub fn client_config(config: &AdmissionConfig, path: &str, ca: Option<&str>) -> Value {
    let mut client = match &config.endpoint {
        Endpoint::Service { namespace, name } => {
            json!({ "service": { "namespace": namespace, "name": name, "path": path, "port": 443 } })
        }
        Endpoint::Url(base) => json!({ "url": format!("{}{path}", base.trim_end_matches('/')) }),
    };
    if let (CertSource::SelfSigned, Some(ca)) = (config.certs, ca) {
        client["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(ca));
    }
    client
}

/// Which of the two configurations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// `validate`: `/validate/<plugin>`.
    Validating,
    /// `mutate`: `/mutate/<plugin>`.
    Mutating,
}

impl Hook {
    fn kind(self) -> &'static str {
        match self {
            Hook::Validating => "ValidatingWebhookConfiguration",
            Hook::Mutating => "MutatingWebhookConfiguration",
        }
    }

    fn serves(self, v: &Validating) -> bool {
        match self {
            Hook::Validating => v.plugin.info.validates,
            Hook::Mutating => v.plugin.info.mutates(),
        }
    }
}

/// The whole configuration of `hook` for these plugins.
pub fn desired(
    config: &AdmissionConfig,
    hook: Hook,
    plugins: &BTreeMap<String, Arc<Validating>>,
    ca: Option<&str>,
) -> Value {
    let webhooks: Vec<Value> = plugins
        .iter()
        .filter(|(_, v)| hook.serves(v))
        .filter_map(|(name, v)| {
            webhook(config, hook, name, &v.primary, v.failure_policy, &v.plugin.grants.namespaces, ca)
        })
        .collect();
    let mut meta = json!({ "name": config.configuration, "labels": { "app.kubernetes.io/managed-by": "kwop" } });
    if config.certs == CertSource::External {
        // cert-manager's CA injector fills every caBundle from the Secret's ca.crt.
        meta["annotations"] =
            json!({ "cert-manager.io/inject-ca-from-secret": format!("{}/{}", config.namespace, config.secret) });
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": hook.kind(),
        "metadata": meta,
        "webhooks": webhooks,
    })
}

/// The webhook of one plugin; `None` when it acts in no namespace this host watches.
fn webhook(
    config: &AdmissionConfig,
    hook: Hook,
    name: &str,
    p: &Resolved,
    policy: FailurePolicy,
    granted: &Namespaces,
    ca: Option<&str>,
) -> Option<Value> {
    let path = match hook {
        Hook::Validating => format!("/validate/{name}"),
        Hook::Mutating => format!("/mutate/{name}"),
    };
    let client = client_config(config, &path, ca);
    let mut h = json!({
        "name": webhook_name(name),
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": policy.as_str(),
        "matchPolicy": "Equivalent",
        "timeoutSeconds": config.timeout.as_secs().clamp(1, 30),
        "clientConfig": client,
        "rules": rules(p, hook),
    });
    if hook == Hook::Mutating {
        // Asked again if a later mutating webhook changed the object (see `super::mutate`).
        h["reinvocationPolicy"] = json!("IfNeeded");
    }
    // Only where the plugin acts: its granted namespaces, within the one the host watches.
    let granted: Option<Vec<&String>> = match granted {
        Namespaces::Listed(list) => Some(list.iter().collect()),
        _ => None,
    };
    let within: Option<Vec<&String>> = match (granted, config.only_namespace.as_ref()) {
        (Some(l), Some(only)) => Some(l.into_iter().filter(|n| *n == only).collect()),
        (Some(l), None) => Some(l),
        (None, Some(only)) => Some(vec![only]),
        (None, None) => None,
    };
    if let (true, Some(names)) = (p.namespaced, within) {
        if names.is_empty() {
            return None;
        }
        h["namespaceSelector"] = json!({ "matchExpressions": [{
            "key": "kubernetes.io/metadata.name", "operator": "In", "values": names,
        }] });
    }
    Some(h)
}

/// What a plugin's webhook is called for: CREATE and UPDATE of its primary, and UPDATE of its
/// `/scale` (`kubectl scale`; the API server sends a Scale, the host composes the primary as it
/// would be, see [`super::scale`]) — listed even if the CRD has no scale subresource, it then
/// matches nothing. `/status` is not listed: the host writes status itself, and a status write
/// changes nothing a plugin validates.
pub fn rules(p: &Resolved, hook: Hook) -> Value {
    let scope = if p.namespaced { "Namespaced" } else { "Cluster" };
    if hook == Hook::Mutating {
        // Defaults are set on the object itself; a count set through `/scale` is validated.
        return json!([{
            "apiGroups": [p.gvk.group],
            "apiVersions": [p.gvk.version],
            "resources": [p.resource.plural],
            "operations": ["CREATE", "UPDATE"],
            "scope": scope,
        }]);
    }
    json!([
        {
            "apiGroups": [p.gvk.group],
            "apiVersions": [p.gvk.version],
            "resources": [p.resource.plural],
            "operations": ["CREATE", "UPDATE"],
            "scope": scope,
        },
        {
            "apiGroups": [p.gvk.group],
            "apiVersions": [p.gvk.version],
            "resources": [format!("{}/scale", p.resource.plural)],
            "operations": ["UPDATE"],
            "scope": scope,
        },
    ])
}

/// Keeps both configurations current while this replica leads, until `stop`.
pub async fn run(
    config: AdmissionConfig,
    client: Client,
    registry: Arc<Registry>,
    mut ca: watch::Receiver<Option<String>>,
    leadership: Arc<Leadership>,
    stop: tokio_util::sync::CancellationToken,
) {
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client);
    let mut plugins = registry.subscribe();
    let mut applied: [Option<Value>; 2] = [None, None];
    loop {
        let ready = config.certs == CertSource::External || ca.borrow().is_some();
        for (i, hook) in [Hook::Validating, Hook::Mutating].into_iter().enumerate() {
            let want = desired(&config, hook, &registry.all(), ca.borrow().as_deref());
            if !ready || !leadership.may_write() || applied[i].as_ref() == Some(&want) {
                continue;
            }
            let pp = PatchParams::apply(FIELD_MANAGER).force();
            let r = match hook {
                Hook::Validating => validating.patch(&config.configuration, &pp, &Patch::Apply(&want)).await.map(drop),
                Hook::Mutating => mutating.patch(&config.configuration, &pp, &Patch::Apply(&want)).await.map(drop),
            };
            match r {
                Ok(()) => {
                    tracing::info!(configuration = %config.configuration, kind = hook.kind(),
                        webhooks = want["webhooks"].as_array().map_or(0, Vec::len), "webhook configuration applied");
                    applied[i] = Some(want);
                }
                Err(e) => tracing::warn!(configuration = %config.configuration, kind = hook.kind(),
                    "cannot apply the webhook configuration: {e}"),
            }
        }
        let all = applied.iter().all(Option::is_some);
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = plugins.changed() => {}
            _ = ca.changed() => {}
            // Also a retry after a failure, a leadership gained, a hand edit undone.
            _ = tokio::time::sleep(if all { REFRESH } else { Duration::from_secs(2) }) => applied = [None, None],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Gvk;

    fn config(endpoint: Endpoint, only: Option<&str>) -> AdmissionConfig {
        AdmissionConfig {
            bind: ([127, 0, 0, 1], 0).into(),
            endpoint,
            failure_policy: FailurePolicy::Fail,
            timeout: Duration::from_secs(45),
            namespace: "kwop-system".into(),
            secret: "kwop-webhook-tls".into(),
            configuration: "kwop".into(),
            cert_validity: Duration::from_secs(3600),
            certs: CertSource::SelfSigned,
            only_namespace: only.map(str::to_string),
            client_ca: None,
        }
    }

    fn foo() -> Resolved {
        let gvk = Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo");
        let resource = kube::core::ApiResource::from_gvk_with_plural(&gvk.to_kube(), "foos");
        Resolved { gvk, resource, namespaced: true }
    }

    #[test]
    fn a_webhook_covers_create_and_update_of_the_primary_where_the_plugin_acts() {
        let svc = Endpoint::Service { namespace: "kwop-system".into(), name: "kwop-webhook".into() };
        let c = config(svc, None);
        let h = webhook(&c, Hook::Validating, "guest-foo", &foo(), FailurePolicy::Ignore, &Namespaces::Own, Some("CA"))
            .expect("a webhook");
        assert_eq!(h["name"], "guest-foo.kwop.dev");
        assert_eq!(h["failurePolicy"], "Ignore");
        assert_eq!(h["timeoutSeconds"], 30, "clamped to the API server's limit");
        assert_eq!(h["rules"][0]["resources"], json!(["foos"]));
        assert_eq!(h["rules"][0]["operations"], json!(["CREATE", "UPDATE"]));
        assert_eq!(h["rules"][1]["resources"], json!(["foos/scale"]), "kubectl scale is validated too");
        assert_eq!(h["rules"][1]["operations"], json!(["UPDATE"]));
        assert_eq!(h["rules"][1]["scope"], "Namespaced");
        let listed: Vec<&Value> = h["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|r| r["resources"].as_array().into_iter().flatten())
            .collect();
        assert!(
            !listed.iter().any(|r| r.as_str().is_some_and(|r| r.ends_with("/status"))),
            "status is the host's own: {listed:?}"
        );
        assert_eq!(h["clientConfig"]["service"]["path"], "/validate/guest-foo");
        assert_eq!(h["clientConfig"]["caBundle"], base64::engine::general_purpose::STANDARD.encode("CA"));
        assert!(h.get("namespaceSelector").is_none(), "every namespace");
        // Granted namespaces within the one watched: the intersection; none left: no webhook.
        let listed = Namespaces::Listed(["a".to_string(), "b".to_string()].into());
        let url = config(Endpoint::Url("https://127.0.0.1:9443/".into()), Some("b"));
        let h = webhook(&url, Hook::Validating, "p", &foo(), FailurePolicy::Fail, &listed, None).expect("a webhook");
        assert_eq!(h["clientConfig"]["url"], "https://127.0.0.1:9443/validate/p");
        assert!(h["clientConfig"].get("caBundle").is_none(), "no CA yet");
        assert_eq!(h["namespaceSelector"]["matchExpressions"][0]["values"], json!(["b"]));
        let elsewhere = config(Endpoint::Url("https://h".into()), Some("c"));
        assert!(webhook(&elsewhere, Hook::Validating, "p", &foo(), FailurePolicy::Fail, &listed, None).is_none());
    }

    #[test]
    fn a_mutating_webhook_calls_mutate_and_is_asked_again_if_needed() {
        let c = config(Endpoint::Url("https://127.0.0.1:9443".into()), None);
        let h = webhook(&c, Hook::Mutating, "p", &foo(), FailurePolicy::Fail, &Namespaces::Own, Some("CA"))
            .expect("a webhook");
        assert_eq!(h["clientConfig"]["url"], "https://127.0.0.1:9443/mutate/p");
        assert_eq!(h["reinvocationPolicy"], "IfNeeded");
        assert_eq!(h["sideEffects"], "None");
        let v =
            webhook(&c, Hook::Validating, "p", &foo(), FailurePolicy::Fail, &Namespaces::Own, None).expect("a webhook");
        assert!(v.get("reinvocationPolicy").is_none());
        assert_eq!(desired(&c, Hook::Mutating, &BTreeMap::new(), None)["kind"], "MutatingWebhookConfiguration");
    }
}
