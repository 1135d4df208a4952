//! ReconcilerPlugin helpers: push a component, apply a ReconcilerPlugin, wait for its status.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use kwop::vocab::crd::{ReconcilerPlugin, ReconcilerPluginStatus};
use kwop_tests::wait;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// `kwop plugin push FILE REF` to a plain-HTTP registry; the pinned reference it prints.
pub fn push(registry: &str, file: &Path, reference: &str) -> anyhow::Result<String> {
    let out = std::process::Command::new(super::KWOP)
        .args(["plugin", "push"])
        .arg(file)
        .arg(reference)
        .arg(format!("--insecure-registry={registry}"))
        .output()?;
    anyhow::ensure!(out.status.success(), "kwop plugin push {reference}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8(out.stdout)?.trim().to_string())
}

/// sha256 of a file, as `status.activeDigest` shows it.
pub fn digest_of(file: &Path) -> anyhow::Result<String> {
    Ok(format!("sha256:{}", kwop::plugin::loader::sha256_hex(&std::fs::read(file)?)))
}

/// Grants for a primary kind (`apiVersion`, `kind`) owning Deployments.
pub fn foo_grants(api_version: &str) -> Value {
    json!({
        "primary": { "apiVersion": api_version, "kind": "Foo" },
        "owns": [{ "apiVersion": "apps/v1", "kind": "Deployment" }],
    })
}

/// All ReconcilerPlugins.
pub fn rps(client: &Client) -> Api<ReconcilerPlugin> {
    Api::all(client.clone())
}

/// Server-side applies a ReconcilerPlugin labelled `kwop.dev/test=<label>`.
pub async fn apply_rp(client: &Client, name: &str, label: &str, spec: Value) -> anyhow::Result<()> {
    let body = json!({
        "apiVersion": "kwop.dev/v1alpha1", "kind": "ReconcilerPlugin",
        "metadata": { "name": name, "labels": { "kwop.dev/test": label } },
        "spec": spec,
    });
    rps(client).patch(name, &PatchParams::apply("kwop-test").force(), &Patch::Apply(&body)).await?;
    Ok(())
}

/// Merge-patches a ReconcilerPlugin's spec.
pub async fn patch_spec(client: &Client, name: &str, spec: Value) -> anyhow::Result<()> {
    let body = json!({ "spec": spec });
    rps(client).patch(name, &PatchParams::default(), &Patch::Merge(&body)).await?;
    Ok(())
}

/// A condition of a status.
pub fn condition<'a>(s: &'a ReconcilerPluginStatus, type_: &str) -> Option<&'a Condition> {
    s.conditions.iter().find(|c| c.type_ == type_)
}

/// `Ready=True`.
pub fn ready(s: &ReconcilerPluginStatus) -> bool {
    condition(s, "Ready").is_some_and(|c| c.status == "True")
}

/// The Degraded reason, if Degraded is True.
pub fn degraded(s: &ReconcilerPluginStatus) -> Option<&str> {
    condition(s, "Degraded").filter(|c| c.status == "True").map(|c| c.reason.as_str())
}

/// Waits until a ReconcilerPlugin's status satisfies `pred`.
pub async fn status_where(
    client: &Client,
    name: &str,
    what: &str,
    timeout: Duration,
    pred: impl Fn(&ReconcilerPluginStatus) -> bool,
) -> anyhow::Result<ReconcilerPluginStatus> {
    let api = rps(client);
    wait::until(&format!("{name}: {what}"), timeout, || async {
        let rp = api.get(name).await.map_err(|e| e.to_string())?;
        match rp.status {
            Some(s) if pred(&s) => Ok(Some(s)),
            Some(s) => Err(serde_json::to_string(&s).unwrap_or_default()),
            None => Err("no status".into()),
        }
    })
    .await
}
