//! A plugin can never wedge, starve or outlive the host (issue 12), on a real control plane: a
//! plugin that sleeps beside guest-foo, a call stuck for real, a file removed while it loads, and
//! a leader frozen past its lease.

mod common;

use common::*;
use kwop_tests::{host::http_get, plugins, wait, ControlPlane, Host, Mode};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn plugin_entry(host: &Host, name: &str) -> anyhow::Result<Option<Value>> {
    let v = plugins_json(host.port)?;
    let list = v["plugins"].as_array().cloned().unwrap_or_default();
    Ok(list.into_iter().find(|p| p["name"] == name))
}

fn lease_holder(plane: &ControlPlane, ns: &str, name: &str) -> String {
    plane
        .kubectl_output(&["get", "lease", name, "-n", ns, "-o", "jsonpath={.spec.holderIdentity}"])
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The log without terminal colours.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... m
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The identity a host joined the election with (from its log, once it wrote it).
fn identity(host: &Host) -> anyhow::Result<String> {
    let start = Instant::now();
    loop {
        let log = plain(&host.log());
        let line = log.lines().find(|l| l.contains("joining leader election")).unwrap_or_default();
        let id = line.split("identity=").nth(1).and_then(|r| r.split_whitespace().next()).unwrap_or_default();
        if !id.is_empty() {
            return Ok(id.to_string());
        }
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(20),
            "no identity in the host log:\n{}",
            host.proc.tail(20)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sleeping_plugin_beside_guest_foo_holds_nothing() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("sleeper")?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO), ("chaos.wasm", plugins::CHAOS)])?;
    let grace = Duration::from_secs(3);
    let mut host = host(
        plane,
        &dir,
        &[
            &format!("--namespace={ns}"),
            "--workers=2",
            "--shutdown-grace=3s",
            "--leader-elect",
            &format!("--leader-election-namespace={ns}"),
        ],
    )?;
    let client = plane.client().await?;
    // Eight sleepers (four times the workers) in both ways a runtime sleeps: a clock
    // subscription blocked on (Rust's sleep) and a poll on a timer (Python, Go).
    for i in 0..8 {
        let mode = if i % 2 == 0 { "sleep" } else { "poll-sleep" };
        create_chaos(&client, &ns, &format!("sleeper-{i}"), json!({ "mode": mode, "seconds": 60 })).await?;
    }
    for i in 0..8 {
        let ev = event_with_reason(&client, &ns, &format!("sleeper-{i}"), "ReconcilePluginFailed").await?;
        let note = ev.note.unwrap_or_default();
        assert!(note.contains("plugins cannot sleep"), "sleeper-{i}: {note}");
    }
    // guest-foo keeps reconciling, and nobody is stuck.
    create_foo(&client, &ns, "foo-a", "dep-a", Some(2)).await?;
    deployment_where(&client, &ns, "dep-a", "guest-foo reconciles beside the sleepers", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(2)
    })
    .await?;
    let (code, body) = http_get(host.port, "/healthz")?;
    assert_eq!(code, 200, "{body}");
    let chaos = plugin_entry(&host, "chaos")?.ok_or_else(|| anyhow::anyhow!("chaos not in /plugins"))?;
    assert_eq!(chaos["calls_stuck"], 0, "{chaos}");
    assert!(host.metric("kwop_plugin_errors_total", &[("plugin", "chaos")])? >= 8.0);

    // A hot swap of guest-foo completes within a few seconds.
    let swap = Instant::now();
    plugins::replace(&dir, "guest-foo.wasm", plugins::GUEST_FOO_V2)?;
    wait::until("guest-foo v2 active", Duration::from_secs(30), || async {
        let e = plugin_entry(&host, "guest-foo").map_err(|e| e.to_string())?;
        Ok(e.filter(|e| e["version"] == "0.1.0-v2").map(|_| ()))
    })
    .await?;
    deployment_where(&client, &ns, "dep-a", "v2 reconciles", |d| {
        d.metadata.annotations.as_ref().is_some_and(|a| a.contains_key("samplecontroller.k8s.io/reconciled-by"))
    })
    .await?;
    assert!(swap.elapsed() < Duration::from_secs(10), "hot swap took {:?}", swap.elapsed());

    // The sleeper's removal completes within the grace.
    let removal = Instant::now();
    std::fs::remove_file(dir.join("chaos.wasm"))?;
    wait::until("chaos gone from /plugins", Duration::from_secs(30), || async {
        Ok(plugin_entry(&host, "chaos").map_err(|e| e.to_string())?.is_none().then_some(()))
    })
    .await?;
    // The folder watcher's debounce plus the grace.
    assert!(removal.elapsed() < grace + Duration::from_secs(3), "removal took {:?}", removal.elapsed());

    // SIGTERM exits within the grace and releases the lease.
    let me = identity(&host)?;
    assert_eq!(lease_holder(plane, &ns, "kwop-leader"), me);
    let term = Instant::now();
    host.proc.stop(Duration::from_secs(30));
    let took = term.elapsed();
    assert!(took < grace + Duration::from_secs(2), "SIGTERM took {took:?}");
    assert!(host.log().contains("leader lease released"), "{}", host.proc.tail(20));
    assert_eq!(lease_holder(plane, &ns, "kwop-leader"), "", "lease released");
    Ok(())
}

