//! Plugins as ReconcilerPlugin objects (issue 13) on a real control plane and a real OCI
//! registry: components pushed with `kwop plugin push`, granted by the admin, hot-swapped by
//! editing `spec.source`, one plugin per primary kind, namespace and kind grants enforced.

mod common;

use common::rp::*;
use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kwop_tests::registry::Registry;
use kwop_tests::{plugins, wait, ControlPlane, Host, Mode};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

const V2_ANNOTATION: &str = "samplecontroller.k8s.io/reconciled-by";

fn guest(name: &str) -> PathBuf {
    let dir = std::env::var_os("KWOP_GUESTS_DIR").map(PathBuf::from).unwrap_or_else(|| {
        std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| kwop_tests::repo_root().join("target"))
            .join("guests")
    });
    dir.join(format!("{name}.wasm"))
}

/// A host running the ReconcilerPlugins labelled `kwop.dev/test=<label>`, pulling from
/// `registry` over plain HTTP.
fn rp_host(plane: &ControlPlane, label: &str, registry: &str, extra: &[&str]) -> anyhow::Result<Host> {
    let mut args =
        vec![format!("--reconciler-plugin-selector=kwop.dev/test={label}"), format!("--insecure-registry={registry}")];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Host::start_reconciler_plugins(KWOP, plane, &plane.kubeconfig, &args, &[], true)
}

fn is_v2(d: &Deployment) -> bool {
    d.metadata.annotations.as_ref().and_then(|a| a.get(V2_ANNOTATION)).map(String::as_str) == Some("guest-foo-v2")
}

fn foos_of(client: &kube::Client, ns: &str, group: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk(&GroupVersionKind::gvk(group, "v1alpha1", "Foo")))
}

