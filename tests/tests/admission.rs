//! Admission on a real control plane: the kube-apiserver calls kwop's validating webhook (HTTPS,
//! a certificate the host made and put in the webhook configuration's caBundle). guest-foo
//! refuses a bad Foo with its own message and accepts a good one, refuses a Foo naming someone
//! else's Deployment, a plugin that traps or loops is refused under Fail and allowed under
//! Ignore, a hot swap changes validation without a restart, a stopped host leaves the API server
//! to the failure policy, and the serving certificate is renewed while requests keep coming.

mod common;

use common::webhook::*;
use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use kwop_tests::{plugins, wait, ControlPlane, Mode};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread")]
async fn guest_foo_refuses_bad_foos_with_its_own_message_and_accepts_good_ones() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("adm-foo")?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    let a = admitting(plane, &dir, &ns, &[])?;
    configured(&client, &a.configuration, "guest-foo").await?;

    let refused = apply_answered(plane, &ns, &foo_yaml("bad", Some("Bad_Name"))).await.expect_err("refused");
    assert!(refused.contains("admission webhook \"guest-foo.kwop.dev\" denied the request"), "{refused}");
    assert!(refused.contains("spec.deploymentName: \"Bad_Name\" is not a valid Deployment name"), "{refused}");
    let missing = apply_answered(plane, &ns, &foo_yaml("missing", None)).await.expect_err("refused");
    assert!(missing.contains("spec.deploymentName: is required"), "{missing}");
    // Someone else's Deployment: refused before it could become ErrResourceExists.
    let theirs: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "taken" },
        "spec": { "selector": { "matchLabels": { "app": "t" } },
            "template": { "metadata": { "labels": { "app": "t" } }, "spec": { "containers": [{ "name": "c", "image": "busybox" }] } } }
    }))?;
    Api::<Deployment>::namespaced(client.clone(), &ns).create(&PostParams::default(), &theirs).await?;
    let foreign = apply_answered(plane, &ns, &foo_yaml("grabby", Some("taken"))).await.expect_err("refused");
    assert!(
        foreign.contains("Deployment \"taken\" already exists in namespace")
            && foreign.contains("not managed by this Foo"),
        "{foreign}"
    );
    // None of them was stored; a good one is, and reconciled.
    for n in ["bad", "missing", "grabby"] {
        assert!(foos(&client, &ns).get_opt(n).await?.is_none(), "{n} was stored");
    }
    apply_answered(plane, &ns, &foo_yaml("good", Some("good"))).await.map_err(anyhow::Error::msg)?;
    deployment_where(&client, &ns, "good", "the good Foo's Deployment", |_| true).await?;
    assert!(a.host.metric("kwop_admission_requests_total", &[("result", "denied")])? >= 3.0);
    assert!(a.host.metric("kwop_admission_requests_total", &[("result", "allowed")])? >= 1.0);
    remove_configuration(&client, &a.configuration).await;
    Ok(())
}

fn fin_yaml(name: &str, validate: &str) -> String {
    format!("apiVersion: test.kwop.dev/v1\nkind: Fin\nmetadata:\n  name: {name}\nspec:\n  validate: {validate}\n")
}

