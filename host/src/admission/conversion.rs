//! The conversion stanza of the CRDs whose conversion an admin granted to a plugin: for each
//! plugin served here that declares `converts` and whose ReconcilerPlugin grants
//! `conversion: true`, the CRD `<plural>.<group>` of its primary gets `spec.conversion:
//! {strategy: Webhook, webhook: {conversionReviewVersions: [v1], clientConfig: {service | url,
//! caBundle}}}` pointing at `/convert/<plugin>`. Written by the leader with server-side apply
//! (field manager [`FIELD_MANAGER`], forced) when plugins or the CA change, and checked with a GET
//! every [`CHECK`]: a hand edit is put back within that. A grant revoked, or the plugin gone, sets
//! `strategy: None` back on the CRDs this host took over (known since it started: a host restarted
//! after the plugin went does not know it held that CRD).
//!
//! A CRD serving a version the plugin does not declare in `converts` is not taken over (the API
//! server would send it objects it cannot convert): the log and a Warning event
//! `ConversionRefused` on the ReconcilerPlugin say which versions. The host needs `get` and
//! `patch` on the CRD (`deploy/`: the Foo CRD by name; other CRDs an admin adds).

use super::{AdmissionConfig, CertSource, Registry};
use crate::leader::Leadership;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The field manager of the CRDs' `spec.conversion`.
pub const FIELD_MANAGER: &str = "kwop-conversion";
/// How often each CRD taken over is read back (a hand edit is put back within this).
pub const CHECK: Duration = Duration::from_secs(4);

/// `spec.conversion` sending `plugin`'s CRD to this host.
pub fn webhook(config: &AdmissionConfig, plugin: &str, ca: Option<&str>) -> Value {
    let client = super::webhooks::client_config(config, &format!("/convert/{plugin}"), ca);
    json!({ "strategy": "Webhook", "webhook": { "conversionReviewVersions": ["v1"], "clientConfig": client } })
}

/// `spec.conversion` given back: no webhook.
pub fn none() -> Value {
    json!({ "strategy": "None" })
}

/// The apply body of CRD `name`'s `spec.conversion` (and nothing else of it).
pub fn body(name: &str, conversion: &Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": name },
        "spec": { "conversion": conversion },
    })
}

/// The CRD's versions that `converts` does not list.
pub fn unconverted(crd: &CustomResourceDefinition, converts: &[String]) -> Vec<String> {
    crd.spec.versions.iter().map(|v| v.name.clone()).filter(|v| !converts.contains(v)).collect()
}

/// Whether `have` holds everything `want` says (objects: each key of `want`, recursively).
pub fn holds(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w.iter().all(|(k, wv)| h.get(k).is_some_and(|hv| holds(hv, wv))),
        _ => have == want,
    }
}

/// A CRD this host wants to take over, for a plugin.
struct Wanted {
    plugin: String,
    key: String,
    converts: Vec<String>,
}

/// Keeps the granted CRDs' conversion current while this replica leads, until `stop`.
pub async fn run(
    config: AdmissionConfig,
    client: Client,
    registry: Arc<Registry>,
    mut ca: watch::Receiver<Option<String>>,
    leadership: Arc<Leadership>,
    stop: tokio_util::sync::CancellationToken,
) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut plugins = registry.subscribe();
    // CRD → plugin, for the CRDs this host set to Webhook (to give back).
    let mut held: BTreeMap<String, String> = BTreeMap::new();
    // CRD → the refusal last said (said once per change).
    let mut refused: BTreeMap<String, String> = BTreeMap::new();
    // CRD → the error last logged keeping it.
    let mut failing: BTreeMap<String, String> = BTreeMap::new();
    loop {
        let ready = config.certs == CertSource::External || ca.borrow().is_some();
        if ready && leadership.may_write() {
            let mut wanted = BTreeMap::new();
            for (name, v) in registry.all().iter() {
                if v.plugin.info.converts() && v.plugin.grants.conversion && !v.primary.gvk.group.is_empty() {
                    let crd = format!("{}.{}", v.primary.resource.plural, v.primary.gvk.group);
                    let w =
                        Wanted { plugin: name.clone(), key: v.key.clone(), converts: v.plugin.info.converts.clone() };
                    wanted.insert(crd, w);
                }
            }
            let ca_now = ca.borrow().clone();
            for (crd, w) in &wanted {
                let want = webhook(&config, &w.plugin, ca_now.as_deref());
                match keep(&api, crd, w, &want).await {
                    Ok(Kept::Held) => {
                        refused.remove(crd);
                        held.insert(crd.clone(), w.plugin.clone());
                    }
                    Ok(Kept::Refused(msg)) => {
                        if refused.get(crd) != Some(&msg) {
                            tracing::warn!(crd = %crd, plugin = %w.plugin, "{msg}");
                            if let Some(rp) = w.key.strip_prefix("reconcilerplugin/") {
                                let reference = k8s_openapi::api::core::v1::ObjectReference {
                                    api_version: Some("kwop.dev/v1alpha1".into()),
                                    kind: Some("ReconcilerPlugin".into()),
                                    name: Some(rp.into()),
                                    ..Default::default()
                                };
                                crate::report::host_warning(&client, reference, "ConversionRefused", &msg);
                            }
                            refused.insert(crd.clone(), msg);
                        }
                    }
                    Err(e) => {
                        // Said once per different error (it is retried every few seconds).
                        let e = e.to_string();
                        if failing.get(crd) != Some(&e) {
                            tracing::warn!(crd = %crd, plugin = %w.plugin, "cannot keep the CRD's conversion: {e}");
                            failing.insert(crd.clone(), e);
                        }
                        continue;
                    }
                }
                failing.remove(crd);
            }
            // Given back: grant revoked, plugin gone, or a version it does not convert.
            let back: Vec<String> =
                held.keys().filter(|c| !wanted.contains_key(*c) || refused.contains_key(*c)).cloned().collect();
            for crd in back {
                let pp = PatchParams::apply(FIELD_MANAGER).force();
                match api.patch(&crd, &pp, &Patch::Apply(&body(&crd, &none()))).await {
                    Ok(_) => {
                        tracing::info!(crd = %crd, plugin = held.get(&crd).map(String::as_str).unwrap_or(""),
                            "CRD conversion given back (strategy None)");
                        held.remove(&crd);
                    }
                    Err(kube::Error::Api(e)) if e.code == 404 => {
                        held.remove(&crd);
                    }
                    Err(e) => tracing::warn!(crd = %crd, "cannot give the CRD's conversion back: {e}"),
                }
            }
            refused.retain(|c, _| wanted.contains_key(c));
            failing.retain(|c, _| wanted.contains_key(c));
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = plugins.changed() => {}
            _ = ca.changed() => {}
            _ = tokio::time::sleep(CHECK) => {}
        }
    }
}