async fn create_foo_of(client: &kube::Client, ns: &str, group: &str, name: &str, dep: &str) -> anyhow::Result<()> {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1alpha1"), "kind": "Foo",
        "metadata": { "name": name }, "spec": { "deploymentName": dep, "replicas": 1 }
    }))?;
    foos_of(client, ns, group).create(&PostParams::default(), &obj).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn javascript_and_python_plugins_from_the_registry_reconcile_their_own_groups() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let ns = plane.namespace("rp-langs")?;
    let reg = Registry::start()?;
    let hp = reg.host_port();
    let langs = [("js", "js.rp.kwop.dev", "guest-foo-js"), ("python", "py.rp.kwop.dev", "guest-foo-py")];
    let groups: Vec<String> = langs.iter().map(|(_, g, _)| g.to_string()).collect();
    kwop_tests::bench::variants::install_crds(plane, &groups)?;
    let mut digests = Vec::new();
    for (lang, group, _) in langs {
        let wasm =
            tokio::task::spawn_blocking(move || kwop_tests::foo_groups::guest_foo_for_group(lang, group)).await??;
        let pinned = push(&hp, &wasm, &format!("{hp}/plugins/foo-{lang}:0.1.0"))?;
        assert!(pinned.starts_with(&format!("{hp}/plugins/foo-{lang}@sha256:")), "{pinned}");
        digests.push(digest_of(&wasm)?);
        let spec = json!({
            "source": { "oci": format!("{hp}/plugins/foo-{lang}:0.1.0") },
            "grants": foo_grants(&format!("{group}/v1alpha1")),
            "limits": { "memory": "128Mi", "timeout": "5s" },
        });
        apply_rp(&client, &format!("foo-{lang}-{ns}"), &ns, spec).await?;
    }
    let host = rp_host(plane, &ns, &hp, &[&format!("--namespace={ns}")])?;
    for ((lang, group, plugin), digest) in langs.iter().zip(&digests) {
        create_foo_of(&client, &ns, group, &format!("foo-{lang}"), &format!("dep-{lang}")).await?;
        deployment_where(&client, &ns, &format!("dep-{lang}"), "the plugin's Deployment", |d| {
            d.spec.as_ref().and_then(|s| s.replicas) == Some(1)
        })
        .await?;
        let s = status_where(&client, &format!("foo-{lang}-{ns}"), "Ready", Duration::from_secs(60), ready).await?;
        assert_eq!(degraded(&s), None);
        assert_eq!(s.active_digest.as_deref(), Some(digest.as_str()));
        let p = s.plugin.clone().unwrap_or_default();
        assert_eq!((p.name.as_str(), p.primary.as_str()), (*plugin, format!("{group}/v1alpha1/Foo").as_str()));
        let pinned = s.source.and_then(|s| s.pinned).unwrap_or_default();
        assert!(pinned.contains("@sha256:"), "the tag is pinned: {pinned}");
    }
    // Printer columns: what `kubectl get rp` shows.
    let table = plane.kubectl_output(&["get", "reconcilerplugins", "-l", &format!("kwop.dev/test={ns}")])?;
    assert!(table.contains("guest-foo-js") && table.contains("True") && table.contains("Running"), "{table}");
    drop(host);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn editing_the_source_swaps_v1_to_v2_under_load_and_nothing_is_lost() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let ns = plane.namespace("rp-swap")?;
    let reg = Registry::start()?;
    let hp = reg.host_port();
    push(&hp, Path::new(plugins::GUEST_FOO), &format!("{hp}/guest-foo:v1"))?;
    push(&hp, Path::new(plugins::GUEST_FOO_V2), &format!("{hp}/guest-foo:v2"))?;
    let name = format!("guest-foo-{ns}");
    let spec = json!({ "source": { "oci": format!("{hp}/guest-foo:v1") }, "grants": foo_grants("samplecontroller.k8s.io/v1alpha1") });
    apply_rp(&client, &name, &ns, spec).await?;
    let host = rp_host(plane, &ns, &hp, &[&format!("--namespace={ns}")])?;
    status_where(&client, &name, "Ready on v1", Duration::from_secs(60), ready).await?;

    let load = FooLoad::start(&client, &ns);
    load.reached(FooLoad::TOTAL / 4).await?;
    patch_spec(&client, &name, json!({ "source": { "oci": format!("{hp}/guest-foo:v2") } })).await?;
    let v2 = digest_of(Path::new(plugins::GUEST_FOO_V2))?;
    let s = status_where(&client, &name, "v2 active", Duration::from_secs(60), |s| {
        s.active_digest.as_deref() == Some(v2.as_str()) && ready(s)
    })
    .await?;
    // Under load: the writes went on after v2 took over.
    let at_swap = load.done();
    assert!(at_swap < FooLoad::TOTAL, "the load was over before the swap ({at_swap} writes)");
    load.finish().await?;
    assert_eq!(s.plugin.map(|p| p.version).as_deref(), Some("0.1.0-v2"));
    assert!(s.source.and_then(|s| s.pinned).is_some_and(|p| p.contains("/guest-foo@sha256:")));

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    wait::until("all 200 Deployments reconciled by v2 with 2 replicas", Duration::from_secs(120), || async {
        let list = deployments.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items;
        let good = list.iter().filter(|d| is_v2(d) && d.spec.as_ref().and_then(|s| s.replicas) == Some(2)).count();
        Ok((good == 200).then_some(())).map_err(|_: ()| format!("{good}/200 ({} exist)", list.len()))
    })
    .await?;
    let foos = foos(&client, &ns).list(&ListParams::default()).await?.items;
    assert!(foos.iter().all(|f| f.data["status"]["availableReplicas"] == 0), "every Foo has its status");
    for bad in ["plugin_error", "plugin_failure", "rejected", "write_error"] {
        assert_eq!(host.metric("kwop_reconcile_total", &[("result", bad)])?, 0.0, "{bad} reconciles");
    }
    assert_eq!(host.metric("kwop_plugin_swaps_total", &[("plugin", "guest-foo")])?, 1.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_source_keeps_the_last_good_version_says_why_and_recovers() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let ns = plane.namespace("rp-bad")?;
    let reg = Registry::start()?;
    // The host reaches the registry through a proxy the test can cut (an outage).
    let proxy = kwop_tests::proxy::Proxy::start(reg.host_port().parse()?)?;
    let (hp, php) = (reg.host_port(), format!("127.0.0.1:{}", proxy.port));
    push(&hp, Path::new(plugins::GUEST_FOO), &format!("{hp}/guest-foo:v1"))?;
    push(&hp, Path::new(plugins::GUEST_FOO_V2), &format!("{hp}/guest-foo:v2"))?;
    let v1 = digest_of(Path::new(plugins::GUEST_FOO))?;
    let name = format!("guest-foo-{ns}");
    let spec = json!({ "source": { "oci": format!("{php}/guest-foo:v1") }, "grants": foo_grants("samplecontroller.k8s.io/v1alpha1") });
    apply_rp(&client, &name, &ns, spec).await?;
    let _host = rp_host(plane, &ns, &php, &[&format!("--namespace={ns}")])?;
    status_where(&client, &name, "Ready on v1", Duration::from_secs(60), ready).await?;

    let still_v1 =
        |s: &kwop::vocab::crd::ReconcilerPluginStatus| s.active_digest.as_deref() == Some(v1.as_str()) && ready(s);
    let cases = [
        ("a digest that is not there", format!("{php}/guest-foo@sha256:{}", "0".repeat(64)), "NotFound"),
        ("a missing tag", format!("{php}/guest-foo:missing"), "NotFound"),
        ("not a reference", "Not A Reference".to_string(), "InvalidReference"),
    ];
    for (i, (what, reference, reason)) in cases.iter().enumerate() {
        patch_spec(&client, &name, json!({ "source": { "oci": reference } })).await?;
        let s = status_where(&client, &name, &format!("Degraded {reason} for {what}"), Duration::from_secs(30), |s| {
            degraded(s) == Some(reason) && still_v1(s)
        })
        .await?;
        assert!(
            s.last_error.unwrap_or_default().contains("keeps running"),
            "{what}: the last good version is named as kept"
        );
        // Issue 40: the trouble shows in `kubectl get rp`, not only in the conditions.
        let row = plane.kubectl_output(&["get", "reconcilerplugin", &name, "--no-headers"])?;
        assert!(row.contains(" True ") && row.contains(&format!("Running, Degraded: {reason}")), "{what}: {row}");
        // v1 keeps reconciling.
        create_foo(&client, &ns, &format!("during-{i}"), &format!("dep-during-{i}"), Some(1)).await?;
        deployment_where(&client, &ns, &format!("dep-during-{i}"), "v1 still reconciles", |d| !is_v2(d)).await?;
    }

    // An outage while moving to v2: Unreachable, v1 runs, and once the registry is back, v2.
    proxy.cut();
    patch_spec(&client, &name, json!({ "source": { "oci": format!("{php}/guest-foo:v2") } })).await?;
    status_where(&client, &name, "Degraded Unreachable", Duration::from_secs(60), |s| {
        degraded(s) == Some("Unreachable") && still_v1(s)
    })
    .await?;
    proxy.restore();
    let v2 = digest_of(Path::new(plugins::GUEST_FOO_V2))?;
    status_where(&client, &name, "recovered on v2", Duration::from_secs(90), |s| {
        degraded(s).is_none() && ready(s) && s.active_digest.as_deref() == Some(v2.as_str())
    })
    .await?;
    deployment_where(&client, &ns, "dep-during-0", "v2 took over", is_v2).await?;
    // The story as Events on the ReconcilerPlugin (`kubectl describe rp`).
    let events = wait::until("the ReconcilerPlugin's events", Duration::from_secs(30), || async {
        let all = Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), "default")
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let mine: Vec<(String, String, String)> = all
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().is_some_and(|r| r.name.as_deref() == Some(name.as_str())))
            .map(|e| (e.type_.unwrap_or_default(), e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect();
        Ok(mine.iter().any(|e| e.1 == "Swapped").then_some(mine))
    })
    .await?;
    let has = |type_: &str, reason: &str, note: &str| {
        events.iter().any(|e| e.0 == type_ && e.1 == reason && e.2.contains(note))
    };
    assert!(has("Warning", "Degraded", "NotFound"), "{events:?}");
    assert!(has("Warning", "Degraded", "Unreachable"), "{events:?}");
    assert!(has("Normal", "Recovered", ""), "{events:?}");
    assert!(has("Normal", "Swapped", &format!("component {v2}; was {v1}")), "{events:?}");
    assert!(has("Normal", "Pulled", "guest-foo@sha256:"), "{events:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_plugin_for_a_kind_is_refused_and_makes_no_writes() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let ns = plane.namespace("rp-conflict")?;
    let reg = Registry::start()?;
    let hp = reg.host_port();
    push(&hp, Path::new(plugins::GUEST_FOO), &format!("{hp}/guest-foo:v1"))?;
    push(&hp, &guest("foo-js"), &format!("{hp}/guest-foo-js:v1"))?;
    let grants = foo_grants("samplecontroller.k8s.io/v1alpha1");
    let (first, second) = (format!("first-{ns}"), format!("second-{ns}"));
    apply_rp(&client, &first, &ns, json!({ "source": { "oci": format!("{hp}/guest-foo:v1") }, "grants": grants }))
        .await?;
    let host = rp_host(plane, &ns, &hp, &[&format!("--namespace={ns}")])?;
    status_where(&client, &first, "Ready", Duration::from_secs(60), ready).await?;
    apply_rp(&client, &second, &ns, json!({ "source": { "oci": format!("{hp}/guest-foo-js:v1") }, "grants": grants }))
        .await?;
    let s = status_where(&client, &second, "refused: Conflict", Duration::from_secs(120), |s| {
        degraded(s) == Some("Conflict") && !ready(s)
    })
    .await?;
    let msg = condition(&s, "Ready").map(|c| c.message.clone()).unwrap_or_default();
    assert!(msg.contains(&format!("reconcilerplugin/{first}")), "names the holder: {msg}");
    for i in 0..5 {
        create_foo(&client, &ns, &format!("foo-{i}"), &format!("dep-{i}"), Some(1)).await?;
    }
    for i in 0..5 {
        deployment_where(&client, &ns, &format!("dep-{i}"), "reconciled by the first", |_| true).await?;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let writes: Vec<_> = plane.audited("kwop/").into_iter().filter(|w| w.namespace == ns).collect();
    assert!(!writes.is_empty(), "the audit log sees the first plugin's writes");
    let by_second: Vec<_> = writes.iter().filter(|w| w.field_manager == "kwop-guest-foo-js").collect();
    assert!(by_second.is_empty(), "the refused plugin wrote: {by_second:?}");
    let events = kube::Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items;
    assert!(events.iter().all(|e| e.reporting_controller.as_deref() != Some("kwop-guest-foo-js")), "no events");

    // The holder goes away: the waiting plugin takes the kind over.
    rps(&client).delete(&first, &Default::default()).await?;
    status_where(&client, &second, "Ready once the holder is gone", Duration::from_secs(120), ready).await?;
    drop(host);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_reads_and_writes_only_where_granted_and_never_beyond_its_kinds() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let (a, b) = (plane.namespace("rp-grant-a")?, plane.namespace("rp-grant-b")?);
    let reg = Registry::start()?;
    let hp = reg.host_port();
    push(&hp, Path::new(plugins::CHAOS), &format!("{hp}/chaos:v1"))?;
    push(&hp, Path::new(plugins::GUEST_FOO), &format!("{hp}/guest-foo:v1"))?;
    let label = format!("grants-{a}");
    let chaos = format!("chaos-{a}");
    let spec = json!({
        "source": { "oci": format!("{hp}/chaos:v1") },
        "grants": {
            "primary": { "apiVersion": "test.kwop.dev/v1", "kind": "Chaos" },
            "owns": [{ "apiVersion": "v1", "kind": "ConfigMap" }],
            "namespaces": [a],
        },
    });
    apply_rp(&client, &chaos, &label, spec).await?;
    // Asks for Deployments but is granted nothing to own.
    let narrow = format!("narrow-{a}");
    let spec = json!({
        "source": { "oci": format!("{hp}/guest-foo:v1") },
        "grants": { "primary": { "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo" } },
    });
    apply_rp(&client, &narrow, &label, spec).await?;
    let _host = rp_host(plane, &label, &hp, &[])?;

    let s = status_where(&client, &narrow, "Forbidden", Duration::from_secs(60), |s| degraded(s) == Some("Forbidden"))
        .await?;
    assert!(!ready(&s));
    let msg = s.last_error.unwrap_or_default();
    assert!(msg.contains("owns apps/v1/Deployment") && msg.contains("not granted"), "{msg}");

    status_where(&client, &chaos, "Ready", Duration::from_secs(60), ready).await?;
    for ns in [&a, &b] {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": { "name": "secret-ish", "labels": { "kwop.dev/readable": "yes" } },
            "data": { "v": ns },
        }))?;
        Api::<ConfigMap>::namespaced(client.clone(), ns).create(&PostParams::default(), &cm).await?;
    }
    let read = |other: &str| json!({ "mode": "read-other", "readNamespace": other, "readName": "secret-ish" });
    create_chaos(&client, &a, "reads-b", read(&b)).await?;
    create_chaos(&client, &a, "reads-a", read(&a)).await?;
    create_chaos(&client, &b, "in-b", json!({ "mode": "ok" })).await?;
    let status_of = |ns: String, name: &'static str| {
        let api = chaos_api(&client, &ns);
        async move {
            wait::until(&format!("{name} reconciled"), Duration::from_secs(60), || async {
                let o = api.get(name).await.map_err(|e| e.to_string())?;
                Ok(o.data.get("status").filter(|s| s["phase"] == "read").cloned())
            })
            .await
        }
    };
    let in_b = status_of(a.clone(), "reads-b").await?;
    assert_eq!(in_b["sawOther"], false, "a get in an ungranted namespace finds nothing: {in_b}");
    assert_eq!(in_b["queried"], json!([a]), "a query over all namespaces returns only granted ones: {in_b}");
    let in_a = status_of(a.clone(), "reads-a").await?;
    assert_eq!(in_a["sawOther"], true, "positive control: a get in the granted namespace: {in_a}");

    // Nothing at all in b: no ConfigMap, no status, no event, no write.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let writes: Vec<_> = plane.audited("kwop/").into_iter().filter(|w| w.namespace == b).collect();
    assert!(writes.is_empty(), "writes in the ungranted namespace: {writes:?}");
    let o = chaos_api(&client, &b).get("in-b").await?;
    assert!(o.data.get("status").is_none_or(Value::is_null), "{:?}", o.data);
    let writes_a = plane.audited("kwop/").into_iter().filter(|w| w.namespace == a).count();
    assert!(writes_a > 0, "positive control: writes in the granted namespace");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn in_folder_mode_a_second_file_for_a_kind_is_rejected() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let ns = plane.namespace("folder-conflict")?;
    let js = guest("foo-js");
    let dir = plugins::folder(&[
        ("a-guest-foo.wasm", plugins::GUEST_FOO),
        ("b-guest-foo-js.wasm", &js.display().to_string()),
    ])?;
    let host = host(plane, &dir, &[&format!("--namespace={ns}")])?;
    create_foo(&client, &ns, "foo", "dep", Some(1)).await?;
    deployment_where(&client, &ns, "dep", "reconciled by one", |_| true).await?;
    let v = plugins_json(host.port)?;
    let rejected = v["rejected_files"]["b-guest-foo-js.wasm"].as_str().unwrap_or_default().to_string();
    assert!(rejected.contains("a-guest-foo.wasm already reconciles samplecontroller.k8s.io/Foo"), "{v}");
    let running: Vec<&Value> = v["plugins"].as_array().into_iter().flatten().filter(|p| p["synced"] == true).collect();
    assert_eq!(running.len(), 1, "{v}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let by = |manager: &str| {
        plane.audited("kwop/").into_iter().filter(|w| w.namespace == ns && w.field_manager == manager).count()
    };
    assert_eq!(by("kwop-guest-foo-js"), 0);
    assert!(by("kwop-guest-foo") > 0, "positive control: the audit log sees the running plugin's writes");
    Ok(())
}