/// With the interruption machinery broken (`KWOP_FAULT=stop-epoch`: the epoch never advances), a
/// looping plugin really holds a thread. The caller still gives up at deadline + grace, `/healthz`
/// fails and names the stuck call (so the kubelet restarts the pod), `/plugins` and a metric count
/// it, and SIGTERM still exits within the grace and releases the lease.
#[tokio::test(flavor = "multi_thread")]
async fn a_stuck_call_fails_healthz_and_does_not_hold_the_stop() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("stuck")?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO), ("chaos.wasm", plugins::CHAOS)])?;
    let args = [
        format!("--namespace={ns}"),
        "--plugin-timeout=300ms".into(),
        "--shutdown-grace=3s".into(),
        "--leader-elect".into(),
        format!("--leader-election-namespace={ns}"),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut host =
        Host::start_with_env(KWOP, plane, &plane.kubeconfig, &dir, &args, &[("KWOP_FAULT", "stop-epoch")], true)?;
    let client = plane.client().await?;
    create_foo(&client, &ns, "foo-a", "dep-a", Some(1)).await?;
    deployment_where(&client, &ns, "dep-a", "guest-foo reconciles", |_| true).await?;
    assert_eq!(http_get(host.port, "/healthz")?.0, 200, "nothing stuck yet");

    create_chaos(&client, &ns, "looper", json!({ "mode": "loop" })).await?;
    let ev = event_with_reason(&client, &ns, "looper", "ReconcilePluginFailed").await?;
    assert!(ev.note.unwrap_or_default().contains("deadline of 300ms"), "the caller gave up at the deadline");
    let body = wait::until("/healthz to fail", Duration::from_secs(10), || async {
        let (code, body) = http_get(host.port, "/healthz").map_err(|e| e.to_string())?;
        Ok((code == 503).then_some(body))
    })
    .await?;
    assert!(body.contains("stuck past deadline and grace") && body.contains("chaos"), "{body}");
    let chaos = plugin_entry(&host, "chaos")?.ok_or_else(|| anyhow::anyhow!("chaos not in /plugins"))?;
    assert!(chaos["calls_stuck"].as_u64() >= Some(1), "{chaos}");
    assert!(host.metric("kwop_plugin_calls_stuck", &[("plugin", "chaos")])? >= 1.0);

    let me = identity(&host)?;
    assert_eq!(lease_holder(plane, &ns, "kwop-leader"), me);
    let term = Instant::now();
    host.proc.stop(Duration::from_secs(30));
    let took = term.elapsed();
    assert!(took < Duration::from_secs(5), "SIGTERM took {took:?}");
    assert_eq!(lease_holder(plane, &ns, "kwop-leader"), "", "lease released");
    Ok(())
}

