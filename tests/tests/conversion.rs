//! CRD version conversion served by a plugin (issue 34), on a real control plane: the
//! kube-apiserver calls the host's `/convert/<plugin>` for a CRD whose conversion a
//! ReconcilerPlugin grants (`spec.grants.conversion`). guest-foo serves the Foo CRD's v1beta1; the
//! test plugin `converter` (tests/plugins/converter) converts well or badly on demand: a trap or a
//! metadata change fails the read with a message naming the object and the plugin's words, a
//! conversion that does not round-trip is caught (Warning event, metric; offline by `kwop plugin
//! test`), the stanza is put back after a hand edit and given back when the grant is revoked.

mod common;

use common::rp;
use common::webhook::{apply_answered, foo_yaml, remove_configuration};
use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use kwop_tests::procs::free_port;
use kwop_tests::{plugins, wait, ControlPlane, Host, Mode};
use serde_json::{json, Value};
use std::time::Duration;

const WITHIN: Duration = Duration::from_secs(60);

/// A host running the ReconcilerPlugins labelled `kwop.dev/test=<ns>` (their components in the
/// ConfigMap `plugins` of `ns`), serving admission on a free port; returns it and its
/// ValidatingWebhookConfiguration's name.
fn converting_host(plane: &ControlPlane, ns: &str) -> anyhow::Result<(Host, String, u16)> {
    let port = free_port()?;
    let configuration = format!("kwop-{ns}");
    let args = [
        format!("--reconciler-plugin-selector=kwop.dev/test={ns}"),
        format!("--namespace={ns}"),
        format!("--system-namespace={ns}"),
        format!("--webhook-bind-address=127.0.0.1:{port}"),
        format!("--webhook-url=https://127.0.0.1:{port}"),
        format!("--webhook-configuration={configuration}"),
        format!("--webhook-secret=webhook-{ns}"),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Ok((Host::start_reconciler_plugins(KWOP, plane, &plane.kubeconfig, &args, &[], true)?, configuration, port))
}

/// The ConfigMap `plugins` in `ns` holding `file` under `key`.
async fn plugin_config_map(client: &Client, ns: &str, key: &str, file: &str) -> anyhow::Result<()> {
    use base64::Engine as _;
    let wasm = base64::engine::general_purpose::STANDARD.encode(std::fs::read(file)?);
    let cm: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "plugins" }, "binaryData": { key: wasm } }))?;
    Api::<ConfigMap>::namespaced(client.clone(), ns).create(&PostParams::default(), &cm).await?;
    Ok(())
}

fn crds(client: &Client) -> Api<CustomResourceDefinition> {
    Api::all(client.clone())
}

/// The CRD's `spec.conversion`, as JSON.
async fn conversion_of(client: &Client, crd: &str) -> anyhow::Result<Value> {
    Ok(serde_json::to_value(crds(client).get(crd).await?.spec.conversion)?)
}

/// Waits until CRD `crd` converts through `/convert/<plugin>` with a caBundle.
async fn converting(client: &Client, crd: &str, plugin: &str) -> anyhow::Result<Value> {
    wait::until(&format!("{crd} converting through {plugin}"), WITHIN, || async {
        let c = conversion_of(client, crd).await.map_err(|e| e.to_string())?;
        let cc = &c["webhook"]["clientConfig"];
        let ours = c["strategy"] == "Webhook"
            && cc["url"].as_str().is_some_and(|u| u.ends_with(&format!("/convert/{plugin}")))
            && cc["caBundle"].as_str().is_some_and(|b| !b.is_empty());
        if ours {
            Ok(Some(c))
        } else {
            Err(c.to_string())
        }
    })
    .await
}

/// Waits until CRD `crd` converts with strategy None.
async fn not_converting(client: &Client, crd: &str) -> anyhow::Result<()> {
    wait::until(&format!("{crd} back to strategy None"), WITHIN, || async {
        let c = conversion_of(client, crd).await.map_err(|e| e.to_string())?;
        if c["strategy"] == "None" && c.get("webhook").is_none_or(Value::is_null) {
            Ok(Some(()))
        } else {
            Err(c.to_string())
        }
    })
    .await
}

fn api_at(client: &Client, ns: &str, group: &str, version: &str, kind: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind)))
}