/// `kwop` / `kwop-secret` (bcrypt, cost 4), as `htpasswd -B` writes it.
const HTPASSWD: &str = "kwop:$2b$04$O.KKWBPHPCWHtaq0e/tWMubwgTSG.bLiaYSnNPdNjWOLEz/ymLWsW\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_configmap_source_hot_swaps_and_a_private_registry_needs_its_pull_secret() -> anyhow::Result<()> {
    use base64::Engine as _;
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let ns = plane.namespace("rp-sources")?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cm = |file: &str| -> anyhow::Result<ConfigMap> {
        Ok(serde_json::from_value(json!({
            "metadata": { "name": "plugins" },
            "binaryData": { "guest-foo.wasm": base64::engine::general_purpose::STANDARD.encode(std::fs::read(file)?) },
        }))?)
    };
    cms.create(&PostParams::default(), &cm(plugins::GUEST_FOO)?).await?;
    let from_cm = format!("from-cm-{ns}");
    let spec = json!({
        "source": { "configMap": { "name": "plugins", "key": "guest-foo.wasm" } },
        "grants": foo_grants("samplecontroller.k8s.io/v1alpha1"),
    });
    apply_rp(&client, &from_cm, &ns, spec).await?;

    // A registry that wants credentials, and a ReconcilerPlugin naming a Secret not there yet.
    let reg = Registry::start_with_htpasswd(HTPASSWD)?;
    let hp = reg.host_port();
    let cfg = kwop::source::oci::OciConfig { insecure: vec![hp.clone()], ..Default::default() };
    let auth = kwop::source::oci::Auth::Basic { username: "kwop".into(), password: "kwop-secret".into() };
    kwop::source::oci::push(std::fs::read(plugins::CHAOS)?, &format!("{hp}/private/chaos:1"), &auth, &cfg).await?;
    let private = format!("private-{ns}");
    let spec = json!({
        "source": { "oci": format!("{hp}/private/chaos:1"), "pullSecret": "regcred" },
        "grants": {
            "primary": { "apiVersion": "test.kwop.dev/v1", "kind": "Chaos" },
            "owns": [{ "apiVersion": "v1", "kind": "ConfigMap" }],
        },
    });
    apply_rp(&client, &private, &ns, spec).await?;
    let _host = rp_host(plane, &ns, &hp, &[&format!("--namespace={ns}"), &format!("--system-namespace={ns}")])?;

    status_where(&client, &from_cm, "Ready from the ConfigMap", Duration::from_secs(60), ready).await?;
    create_foo(&client, &ns, "foo", "dep", Some(1)).await?;
    deployment_where(&client, &ns, "dep", "v1 from the ConfigMap", |d| !is_v2(d)).await?;
    let s = status_where(&client, &private, "the missing Secret named", Duration::from_secs(60), |s| {
        degraded(s) == Some("InvalidSpec")
    })
    .await?;
    assert!(s.last_error.unwrap_or_default().contains(&format!("pull Secret {ns}/regcred does not exist")));

    let b64 = base64::engine::general_purpose::STANDARD.encode("kwop:kwop-secret");
    let config = format!(r#"{{"auths": {{"{hp}": {{"auth": "{b64}"}}}}}}"#);
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": { "name": "regcred" }, "type": "kubernetes.io/dockerconfigjson",
        "data": { ".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(config) },
    }))?;
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &secret)
        .await?;
    let chaos = digest_of(Path::new(plugins::CHAOS))?;
    status_where(&client, &private, "pulled with the Secret", Duration::from_secs(60), |s| {
        ready(s) && s.active_digest.as_deref() == Some(chaos.as_str())
    })
    .await?;

    // Replacing the ConfigMap's key swaps the plugin (the key is read again every 10 s).
    let mut v2 = cm(plugins::GUEST_FOO_V2)?;
    v2.metadata.resource_version = cms.get("plugins").await?.metadata.resource_version;
    cms.replace("plugins", &PostParams::default(), &v2).await?;
    let d2 = digest_of(Path::new(plugins::GUEST_FOO_V2))?;
    status_where(&client, &from_cm, "v2 from the ConfigMap", Duration::from_secs(60), |s| {
        s.active_digest.as_deref() == Some(d2.as_str())
    })
    .await?;
    deployment_where(&client, &ns, "dep", "v2 reconciled", is_v2).await?;

    // Suspended: loaded, not running, nothing deleted; resumed: it catches up.
    patch_spec(&client, &from_cm, json!({ "suspend": true })).await?;
    let s = status_where(&client, &from_cm, "Suspended", Duration::from_secs(30), |s| {
        condition(s, "Ready").is_some_and(|c| c.reason == "Suspended")
    })
    .await?;
    assert_eq!(s.active_digest.as_deref(), Some(d2.as_str()));
    create_foo(&client, &ns, "while-suspended", "dep-suspended", Some(1)).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    assert!(deployments.get_opt("dep-suspended").await?.is_none(), "a suspended plugin reconciled");
    assert!(deployments.get_opt("dep").await?.is_some(), "suspending deletes nothing");
    patch_spec(&client, &from_cm, json!({ "suspend": false })).await?;
    deployment_where(&client, &ns, "dep-suspended", "reconciled once resumed", |_| true).await?;
    status_where(&client, &from_cm, "Ready again", Duration::from_secs(30), ready).await?;
    Ok(())
}