#[cfg(unix)]
fn signal(host: &Host, sig: i32) {
    #[allow(unsafe_code)]
    // SAFETY: a signal to our own child.
    unsafe {
        libc::kill(host.proc.child.id() as i32, sig);
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn a_leader_frozen_past_its_lease_writes_nothing_after_the_takeover() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("frozen")?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    let flags = [
        format!("--namespace={ns}"),
        "--leader-elect".to_string(),
        format!("--leader-election-namespace={ns}"),
        "--leader-lease-duration=6s".to_string(),
        "--leader-renew-deadline=4s".to_string(),
        "--leader-retry-period=1s".to_string(),
        "--resync-period=2s".to_string(),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let old = host(plane, &dir, &flags)?;
    let client = plane.client().await?;
    create_foo(&client, &ns, "foo", "dep", Some(1)).await?;
    deployment_where(&client, &ns, "dep", "the first leader reconciles", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(1)
    })
    .await?;
    let old_id = identity(&old)?;
    assert_eq!(lease_holder(plane, &ns, "kwop-leader"), old_id);
    // The standby (ready without leading).
    let mut new = Host::start(KWOP, plane, &dir, &flags, false)?;
    let new_id = identity(&new)?;

    signal(&old, libc::SIGSTOP);
    wait::until("the standby takes over", Duration::from_secs(30), || async {
        Ok::<_, String>((lease_holder(plane, &ns, "kwop-leader") == new_id).then_some(()))
    })
    .await?;
    let takeover = plane.audited_writes(&old_id)?.len();
    // Work the old leader would write as soon as it runs again: a changed Foo.
    set_replicas(&client, &ns, "foo", 3).await?;
    deployment_where(&client, &ns, "dep", "the new leader reconciles", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(3)
    })
    .await?;
    // The new leader dies without releasing the lease; the old one resumes, with a Foo changed
    // behind its back and its resync due.
    new.proc.kill();
    set_replicas(&client, &ns, "foo", 4).await?;
    signal(&old, libc::SIGCONT);
    tokio::time::sleep(Duration::from_secs(4)).await;
    // Still inside the lease the old leader must now wait out (6 s from seeing the new holder).
    assert_eq!(lease_holder(plane, &ns, "kwop-leader"), new_id, "the old leader cannot have taken it back yet");
    let after: Vec<_> = plane.audited_writes(&old_id)?.into_iter().skip(takeover).collect();
    let not_lease: Vec<_> = after.iter().filter(|(_, resource, _)| resource != "leases").collect();
    assert!(not_lease.is_empty(), "the old leader wrote after the takeover: {not_lease:?}");
    assert!(plane.audited_writes(&new_id)?.iter().any(|(_, r, _)| r == "deployments"), "the audit log counts writes");
    // And once the lease expires it leads again and catches up.
    deployment_where(&client, &ns, "dep", "the old replica leads again", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(4)
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_removed_while_it_loads_is_not_loaded_and_holds_nothing_up() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("vanish")?;
    // chaos-slow-info computes for seconds in info() (allowed: its own limit is 30 s).
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO), ("slow.wasm", plugins::CHAOS_SLOW_INFO)])?;
    let flags = [format!("--namespace={ns}"), "--plugin-limit=chaos-slow-info:timeout=30s".to_string()];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let h = Host::start(KWOP, plane, &dir, &flags, false)?;
    std::fs::remove_file(dir.join("slow.wasm"))?;
    let client = plane.client().await?;
    create_foo(&client, &ns, "foo", "dep", Some(1)).await?;
    deployment_where(&client, &ns, "dep", "guest-foo reconciles", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(1)
    })
    .await?;
    let swap = Instant::now();
    plugins::replace(&dir, "guest-foo.wasm", plugins::GUEST_FOO_V2)?;
    wait::until("guest-foo v2 active", Duration::from_secs(30), || async {
        let e = plugin_entry(&h, "guest-foo").map_err(|e| e.to_string())?;
        Ok(e.filter(|e| e["version"] == "0.1.0-v2").map(|_| ()))
    })
    .await?;
    assert!(swap.elapsed() < Duration::from_secs(10), "swap beside a slow load took {:?}", swap.elapsed());
    // Once its load ends, the removed file's plugin is not started.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert!(plugin_entry(&h, "chaos-slow-info")?.is_none(), "{}", plugins_json(h.port)?);
    let log = plain(&h.log());
    assert!(log.contains("removed while it was loading"), "{}", h.proc.tail(20));
    assert!(!log.contains("controller started plugin=chaos-slow-info"), "a removed file's plugin was started");
    assert_eq!(http_get(h.port, "/healthz")?.0, 200);
    Ok(())
}