/// GET until the webhook answers (a new stanza takes the API server a moment): the first answer
/// that is not a failure to reach the webhook.
async fn read_answered(api: &Api<DynamicObject>, name: &str) -> Result<DynamicObject, String> {
    let until = std::time::Instant::now() + WITHIN;
    loop {
        let r = api.get(name).await.map_err(|e| e.to_string());
        let unanswered = r.as_ref().err().is_some_and(|e| {
            e.contains("failed calling webhook") || e.contains("connection refused") || e.contains("x509")
        });
        if !unanswered || std::time::Instant::now() > until {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn guest_foo_serves_v1beta1_and_its_stanza_is_kept_then_given_back() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let ns = plane.namespace("conv-foo")?;
    plugin_config_map(&client, &ns, "guest-foo.wasm", plugins::GUEST_FOO).await?;
    let rp_name = format!("guest-foo-{ns}");
    let spec = |conversion: bool| {
        let mut grants = rp::foo_grants("samplecontroller.k8s.io/v1alpha1");
        grants["conversion"] = json!(conversion);
        json!({ "source": { "configMap": { "name": "plugins", "key": "guest-foo.wasm" } }, "grants": grants })
    };
    rp::apply_rp(&client, &rp_name, &ns, spec(true)).await?;
    let (host, configuration, port) = converting_host(plane, &ns)?;
    let crd = "foos.samplecontroller.k8s.io";
    converting(&client, crd, "guest-foo").await?;
    // v1beta1 ships unserved (kubectl would prefer it where nothing converts); serve it, as the
    // docs tell the admin who grants the conversion.
    let serve = json!([{ "op": "replace", "path": "/spec/versions/1/served", "value": true }]);
    crds(&client).patch(crd, &PatchParams::default(), &Patch::<()>::Json(serde_json::from_value(serve)?)).await?;
    wait::until("v1beta1 served", WITHIN, || async {
        let ok = plane.kubectl_output(&["get", "foos.v1beta1.samplecontroller.k8s.io", "-A"]).is_ok();
        Ok(ok.then_some(()))
    })
    .await?;

    // A Foo stored as v1alpha1 reads as v1beta1 in v1beta1's shape.
    let applied =
        apply_answered(plane, &ns, &foo_yaml("alpha", Some("alpha-dep"))).await.map_err(anyhow::Error::msg)?;
    assert!(applied.contains("created") || applied.contains("configured"), "{applied}");
    let beta = api_at(&client, &ns, "samplecontroller.k8s.io", "v1beta1", "Foo");
    let alpha = read_answered(&beta, "alpha").await.map_err(anyhow::Error::msg)?;
    let alpha_stored =
        serde_json::to_value(api_at(&client, &ns, "samplecontroller.k8s.io", "v1alpha1", "Foo").get("alpha").await?)?;
    assert_eq!(alpha.data["spec"], json!({ "deployment": { "name": "alpha-dep", "replicas": 1 } }), "{alpha:?}");
    assert_eq!(alpha.types.as_ref().map(|t| t.api_version.as_str()), Some("samplecontroller.k8s.io/v1beta1"));

    // A Foo created as v1beta1 is stored (as v1alpha1) and reconciled by guest-foo.
    let created: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "samplecontroller.k8s.io/v1beta1", "kind": "Foo", "metadata": { "name": "beta" },
        "spec": { "deployment": { "name": "beta-dep", "replicas": 2 } },
    }))?;
    beta.create(&PostParams::default(), &created).await?;
    let stored = api_at(&client, &ns, "samplecontroller.k8s.io", "v1alpha1", "Foo").get("beta").await?;
    assert_eq!(stored.data["spec"], json!({ "deploymentName": "beta-dep", "replicas": 2 }));
    deployment_where(&client, &ns, "beta-dep", "the v1beta1 Foo's Deployment", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(2)
    })
    .await?;
    // `kubectl scale` goes through v1beta1 (kubectl's preferred version) and its /scale, both ways converted.
    let scaled = plane.kubectl_output(&["scale", "-n", &ns, "foo/beta", "--replicas=3"])?;
    assert!(scaled.contains("scaled"), "{scaled}");
    deployment_where(&client, &ns, "beta-dep", "the Deployment scaled through v1beta1", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(3)
    })
    .await?;
    let stored = api_at(&client, &ns, "samplecontroller.k8s.io", "v1alpha1", "Foo").get("beta").await?;
    assert_eq!(stored.data["spec"]["replicas"], 3);
    assert!(host.metric("kwop_conversion_requests_total", &[("plugin", "guest-foo"), ("result", "converted")])? >= 2.0);

    // A hand edit of the stanza is put back.
    let edit = json!({ "spec": { "conversion": { "strategy": "None", "webhook": null } } });
    let by_hand = PatchParams { field_manager: Some("someone".into()), ..Default::default() };
    crds(&client).patch(crd, &by_hand, &Patch::Merge(&edit)).await?;
    let edited = conversion_of(&client, crd).await?;
    assert_eq!(edited["strategy"], "None", "the edit took: {edited}");
    let started = std::time::Instant::now();
    converting(&client, crd, "guest-foo").await?;
    assert!(started.elapsed() < Duration::from_secs(15), "put back after {:?}", started.elapsed());

    // Revoking the grant gives the CRD back; the plugin keeps running, and says why it does not convert.
    rp::apply_rp(&client, &rp_name, &ns, spec(false)).await?;
    not_converting(&client, crd).await?;
    wait::until("the log saying the conversion is not granted", WITHIN, || async {
        Ok(host.log().contains("does not grant the conversion").then_some(()))
    })
    .await?;
    rp::status_where(&client, &rp_name, "Ready", WITHIN, rp::ready).await?;
    // Asked anyway (a caller other than the API server, or a stale stanza): refused, saying why.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().tls_danger_accept_invalid_certs(true).build()?;
    let review = json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": {
        "uid": "u-1", "desiredAPIVersion": "samplecontroller.k8s.io/v1beta1", "objects": [alpha_stored] } });
    let url = format!("https://127.0.0.1:{port}/convert/guest-foo");
    let sent = http.post(&url).header("content-type", "application/json").body(review.to_string()).send().await?;
    let answer: Value = serde_json::from_str(&sent.text().await?)?;
    assert_eq!(answer["response"]["uid"], "u-1", "{answer}");
    assert_eq!(answer["response"]["result"]["status"], "Failure", "{answer}");
    let message = answer["response"]["result"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("does not grant the conversion"), "{answer}");
    let not_a_review = http.post(&url).body("{").send().await?;
    assert_eq!(not_a_review.status().as_u16(), 400);
    remove_configuration(&client, &configuration).await;
    Ok(())
}