/// Issue 35 (4): `status.source.pinned` is writable by whoever may patch the status. After a
/// restart the host pulls a pin only if it is a digest of the spec's own registry and repository
/// (else it pulls the spec's reference and says so in a `PinIgnored` event); and a pinned pull
/// that fails is retried as pinned, never silently replaced by what the tag names now.
#[tokio::test(flavor = "multi_thread")]
async fn a_forged_pin_is_ignored_and_a_failed_pinned_pull_does_not_fall_back_to_the_tag() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let ns = plane.namespace("rp-pin")?;
    let reg = Registry::start()?;
    let hp = reg.host_port();
    push(&hp, Path::new(plugins::GUEST_FOO), &format!("{hp}/guest-foo:v1"))?;
    push(&hp, Path::new(plugins::GUEST_FOO_V2), &format!("{hp}/guest-foo:v2"))?;
    let evil = push(&hp, Path::new(plugins::GUEST_FOO_V2), &format!("{hp}/evil:v2"))?;
    let (v1, v2) = (digest_of(Path::new(plugins::GUEST_FOO))?, digest_of(Path::new(plugins::GUEST_FOO_V2))?);
    let name = format!("guest-foo-{ns}");
    let spec = json!({ "source": { "oci": format!("{hp}/guest-foo:v1") }, "grants": foo_grants("samplecontroller.k8s.io/v1alpha1") });
    apply_rp(&client, &name, &ns, spec).await?;
    let flags = [format!("--namespace={ns}")];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let host = rp_host(plane, &ns, &hp, &flags)?;
    status_where(&client, &name, "Ready on v1", Duration::from_secs(60), |s| {
        ready(s) && s.active_digest.as_deref() == Some(v1.as_str())
    })
    .await?;
    drop(host);
    let forge = |pinned: String| {
        let client = client.clone();
        let name = name.clone();
        async move {
            // The active digest cleared too: the next one seen is the restarted host's.
            let body = json!({ "status": { "activeDigest": null, "source": { "pinned": pinned } } });
            rps(&client).patch_status(&name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&body)).await
        }
    };
    // Another repository's digest, and a tag of the same repository: neither is pulled.
    for (what, pinned) in [("another repository", evil.clone()), ("a tag", format!("{hp}/guest-foo:v2"))] {
        forge(pinned).await?;
        let host = rp_host(plane, &ns, &hp, &flags)?;
        let s = status_where(&client, &name, &format!("{what}: v1 from the spec"), Duration::from_secs(60), |s| {
            ready(s) && s.active_digest.is_some()
        })
        .await?;
        assert_eq!(s.active_digest.as_deref(), Some(v1.as_str()), "{what}: the forged pin ran (v2 is {v2})");
        let e = event_with_reason(&client, "default", &name, "PinIgnored").await?;
        assert!(e.note.unwrap_or_default().contains("status.source.pinned ignored"));
        drop(host);
    }
    // A pin of the right repository that cannot be pulled: Degraded, retried, never the tag.
    forge(format!("{hp}/guest-foo@sha256:{}", "0".repeat(64))).await?;
    let host = Host::start_reconciler_plugins(
        KWOP,
        plane,
        &plane.kubeconfig,
        &[&format!("--reconciler-plugin-selector=kwop.dev/test={ns}"), &format!("--insecure-registry={hp}"), flags[0]],
        &[],
        false,
    )?;
    let s =
        status_where(&client, &name, "Degraded NotFound", Duration::from_secs(60), |s| degraded(s) == Some("NotFound"))
            .await?;
    assert!(s.last_error.unwrap_or_default().contains("does not fall back to the tag"));
    tokio::time::sleep(Duration::from_secs(4)).await; // past the first retries (1 s, 2 s)
    let s = rps(&client).get(&name).await?.status.unwrap_or_default();
    assert!(s.active_digest.is_none() && !ready(&s), "fell back to the tag: {s:?}\n{}", host.log());
    Ok(())
}