fn fins(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("test.kwop.dev", "v1", "Fin")),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_that_traps_or_loops_is_refused_under_fail_and_allowed_under_ignore() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("finalizer.wasm", plugins::FINALIZER)])?;
    for (policy, allowed) in [("Fail", false), ("Ignore", true)] {
        let ns = plane.namespace(&format!("adm-{}", policy.to_lowercase()))?;
        let a =
            admitting(plane, &dir, &ns, &[&format!("--webhook-failure-policy={policy}"), "--plugin-timeout=500ms"])?;
        let c = configured(&client, &a.configuration, "finalizer").await?;
        let hook = c.webhooks.iter().flatten().next().cloned().unwrap_or_default();
        assert_eq!(hook.failure_policy.as_deref(), Some(policy));
        // The plugin's own answers hold under either policy.
        let denied = apply_answered(plane, &ns, &fin_yaml("deny", "deny")).await.expect_err("deny refuses");
        assert!(denied.contains("spec.validate: deny says no"), "{denied}");
        let warned = apply_answered(plane, &ns, &fin_yaml("warn", "warn")).await.map_err(anyhow::Error::msg)?;
        assert!(warned.contains("created"), "{warned}");
        // A trap and an endless loop: the policy decides, and says why.
        for (name, why) in [("trap", "validate exploded"), ("loop", "exceeded its deadline")] {
            let r = apply_answered(plane, &ns, &fin_yaml(name, name)).await;
            match (allowed, &r) {
                (false, Err(e)) => {
                    assert!(e.contains("finalizer could not validate the object") && e.contains(why), "{e}")
                }
                (true, Ok(_)) => assert!(fins(&client, &ns).get_opt(name).await?.is_some()),
                _ => panic!("{policy} {name}: {r:?}"),
            }
        }
        let label = if allowed { "error_ignored" } else { "error" };
        assert!(a.host.metric("kwop_admission_requests_total", &[("result", label)])? >= 2.0, "{}", a.host.log());
        // Its Fins are deleted through its finalizer: let the host finish before it stops.
        for n in ["warn", "trap", "loop"] {
            let _ = fins(&client, &ns).delete(n, &DeleteParams::default()).await;
        }
        wait::until("the Fins gone", Duration::from_secs(30), || async {
            let left = fins(&client, &ns).list(&Default::default()).await.map_err(|e| e.to_string())?.items.len();
            Ok((left == 0).then_some(()))
        })
        .await?;
        remove_configuration(&client, &a.configuration).await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hot_swap_changes_validation_without_a_restart() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("adm-swap")?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    let a = admitting(plane, &dir, &ns, &[])?;
    configured(&client, &a.configuration, "guest-foo").await?;
    let pid = a.host.proc.pid();
    apply_answered(plane, &ns, &foo_yaml("before", Some("old-one"))).await.map_err(anyhow::Error::msg)?;
    // v2 refuses names starting with "old-".
    plugins::replace(&dir, "guest-foo.wasm", plugins::GUEST_FOO_V2)?;
    wait::until("v2 active", Duration::from_secs(60), || async {
        let p = plugins_json(a.host.port).map_err(|e| e.to_string())?;
        Ok((p["plugins"][0]["version"] == "0.1.0-v2").then_some(()))
    })
    .await?;
    let refused = wait::until("v2 refusing", Duration::from_secs(30), || async {
        match kubectl_apply(plane, &ns, &foo_yaml("after", Some("old-two"))) {
            Err(e) if e.contains("guest-foo v2 does not take") => Ok(Some(e)),
            other => Err(format!("{other:?}")),
        }
    })
    .await?;
    assert!(refused.contains("denied the request"), "{refused}");
    assert_eq!(a.host.proc.pid(), pid, "the same host process");
    remove_configuration(&client, &a.configuration).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn with_kwop_stopped_a_foo_is_refused_under_fail_and_accepted_under_ignore() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    for (policy, accepted) in [("Fail", false), ("Ignore", true)] {
        let ns = plane.namespace(&format!("adm-stopped-{}", policy.to_lowercase()))?;
        let a = admitting(plane, &dir, &ns, &[&format!("--webhook-failure-policy={policy}")])?;
        configured(&client, &a.configuration, "guest-foo").await?;
        apply_answered(plane, &ns, &foo_yaml("while-up", Some("up"))).await.map_err(anyhow::Error::msg)?;
        let configuration = a.configuration.clone();
        drop(a);
        // The configuration stays; nobody answers.
        let r = kubectl_apply(plane, &ns, &foo_yaml("while-down", Some("down")));
        match (accepted, &r) {
            (false, Err(e)) => assert!(e.contains("failed calling webhook"), "{e}"),
            (true, Ok(_)) => assert!(foos(&client, &ns).get_opt("while-down").await?.is_some()),
            _ => panic!("{policy}: {r:?}"),
        }
        remove_configuration(&client, &configuration).await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_certificate_is_renewed_while_the_api_server_keeps_calling() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("adm-rotate")?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    // Renewed every 2/3 × 30 s = 20 s.
    let a = admitting(plane, &dir, &ns, &["--webhook-cert-validity=30s"])?;
    let c = configured(&client, &a.configuration, "guest-foo").await?;
    let ca = c.webhooks.iter().flatten().next().and_then(|w| w.client_config.ca_bundle.clone());
    apply_answered(plane, &ns, &foo_yaml("first", Some("first"))).await.map_err(anyhow::Error::msg)?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let serving = |s: &Secret| s.data.as_ref().and_then(|d| d.get("tls.crt")).map(|b| b.0.clone());
    let mut seen = vec![serving(&secrets.get(&a.secret).await?)];
    // 50 s of requests, one every ~half second, with the Fail policy: any TLS failure refuses.
    let (started, mut n) = (Instant::now(), 0);
    while started.elapsed() < Duration::from_secs(50) {
        let name = format!("r{n}");
        kubectl_apply(plane, &ns, &foo_yaml(&name, Some(&name)))
            .map_err(|e| anyhow::anyhow!("request {n} at {:?}: {e}", started.elapsed()))?;
        let now = serving(&secrets.get(&a.secret).await?);
        if seen.last() != Some(&now) {
            seen.push(now);
        }
        n += 1;
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    assert!(seen.len() >= 3, "renewed at least twice in 50 s: {} certificates", seen.len());
    let c = configured(&client, &a.configuration, "guest-foo").await?;
    let still = c.webhooks.iter().flatten().next().and_then(|w| w.client_config.ca_bundle.clone());
    assert_eq!(still, ca, "the CA (the caBundle) stays through renewals");
    assert_eq!(a.host.metric("kwop_admission_requests_total", &[("result", "error")])?, 0.0);
    remove_configuration(&client, &a.configuration).await;
    Ok(())
}

/// An AdmissionReview of a Fin creation in `ns` with `spec.validate` = `validate`.
fn review(ns: &str, validate: &str) -> String {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "0b8a5a8e-1", "operation": "CREATE", "name": "x", "namespace": ns,
            "kind": { "group": "test.kwop.dev", "version": "v1", "kind": "Fin" },
            "resource": { "group": "test.kwop.dev", "version": "v1", "resource": "fins" },
            "userInfo": { "username": "someone" },
            "object": { "apiVersion": "test.kwop.dev/v1", "kind": "Fin",
                "metadata": { "name": "x", "namespace": ns }, "spec": { "validate": validate } },
        }
    })
    .to_string()
}