/// The converter's CRD: `convs.conv.kwop.dev`, v1 stored, v2 served (plus `extra` versions).
fn conv_crd(extra: &[&str]) -> String {
    let version = |name: &str, storage: bool| {
        format!(
            "  - name: {name}\n    served: true\n    storage: {storage}\n    schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n"
        )
    };
    let mut versions = version("v1", true) + &version("v2", false);
    for v in extra {
        versions += &version(v, false);
    }
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: convs.conv.kwop.dev\nspec:\n  group: conv.kwop.dev\n  names:\n    kind: Conv\n    plural: convs\n    singular: conv\n    listKind: ConvList\n  scope: Namespaced\n  versions:\n{versions}"
    )
}

async fn create_conv(client: &Client, ns: &str, name: &str, mode: &str) -> anyhow::Result<()> {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "conv.kwop.dev/v1", "kind": "Conv", "metadata": { "name": name },
        "spec": { "size": 3, "mode": mode, "note": "keep me" },
    }))?;
    api_at(client, ns, "conv.kwop.dev", "v1", "Conv").create(&PostParams::default(), &obj).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_conversion_fails_the_read_by_name_or_is_caught_and_the_host_stays_healthy() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let ns = plane.namespace("conv-bad")?;
    plane.kubectl_stdin(&["apply", "-f", "-"], &conv_crd(&[]))?;
    plugin_config_map(&client, &ns, "converter.wasm", plugins::CONVERTER).await?;
    let grants = json!({ "primary": { "apiVersion": "conv.kwop.dev/v1", "kind": "Conv" }, "conversion": true });
    let source = json!({ "configMap": { "name": "plugins", "key": "converter.wasm" } });
    let rp_name = format!("converter-{ns}");
    rp::apply_rp(&client, &rp_name, &ns, json!({ "source": source, "grants": grants })).await?;
    let (host, configuration, _) = converting_host(plane, &ns)?;
    let crd = "convs.conv.kwop.dev";
    converting(&client, crd, "converter").await?;
    let v2 = api_at(&client, &ns, "conv.kwop.dev", "v2", "Conv");
    for (name, mode) in [("good", "good"), ("trap", "trap"), ("relabel", "relabel"), ("lossy", "lossy")] {
        create_conv(&client, &ns, name, mode).await?;
    }

    let good = read_answered(&v2, "good").await.map_err(anyhow::Error::msg)?;
    assert_eq!(good.data["spec"], json!({ "replicas": { "count": 3 }, "mode": "good", "note": "keep me" }));
    // A trap fails the read with the plugin's words, naming the object.
    let trapped = read_answered(&v2, "trap").await.expect_err("a trapping conversion fails the read");
    assert!(trapped.contains(&format!("converter cannot convert {ns}/trap to conv.kwop.dev/v2")), "{trapped}");
    assert!(trapped.contains("convert exploded on trap"), "{trapped}");
    // A metadata change is refused, saying so.
    let relabelled = read_answered(&v2, "relabel").await.expect_err("a metadata change fails the read");
    assert!(relabelled.contains(&format!("converter cannot convert {ns}/relabel to conv.kwop.dev/v2")), "{relabelled}");
    assert!(relabelled.contains("it changed metadata") && relabelled.contains(".metadata.labels"), "{relabelled}");
    // The host is healthy and good objects still read.
    assert_eq!(read_answered(&v2, "good").await.map_err(anyhow::Error::msg)?.data["spec"]["replicas"]["count"], 3);
    assert_eq!(kwop_tests::host::http_get(host.port, "/healthz")?.0, 200);

    // A conversion that loses a field answers as the plugin said, and the sampled round trip
    // catches it: a Warning event on the object and a metric.
    let lossy = read_answered(&v2, "lossy").await.map_err(anyhow::Error::msg)?;
    assert!(lossy.data["spec"].get("note").is_none(), "{:?}", lossy.data);
    let ev = event_with_reason(&client, &ns, "lossy", "ConversionNotRoundTrip").await?;
    let note = ev.note.unwrap_or_default();
    assert!(note.contains(&format!("converter's conversion of {ns}/lossy does not round-trip")), "{note}");
    assert!(note.contains(".spec.note: missing"), "{note}");
    let failures = host.metric("kwop_conversion_round_trip_failures_total", &[("plugin", "converter")])?;
    assert!(failures >= 1.0, "{failures}");
    assert!(host.metric("kwop_conversion_requests_total", &[("plugin", "converter"), ("result", "failed")])? >= 2.0);

    // A version the plugin does not convert: the CRD is given back, and the ReconcilerPlugin says why.
    plane.kubectl_stdin(&["apply", "-f", "-"], &conv_crd(&["v3"]))?;
    not_converting(&client, crd).await?;
    let ev = wait::until("ConversionRefused on the ReconcilerPlugin", WITHIN, || async {
        let api: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
        let evs = api.list(&Default::default()).await.map_err(|e| e.to_string())?;
        Ok(evs.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("ConversionRefused")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(rp_name.as_str())
        }))
    })
    .await?;
    assert!(ev.note.unwrap_or_default().contains("[\"v3\"]"));
    remove_configuration(&client, &configuration).await;
    Ok(())
}