/// Issue 35 (6): one patch narrows `grants.namespaces` and sets a memory limit above the host's
/// `--plugin-memory-max`. The new version cannot load (Degraded Invalid), and the running one
/// must not keep the broader grants: it runs on under the narrower ones.
#[tokio::test(flavor = "multi_thread")]
async fn revoking_a_namespace_takes_effect_even_when_the_reload_fails_for_another_reason() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let (a, b) = (plane.namespace("rp-revoke-a")?, plane.namespace("rp-revoke-b")?);
    let reg = Registry::start()?;
    let hp = reg.host_port();
    push(&hp, Path::new(plugins::GUEST_FOO), &format!("{hp}/guest-foo:v1"))?;
    let name = format!("guest-foo-{a}");
    let grants = |namespaces: &[&String]| {
        let mut g = foo_grants("samplecontroller.k8s.io/v1alpha1");
        g["namespaces"] = json!(namespaces);
        g
    };
    let spec = json!({ "source": { "oci": format!("{hp}/guest-foo:v1") }, "grants": grants(&[&a, &b]) });
    apply_rp(&client, &name, &a, spec).await?;
    let host = rp_host(plane, &a, &hp, &[])?;
    status_where(&client, &name, "Ready", Duration::from_secs(60), ready).await?;
    create_foo(&client, &b, "before", "dep-before", Some(1)).await?;
    deployment_where(&client, &b, "dep-before", "positive control: b is granted at first", |_| true).await?;

    patch_spec(&client, &name, json!({ "grants": grants(&[&a]), "limits": { "memory": "64Gi" } })).await?;
    let s =
        status_where(&client, &name, "Degraded Invalid", Duration::from_secs(60), |s| degraded(s) == Some("Invalid"))
            .await?;
    assert!(s.last_error.unwrap_or_default().contains("plugin-memory-max"));
    let since = plane.audited("kwop/").len();
    create_foo(&client, &a, "after", "dep-after", Some(1)).await?;
    create_foo(&client, &b, "after", "dep-after-b", Some(1)).await?;
    set_replicas(&client, &b, "before", 3).await?;
    deployment_where(&client, &a, "dep-after", "the running version still reconciles in a", |_| true).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let in_b: Vec<_> = plane.audited("kwop/").into_iter().skip(since).filter(|w| w.namespace == b).collect();
    assert!(in_b.is_empty(), "writes in the revoked namespace: {in_b:?}\n{}", host.log());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &b);
    assert!(deployments.get_opt("dep-after-b").await?.is_none(), "a Foo in the revoked namespace reconciled");
    Ok(())
}