/// Issue 35 (5): the webhook port may answer anyone who reaches it, so what one caller can cost is
/// bounded: paths naming no plugin share one metric label (random names do not grow /metrics),
/// a body over 4 MiB is refused before it is parsed, and a request waiting for an instance or the
/// memory budget is answered within the webhook's timeout, not after the calls before it; at 128
/// connections open the next waits until one closes.
#[tokio::test(flavor = "multi_thread")]
async fn the_webhook_port_bounds_what_a_caller_can_cost() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("adm-bounds")?;
    let dir = plugins::folder(&[("finalizer.wasm", plugins::FINALIZER)])?;
    // Room for one call at a time; a looping validate holds it for its whole deadline (2.5 s).
    let flags = ["--webhook-timeout=3s", "--plugin-timeout=3s", "--plugin-memory=32Mi", "--plugin-memory-budget=40Mi"];
    let a = admitting(plane, &dir, &ns, &flags)?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    // A connection each: a pooled one the server closed (after the 413) is no answer.
    let http = reqwest::Client::builder().tls_danger_accept_invalid_certs(true).pool_max_idle_per_host(0).build()?;
    let url = |plugin: &str| format!("https://127.0.0.1:{}/validate/{plugin}", a.port);
    let post = |plugin: String, body: Vec<u8>| {
        let req = http.post(url(&plugin)).header("content-type", "application/json").body(body);
        async move {
            let r = req.send().await?;
            anyhow::Ok((r.status().as_u16(), r.text().await?))
        }
    };
    wait::until("the webhook answering", Duration::from_secs(30), || async {
        post("finalizer".into(), review(&ns, "ok").into_bytes()).await.map(|r| Some(r.0)).map_err(|e| e.to_string())
    })
    .await?;

    for i in 0..20 {
        let (code, text) = post(format!("nobody-{i}"), review(&ns, "ok").into_bytes()).await?;
        assert_eq!(code, 200, "{text}");
    }
    let metrics = a.host.metrics()?;
    assert!(!metrics.contains("nobody-"), "a caller's path became a metric label");
    assert_eq!(a.host.metric("kwop_admission_requests_total", &[("plugin", "(unknown)")])?, 20.0);

    let (code, _) = post("finalizer".into(), vec![b' '; 5 << 20]).await?;
    assert_eq!(code, 413, "a 5 MiB body was read");

    let started = Instant::now();
    let calls = (0..4).map(|_| post("finalizer".into(), review(&ns, "loop").into_bytes()));
    let answers = futures::future::join_all(calls.map(|c| async move {
        let r = c.await;
        (r, started.elapsed())
    }))
    .await;
    for (r, took) in answers {
        let (code, text) = r?;
        assert_eq!(code, 200, "{text}");
        assert!(text.contains("\"allowed\":false"), "Fail refuses what could not be validated: {text}");
        assert!(took < Duration::from_millis(4500), "answered after {took:?}: the waits add up past the timeout");
    }

    // 128 connections open (here: ones that never start their TLS handshake) and the next waits in
    // the listen backlog until one closes.
    let idle = futures::future::try_join_all((0..128).map(|_| tokio::net::TcpStream::connect(("127.0.0.1", a.port))));
    let idle = idle.await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let waiting =
        tokio::time::timeout(Duration::from_secs(2), post("finalizer".into(), review(&ns, "ok").into_bytes()));
    assert!(waiting.await.is_err(), "a 129th connection was served");
    drop(idle);
    let (code, text) = post("finalizer".into(), review(&ns, "ok").into_bytes()).await?;
    assert_eq!(code, 200, "served once the others closed: {text}");
    remove_configuration(&plane.client().await?, &a.configuration).await;
    Ok(())
}