#[test]
fn offline_a_conversion_that_does_not_round_trip_fails_its_fixture_with_a_clear_message() -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("kwop-conversion-fixtures-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let fixture = |name: &str, mode: &str| -> anyhow::Result<()> {
        let d = dir.join(name);
        std::fs::create_dir_all(&d)?;
        let primary = format!(
            "apiVersion: conv.kwop.dev/v1\nkind: Conv\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  size: 2\n  mode: {mode}\n  note: keep me\n"
        );
        std::fs::write(d.join("primary.yaml"), primary)?;
        Ok(())
    };
    fixture("good", "good")?;
    fixture("lossy", "lossy")?;
    fixture("relabel", "relabel")?;
    let root = dir.to_string_lossy().to_string();
    let (ok, out, err) = kwop(&["plugin", "test", plugins::CONVERTER, &root, "--update"]);
    assert!(!ok, "{out}{err}");
    assert!(out.contains("wrote") && out.contains("good/expected.json"), "{out}");
    assert!(
        out.contains(
            "conversion to conv.kwop.dev/v2 and back: converter cannot convert it: converting conv.kwop.dev/v1 to \
             conv.kwop.dev/v2 and back does not give the object back (.spec.note: missing"
        ),
        "{out}"
    );
    assert!(
        out.contains("it changed metadata, which a conversion must leave untouched (.metadata.labels: not expected"),
        "{out}"
    );
    // The good fixture passes from now on; the others keep failing.
    let (ok, out, _) = kwop(&["plugin", "test", plugins::CONVERTER, &dir.join("good").to_string_lossy()]);
    assert!(ok, "{out}");
    let (ok, out, _) = kwop(&["plugin", "test", plugins::CONVERTER, &dir.join("lossy").to_string_lossy()]);
    assert!(!ok && out.contains("FAIL"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