/// Issue 40: the README applied a ReconcilerPlugin with `kubectl apply --server-side`, then
/// swapped with `kubectl patch`, after which the next apply failed with a field-manager conflict.
/// docs/roll-out.md now says to change it one way, and what takes the fields back: this runs that
/// block's sequence with the real kubectl.
#[tokio::test(flavor = "multi_thread")]
async fn apply_after_a_patch_needs_force_conflicts_as_documented() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("rp-managers")?;
    let name = format!("foo-info-{ns}");
    let file = std::env::temp_dir().join(format!("kwop-test-{}-{name}.yaml", std::process::id()));
    std::fs::write(
        &file,
        format!(
            "apiVersion: kwop.dev/v1alpha1\nkind: ReconcilerPlugin\nmetadata: {{name: {name}, labels: {{kwop.dev/test: {ns}}}}}\n\
             spec:\n  suspend: false\n  source: {{oci: registry.example.com/plugins/foo-info:0.1.0}}\n  grants:\n    primary: {{apiVersion: samplecontroller.k8s.io/v1alpha1, kind: Foo}}\n    owns: [{{apiVersion: v1, kind: ConfigMap}}]\n"
        ),
    )?;
    let f = file.display().to_string();
    plane.kubectl_output(&["apply", "--server-side", "-f", &f])?;
    plane.kubectl_output(&["patch", "rp", &name, "--type=merge", "-p", r#"{"spec":{"suspend":true}}"#])?;
    let conflict = plane.kubectl_output(&["apply", "--server-side", "-f", &f]).expect_err("a conflict");
    assert!(format!("{conflict:#}").contains(".spec.suspend"), "{conflict:#}");
    plane.kubectl_output(&["apply", "--server-side", "--force-conflicts", "-f", &f])?;
    let client = plane.client().await?;
    assert!(!rps(&client).get(&name).await?.spec.suspend, "the file's value is back");
    rps(&client).delete(&name, &Default::default()).await?;
    Ok(())
}
