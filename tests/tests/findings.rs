//! The review findings of issue 12, each on a real control plane: configuration that was
//! silently wrong, status fields never cleared, Warning events too long or too many.

mod common;

use common::*;
use kube::api::{Patch, PatchParams};
use kube::Client;
use kwop_tests::{host::http_get, plugins, procs::free_port, procs::Proc, wait, ControlPlane, Host, Mode};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

async fn chaos_host(test: &str, extra: &[&str]) -> anyhow::Result<(&'static ControlPlane, String, Host, Client)> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace(test)?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO), ("chaos.wasm", plugins::CHAOS)])?;
    let mut args = vec![format!("--namespace={ns}")];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let h = host(plane, &dir, &args)?;
    Ok((plane, ns, h, plane.client().await?))
}

/// `kwop run` with only the environment given (no --kubeconfig), until /readyz answers or it exits.
fn run_with_env(plane: &ControlPlane, args: &[&str], envs: &[(&str, &str)]) -> anyhow::Result<(bool, String)> {
    let port = free_port()?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    let mut all: Vec<String> = vec![
        "run".into(),
        format!("--plugins={}", dir.display()),
        format!("--metrics-bind-address=127.0.0.1:{port}"),
        format!("--health-probe-bind-address=127.0.0.1:{port}"),
        format!("--cache-dir={}", plane.dir.join("precompiled").display()),
    ];
    all.extend(args.iter().map(|s| s.to_string()));
    let log = plane.dir.join(format!("kwop-env-{port}.log"));
    let mut p = Proc::spawn("kwop", Path::new(KWOP), &all, &log, envs)?;
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if !p.running() {
            return Ok((false, p.tail(20)));
        }
        if matches!(http_get(port, "/readyz"), Ok((200, _))) {
            return Ok((true, p.tail(20)));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok((false, p.tail(20)))
}

#[tokio::test(flavor = "multi_thread")]
async fn context_and_a_kubeconfig_list_are_honoured() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let home = plane.dir.join("home-context");
    std::fs::create_dir_all(home.join(".kube"))?;
    // ~/.kube/config whose current context is a cluster that does not exist, and whose "right"
    // context is the test plane.
    let real = std::fs::read_to_string(&plane.kubeconfig)?;
    let wrong = real
        .replace("current-context: kwop-test", "current-context: wrong")
        .replace("contexts:\n", "contexts:\n- name: wrong\n  context:\n    cluster: nowhere\n    user: admin\n");
    let wrong =
        wrong.replace("clusters:\n", "clusters:\n- name: nowhere\n  cluster:\n    server: https://127.0.0.1:1\n");
    std::fs::write(home.join(".kube/config"), wrong)?;
    let home_s = home.display().to_string();
    let (ready, log) = run_with_env(plane, &["--context=kwop-test"], &[("HOME", &home_s), ("KUBECONFIG", "")])?;
    assert!(ready, "--context picks the plane's context from ~/.kube/config:\n{log}");
    // KUBECONFIG is a list of files, merged.
    let empty = plane.dir.join("empty.kubeconfig");
    std::fs::write(&empty, "apiVersion: v1\nkind: Config\npreferences: {}\n")?;
    let list = format!("{}:{}", empty.display(), plane.kubeconfig.display());
    let (ready, log) = run_with_env(plane, &[], &[("HOME", &home_s), ("KUBECONFIG", &list)])?;
    assert!(ready, "KUBECONFIG=a:b is two files:\n{log}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn resync_zero_is_off_and_an_unknown_limit_name_is_reported() -> anyhow::Result<()> {
    let (_plane, ns, h, client) =
        chaos_host("findings-flags", &["--resync-period=0", "--plugin-limit=guest-fo:memory=32Mi"]).await?;
    create_foo(&client, &ns, "foo", "dep", Some(2)).await?;
    deployment_where(&client, &ns, "dep", "reconciled with resync off", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(2)
    })
    .await?;
    // Off, not "as often as possible": once in sync, nothing is reconciled again (a resync of an
    // in-sync Foo counts as an `unchanged` reconcile).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let reconciles = || kwop_tests::host::sum_metric(&h.metrics().unwrap_or_default(), "kwop_reconcile_total", &[]);
    let before = reconciles();
    assert!(before >= 1.0, "positive control: the reconcile is counted");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(reconciles(), before, "reconciles with resync off:\n{}", h.metrics()?);
    assert_eq!(http_get(h.port, "/healthz")?.0, 200, "alive with --resync-period 0");
    let (_, body) = http_get(h.port, "/plugins")?;
    let v: Value = serde_json::from_str(&body)?;
    assert_eq!(v["unmatched_plugin_limits"], json!(["guest-fo"]), "{body}");
    assert!(h.log().contains("guest-fo"), "the typo is logged");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_status_field_the_plugin_drops_is_cleared() -> anyhow::Result<()> {
    let (_plane, ns, _h, client) = chaos_host("findings-status", &[]).await?;
    create_chaos(&client, &ns, "st", json!({ "mode": "status", "status": { "a": "1", "b": "2" } })).await?;
    let chaos = chaos_api(&client, &ns);
    let until = |want: Value| {
        let chaos = chaos.clone();
        async move {
            wait::until("the status", Duration::from_secs(30), || async {
                let o = chaos.get("st").await.map_err(|e| e.to_string())?;
                if o.data["status"] == want {
                    Ok(Some(()))
                } else {
                    Err(format!("{}", o.data["status"]))
                }
            })
            .await
        }
    };
    until(json!({ "a": "1", "b": "2" })).await?;
    // A merge patch: null removes b from spec.status (the plugin then drops it from its status).
    let patch = json!({ "spec": { "status": { "a": "1", "b": null } } });
    chaos.patch("st", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    until(json!({ "a": "1" })).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn warnings_are_truncated_to_1kib_and_a_changing_one_is_rate_limited() -> anyhow::Result<()> {
    let (_plane, ns, _h, client) = chaos_host("findings-events", &[]).await?;
    create_chaos(&client, &ns, "long", json!({ "mode": "panic-long" })).await?;
    let ev = event_with_reason(&client, &ns, "long", "ReconcilePluginFailed").await?;
    let note = ev.note.unwrap_or_default();
    assert!(note.len() <= 1024, "note of {} bytes", note.len());
    create_chaos(&client, &ns, "changing", json!({ "mode": "warn-changing" })).await?;
    // Requeued every 20 ms with a new text each time: client-go's filter lets 25 through, then
    // one per 5 minutes.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let n =
        events_for(&client, &ns, "changing").await?.iter().filter(|e| e.reason.as_deref() == Some("Changing")).count();
    assert!((1..=26).contains(&n), "{n} Changing events");
    Ok(())
}

/// A delete carries the UID *and* the resourceVersion the plugin saw: an object changed while the
/// plugin was deciding is not deleted on that stale view (409), and the retry, on the new view,
/// deletes it. Counted at the API server.
#[tokio::test(flavor = "multi_thread")]
async fn a_delete_decided_on_a_stale_view_is_refused_then_redone() -> anyhow::Result<()> {
    let (plane, ns, host, client) = chaos_host("findings-delete", &["--plugin-limit=chaos:timeout=30s"]).await?;
    create_chaos(&client, &ns, "del", json!({ "mode": "ok" })).await?;
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client.clone(), &ns);
    wait::until("the chaos ConfigMap", Duration::from_secs(30), || async {
        Ok(cms.get_opt("del").await.map_err(|e| e.to_string())?.map(|_| ()))
    })
    .await?;
    // The next reconcile works for a few seconds, then deletes it; meanwhile someone labels it.
    let mode = json!({ "spec": { "mode": "slow-delete", "work": 2_000_000_000u64 } });
    chaos_api(&client, &ns).patch("del", &PatchParams::default(), &Patch::Merge(&mode)).await?;
    wait::until("the slow call to be running", Duration::from_secs(30), || async {
        let p: Value = serde_json::from_str(&http_get(host.port, "/plugins").map_err(|e| e.to_string())?.1)
            .map_err(|e| e.to_string())?;
        let calls = p["calls"].as_array().cloned().unwrap_or_default();
        Ok(calls.iter().any(|c| c["object"] == format!("{ns}/del")).then_some(()))
    })
    .await?;
    let label = json!({ "metadata": { "labels": { "touched": "by-hand" } } });
    cms.patch("del", &PatchParams::default(), &Patch::Merge(&label)).await?;
    wait::until("the ConfigMap to be deleted", Duration::from_secs(60), || async {
        Ok(cms.get_opt("del").await.map_err(|e| e.to_string())?.is_none().then_some(()))
    })
    .await?;
    let codes: Vec<u16> = plane
        .audited("")
        .into_iter()
        .filter(|w| w.verb == "delete" && w.resource == "configmaps" && w.namespace == ns && w.name == "del")
        .map(|w| w.code)
        .collect();
    assert_eq!(codes, [409, 200], "the stale delete is refused, the retry goes through");
    Ok(())
}
