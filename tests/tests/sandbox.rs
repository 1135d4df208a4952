//! A plugin cannot hurt the host or the cluster (issue 6): adversarial plugins on a real control
//! plane. Each test runs guest-foo and the chaos plugin in one host, makes the chaos plugin
//! misbehave, and checks that the host keeps running, guest-foo keeps reconciling, nothing of the
//! bad outcome was written, and the reason is visible (event + metric).

mod common;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use kube::Client;
use kwop_tests::{host::http_get, plugins, ControlPlane, Host, Mode};
use serde_json::json;
use std::time::Duration;

struct Setup {
    plane: &'static ControlPlane,
    ns: String,
    client: Client,
    host: Host,
}

async fn setup(test: &str, extra: &[&str]) -> anyhow::Result<Setup> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace(test)?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO), ("chaos.wasm", plugins::CHAOS)])?;
    let mut args = vec![format!("--namespace={ns}"), "--plugin-timeout=300ms".to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let host = host(plane, &dir, &args)?;
    let client = plane.client().await?;
    Ok(Setup { plane, ns, client, host })
}

/// The host is alive and guest-foo still reconciles a new Foo.
async fn others_unaffected(s: &Setup, tag: &str) -> anyhow::Result<()> {
    assert_eq!(http_get(s.host.port, "/healthz")?.0, 200, "host is alive");
    let name = format!("foo-{tag}");
    create_foo(&s.client, &s.ns, &name, &name, Some(2)).await?;
    deployment_where(&s.client, &s.ns, &name, "guest-foo keeps reconciling", |d| {
        d.spec.as_ref().and_then(|x| x.replicas) == Some(2)
    })
    .await?;
    Ok(())
}

async fn configmaps(s: &Setup, ns: &str) -> anyhow::Result<Vec<String>> {
    let api: Api<ConfigMap> = Api::namespaced(s.client.clone(), ns);
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n != "kube-root-ca.crt")
        .collect())
}