enum Kept {
    /// The CRD converts through this host.
    Held,
    /// Not taken over: why.
    Refused(String),
}

/// Reads the CRD and applies `want` when its conversion differs.
async fn keep(api: &Api<CustomResourceDefinition>, crd: &str, w: &Wanted, want: &Value) -> anyhow::Result<Kept> {
    let current = api.get(crd).await?;
    let missing = unconverted(&current, &w.converts);
    if !missing.is_empty() {
        return Ok(Kept::Refused(format!(
            "the CRD {crd} serves versions {missing:?} that plugin {} does not convert (its converts: {:?}): its \
             conversion is not taken over",
            w.plugin, w.converts
        )));
    }
    let have = serde_json::to_value(&current.spec.conversion)?;
    if !holds(&have, want) {
        let pp = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(crd, &pp, &Patch::Apply(&body(crd, want))).await?;
        tracing::info!(crd = %crd, plugin = %w.plugin, "CRD conversion set to this host's /convert/{}", w.plugin);
    }
    Ok(Kept::Held)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Endpoint;
    use base64::Engine as _;

    fn config(endpoint: Endpoint) -> AdmissionConfig {
        AdmissionConfig {
            bind: ([127, 0, 0, 1], 0).into(),
            endpoint,
            failure_policy: crate::vocab::FailurePolicy::Fail,
            timeout: Duration::from_secs(10),
            namespace: "kwop-system".into(),
            secret: "kwop-webhook-tls".into(),
            configuration: "kwop".into(),
            cert_validity: Duration::from_secs(3600),
            certs: CertSource::SelfSigned,
            only_namespace: None,
            client_ca: None,
        }
    }

    #[test]
    fn the_stanza_points_at_the_plugins_path_with_the_ca() {
        let svc = config(Endpoint::Service { namespace: "kwop-system".into(), name: "kwop-webhook".into() });
        let w = webhook(&svc, "guest-foo", Some("CA"));
        assert_eq!(w["strategy"], "Webhook");
        assert_eq!(w["webhook"]["conversionReviewVersions"], json!(["v1"]));
        let c = &w["webhook"]["clientConfig"];
        assert_eq!(
            c["service"],
            json!({"namespace": "kwop-system", "name": "kwop-webhook", "path": "/convert/guest-foo", "port": 443})
        );
        assert_eq!(c["caBundle"], base64::engine::general_purpose::STANDARD.encode("CA"));
        let url = webhook(&config(Endpoint::Url("https://127.0.0.1:9443/".into())), "p", None);
        assert_eq!(url["webhook"]["clientConfig"], json!({"url": "https://127.0.0.1:9443/convert/p"}));
        assert_eq!(body("foos.g", &none())["spec"], json!({"conversion": {"strategy": "None"}}));
    }

    #[test]
    fn a_hand_edit_is_seen_and_fields_the_server_adds_are_not() {
        let want = webhook(&config(Endpoint::Url("https://h".into())), "p", Some("CA"));
        let mut have = want.clone();
        have["webhook"]["clientConfig"]["service"] = Value::Null;
        assert!(holds(&have, &want), "an extra field is not a difference");
        have["webhook"]["clientConfig"]["url"] = json!("https://elsewhere/convert/p");
        assert!(!holds(&have, &want));
        assert!(!holds(&json!({"strategy": "None"}), &want));
        assert!(holds(&json!({"strategy": "None"}), &none()));
    }

    #[test]
    fn versions_the_plugin_does_not_convert_are_named() {
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": {"name": "foos.g"},
            "spec": {"group": "g", "names": {"kind": "Foo", "plural": "foos"}, "scope": "Namespaced",
                "versions": [{"name": "v1", "served": true, "storage": true}, {"name": "v2", "served": true, "storage": false},
                    {"name": "v3", "served": true, "storage": false}]}
        }))
        .expect("a CRD");
        assert_eq!(unconverted(&crd, &["v1".into(), "v2".into()]), vec!["v3".to_string()]);
        assert!(unconverted(&crd, &["v1".into(), "v2".into(), "v3".into()]).is_empty());
    }
}