/// Issue 40: a host run outside the cluster whose system namespace does not exist yet makes it
/// (it holds the webhook's certificate) and serves at once, instead of failing to keep a
/// certificate while unchecked objects are stored.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_system_namespace_is_made_and_the_webhook_served() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("adm-nosys")?;
    let client = plane.client().await?;
    let system = format!("{ns}-system");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    assert!(namespaces.get_opt(&system).await?.is_none(), "not there before");
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    let port = kwop_tests::procs::free_port()?;
    let configuration = format!("kwop-{ns}");
    let args = [
        format!("--namespace={ns}"),
        format!("--system-namespace={system}"),
        format!("--webhook-bind-address=127.0.0.1:{port}"),
        format!("--webhook-url=https://127.0.0.1:{port}"),
        format!("--webhook-configuration={configuration}"),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let host = host(plane, &dir, &args)?;
    configured(&client, &configuration, "guest-foo").await?;
    assert!(namespaces.get_opt(&system).await?.is_some(), "made: {}", host.log());
    let refused = apply_answered(plane, &ns, &foo_yaml("bad", Some("Bad_Name"))).await.expect_err("refused");
    assert!(refused.contains("is not a valid Deployment name"), "{refused}");
    remove_configuration(&client, &configuration).await;
    Ok(())
}