async fn expect_failure(s: &Setup, name: &str, reason: &str, needle: &str) -> anyhow::Result<()> {
    let ev = event_with_reason(&s.client, &s.ns, name, reason).await?;
    let note = ev.note.unwrap_or_default();
    assert!(note.contains(needle), "event {reason} should mention {needle:?}: {note}");
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_infinite_loop_hits_the_deadline() -> anyhow::Result<()> {
    let s = setup("chaos-loop", &[]).await?;
    create_chaos(&s.client, &s.ns, "spin", json!({ "mode": "loop" })).await?;
    expect_failure(&s, "spin", "ReconcilePluginFailed", "deadline").await?;
    others_unaffected(&s, "loop").await?;
    assert!(s.host.metric("kwop_plugin_errors_total", &[("plugin", "chaos"), ("reason", "deadline")])? >= 1.0);
    assert!(configmaps(&s, &s.ns).await?.is_empty());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_memory_bomb_traps_at_the_limit() -> anyhow::Result<()> {
    // A per-plugin limit (guest-foo keeps the default 64 MiB).
    let s = setup("chaos-bomb", &["--plugin-limit=chaos:memory=16Mi"]).await?;
    create_chaos(&s.client, &s.ns, "bomb", json!({ "mode": "bomb" })).await?;
    expect_failure(&s, "bomb", "ReconcilePluginFailed", "memory limit of 16777216 bytes").await?;
    others_unaffected(&s, "bomb").await?;
    assert!(s.host.metric("kwop_plugin_errors_total", &[("plugin", "chaos"), ("reason", "out_of_memory")])? >= 1.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panic_is_a_failed_reconcile_with_backoff() -> anyhow::Result<()> {
    let s = setup("chaos-panic", &[]).await?;
    create_chaos(&s.client, &s.ns, "boom", json!({ "mode": "panic" })).await?;
    expect_failure(&s, "boom", "ReconcilePluginFailed", "trapped").await?;
    others_unaffected(&s, "panic").await?;
    // The panic message reaches the host's log, tagged with plugin and object.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(s.host.log().contains("chaos plugin panics on purpose"), "panic message in the host log");
    // Retried (a second and third trap come by themselves)...
    let traps = || s.host.metric("kwop_plugin_errors_total", &[("plugin", "chaos"), ("reason", "trap")]);
    kwop_tests::wait::until("the panic retried", Duration::from_secs(15), || async {
        let n = traps().map_err(|e| e.to_string())?;
        if n >= 3.0 {
            Ok(Some(()))
        } else {
            Err(format!("{n} traps"))
        }
    })
    .await?;
    // ...with backoff, not in a hot loop: a 5 ms·2ⁿ backoff retries ~10 times in 3 s, not thousands.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let errors = traps()?;
    assert!((3.0..=20.0).contains(&errors), "retries with backoff: {errors}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_output_is_rejected_and_nothing_is_written() -> anyhow::Result<()> {
    let s = setup("chaos-garbage", &[]).await?;
    create_chaos(&s.client, &s.ns, "junk", json!({ "mode": "garbage" })).await?;
    expect_failure(&s, "junk", "OutcomeRejected", "not valid JSON").await?;
    others_unaffected(&s, "garbage").await?;
    assert!(s.host.metric("kwop_outcomes_rejected_total", &[("plugin", "chaos"), ("reason", "malformed")])? >= 1.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_undeclared_kind_rejects_the_whole_outcome() -> anyhow::Result<()> {
    let s = setup("chaos-undeclared", &[]).await?;
    create_chaos(&s.client, &s.ns, "sneaky", json!({ "mode": "undeclared" })).await?;
    expect_failure(&s, "sneaky", "OutcomeRejected", "not declared in owns").await?;
    others_unaffected(&s, "undeclared").await?;
    // The declared ConfigMap in the same outcome was not written either: all or nothing.
    assert!(configmaps(&s, &s.ns).await?.is_empty(), "nothing of a rejected outcome is written");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(s.client.clone(), &s.ns);
    assert!(secrets.get_opt("sneaky").await?.is_none());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn writing_into_another_namespace_is_rejected() -> anyhow::Result<()> {
    let s = setup("chaos-otherns", &[]).await?;
    let other = s.plane.namespace("chaos-victim")?;
    create_chaos(&s.client, &s.ns, "escape", json!({ "mode": "other-namespace", "targetNamespace": other })).await?;
    expect_failure(&s, "escape", "OutcomeRejected", "outside the primary's namespace").await?;
    others_unaffected(&s, "otherns").await?;
    assert!(configmaps(&s, &other).await?.is_empty());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_object_controlled_by_someone_else_is_not_touched() -> anyhow::Result<()> {
    let s = setup("chaos-foreign", &[]).await?;
    let cms: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.ns);
    let owner = cms
        .create(&PostParams::default(), &serde_json::from_value(json!({ "metadata": { "name": "owner" } }))?)
        .await?;
    let victim: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "victim", "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid, "controller": true }] },
        "data": { "mine": "yes" }
    }))?;
    let before = cms.create(&PostParams::default(), &victim).await?;
    create_chaos(&s.client, &s.ns, "thief", json!({ "mode": "foreign", "target": "victim" })).await?;
    expect_failure(&s, "thief", "OutcomeRejected", "controlled by ConfigMap \"owner\"").await?;
    let unowned = cms
        .create(&PostParams::default(), &serde_json::from_value(json!({ "metadata": { "name": "loose" } }))?)
        .await?;
    create_chaos(&s.client, &s.ns, "adopter", json!({ "mode": "foreign", "target": "loose" })).await?;
    expect_failure(&s, "adopter", "OutcomeRejected", "not controlled by anyone").await?;
    others_unaffected(&s, "foreign").await?;
    assert_eq!(cms.get("victim").await?.metadata.resource_version, before.metadata.resource_version);
    assert_eq!(cms.get("loose").await?.metadata.resource_version, unowned.metadata.resource_version);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn huge_outcomes_are_rejected() -> anyhow::Result<()> {
    let s = setup("chaos-huge", &[]).await?;
    create_chaos(&s.client, &s.ns, "many", json!({ "mode": "huge" })).await?;
    expect_failure(&s, "many", "OutcomeRejected", "objects; the limit is").await?;
    create_chaos(&s.client, &s.ns, "fat", json!({ "mode": "huge-object" })).await?;
    expect_failure(&s, "fat", "OutcomeRejected", "bytes; the limit is").await?;
    others_unaffected(&s, "huge").await?;
    assert!(configmaps(&s, &s.ns).await?.is_empty());
    assert!(s.host.metric("kwop_outcomes_rejected_total", &[("plugin", "chaos"), ("reason", "too_large")])? >= 2.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_object_becomes_a_warning_not_a_hot_loop() -> anyhow::Result<()> {
    let s = setup("chaos-invalid", &[]).await?;
    create_chaos(&s.client, &s.ns, "bad-name", json!({ "mode": "invalid-object" })).await?;
    expect_failure(&s, "bad-name", "WriteFailed", "422").await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let attempts = s.host.metric("kwop_write_errors_total", &[("plugin", "chaos"), ("reason", "422")])?;
    assert_eq!(attempts, 1.0, "a 422 is not retried until something changes");
    others_unaffected(&s, "invalid").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chatty_plugin_is_rate_limited_and_reading_undeclared_kinds_returns_nothing() -> anyhow::Result<()> {
    let s = setup("chaos-chatty", &[]).await?;
    create_chaos(&s.client, &s.ns, "chatty", json!({ "mode": "log-flood" })).await?;
    create_chaos(&s.client, &s.ns, "peek", json!({ "mode": "read-undeclared" })).await?;
    let chaos = chaos_api(&s.client, &s.ns);
    kwop_tests::wait::until("both reconciled", Duration::from_secs(30), || async {
        let a = chaos.get("chatty").await.map_err(|e| e.to_string())?;
        let b = chaos.get("peek").await.map_err(|e| e.to_string())?;
        let done = a.data["status"]["phase"] == "flooded" && b.data["status"]["phase"] == "read";
        Ok(done.then_some(()))
    })
    .await?;
    assert_eq!(chaos.get("peek").await?.data["status"]["sawSecret"], false);
    let log = s.host.log();
    let logged = log.lines().filter(|l| l.contains("flood line") && !l.contains("stdout flood")).count();
    let printed = log.lines().filter(|l| l.contains("stdout flood line")).count();
    assert!(
        logged <= 200 && printed <= 200,
        "plugin output is capped (5000 lines of each per reconcile, at most 64 per call and stream kept): {logged} log lines, {printed} stdout lines"
    );
    assert!(logged > 0 && printed > 0, "but not silenced");
    assert!(log.contains("plugin log lines over the per-call limit were dropped"));
    assert!(log.contains("plugin output over the per-call limit was dropped"));
    assert!(log.contains("plugin read a kind it did not declare"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_sees_no_environment_arguments_files_or_network() -> anyhow::Result<()> {
    let s = setup("chaos-probe", &[]).await?;
    // The API server's own port: reachable from the host, must not be from the plugin.
    let addr = s.plane.server.trim_start_matches("https://").to_string();
    create_chaos(&s.client, &s.ns, "probe", json!({ "mode": "probe", "probeAddr": addr })).await?;
    let chaos = chaos_api(&s.client, &s.ns);
    let st = kwop_tests::wait::until("the probe to report", Duration::from_secs(30), || async {
        let o = chaos.get("probe").await.map_err(|e| e.to_string())?;
        Ok((o.data["status"]["phase"] == "probed").then(|| o.data["status"].clone()))
    })
    .await?;
    assert_eq!(st["envs"], 0, "{st}");
    assert_eq!(st["args"], 1, "argv[0] only (the program name programs expect): {st}");
    assert_eq!(st["fs"], false, "{st}");
    assert_eq!(st["net"], false, "{st}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_failure_is_reported_with_its_own_events_and_retried() -> anyhow::Result<()> {
    let s = setup("chaos-fail", &[]).await?;
    create_chaos(&s.client, &s.ns, "sad", json!({ "mode": "fail" })).await?;
    expect_failure(&s, "sad", "ChaosFailed", "asked to fail").await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let n = s.host.metric("kwop_reconcile_total", &[("plugin", "chaos"), ("result", "plugin_failure")])?;
    assert!(n >= 2.0, "retry: true is retried with backoff ({n})");
    assert!(n <= 20.0, "with backoff, not in a hot loop ({n})");
    // The same Warning is recorded once, not once per retry: one write of it reached the API
    // server (counting Event objects would not tell: the client's recorder folds repeats into
    // one object's series, with a write each).
    let writes: Vec<_> = s
        .plane
        .audited("kwop/")
        .into_iter()
        .filter(|w| w.resource == "events" && w.namespace == s.ns && w.name.starts_with("sad."))
        .collect();
    assert_eq!(writes.len(), 1, "{} event writes for {n} failures: {writes:?}", writes.len());
    let evs = events_for(&s.client, &s.ns, "sad").await?;
    assert_eq!(evs.iter().filter(|e| e.reason.as_deref() == Some("ChaosFailed")).count(), 1);
    Ok(())
}

async fn status_of(s: &Setup, name: &str, phase: &str) -> anyhow::Result<serde_json::Value> {
    let chaos = chaos_api(&s.client, &s.ns);
    kwop_tests::wait::until("the plugin to report", Duration::from_secs(30), || async {
        let o = chaos.get(name).await.map_err(|e| e.to_string())?;
        Ok((o.data["status"]["phase"] == phase).then(|| o.data["status"].clone()))
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn time_stands_still_inside_a_reconcile() -> anyhow::Result<()> {
    let s = setup("chaos-clock", &[]).await?;
    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos();
    create_chaos(&s.client, &s.ns, "clock", json!({ "mode": "clock" })).await?;
    create_chaos(&s.client, &s.ns, "yield", json!({ "mode": "yield" })).await?;
    let st = status_of(&s, "clock", "clock").await?;
    // One fixed instant per reconcile (its start), and a monotonic clock that does not move.
    assert_eq!(st["wall"], st["wallAfterWork"], "{st}");
    assert_eq!(st["monotonicElapsedNs"], "0", "{st}");
    let wall: u128 = st["wall"].as_str().unwrap_or_default().parse()?;
    assert!(wall >= before, "the wall clock is the reconcile's start, not a constant: {st}");
    // A zero-length wait is ready at once; a later one is never ready (and never waited for).
    let st = status_of(&s, "yield", "yielded").await?;
    assert_eq!(st["laterReady"], false, "{st}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_huge_random_request_and_a_query_loop_fail_clearly() -> anyhow::Result<()> {
    let s = setup("chaos-greedy", &["--plugin-limit=chaos:timeout=10s"]).await?;
    create_chaos(&s.client, &s.ns, "greedy", json!({ "mode": "random-huge" })).await?;
    expect_failure(&s, "greedy", "ReconcilePluginFailed", "exceeds limit 1048576").await?;
    // 20 ConfigMaps of 200 KiB: each query returns 4 MiB; the call's 32 MiB read budget ends
    // the loop after a few queries.
    let cms: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.ns);
    for i in 0..20 {
        let cm = json!({ "metadata": { "name": format!("big-{i}") }, "data": { "blob": "x".repeat(200 << 10) } });
        cms.create(&PostParams::default(), &serde_json::from_value(cm)?).await?;
    }
    create_chaos(&s.client, &s.ns, "reader", json!({ "mode": "query-loop" })).await?;
    expect_failure(&s, "reader", "ReconcilePluginFailed", "bytes of cache reads left").await?;
    others_unaffected(&s, "greedy").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_whose_info_sleeps_is_refused_at_once() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("chaos-info")?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO), ("sleepy.wasm", plugins::CHAOS_INFO_SLEEPS)])?;
    let started = std::time::Instant::now();
    let h = host(plane, &dir, &[&format!("--namespace={ns}")])?;
    // The sleep is 30 s: refused at its first instant, not after it.
    assert!(started.elapsed() < Duration::from_secs(15), "info() held the start for {:?}", started.elapsed());
    let (_, body) = http_get(h.port, "/plugins")?;
    assert!(body.contains("plugins cannot sleep"), "{body}");
    assert!(!body.contains("\"name\":\"chaos-info-sleeps\""), "{body}");
    Ok(())
}
