//! Sharding across replicas (issue 19), each scenario on a control plane of its own with the API
//! server's `ShardedListAndWatch` feature gate on (watches sliced by the API server) and off
//! (sliced by each replica): 3 replicas share 300 Foos in 60 namespaces, each reconciling the
//! part its range of the FNV-1a hash space holds; a killed replica's part moves once its Lease
//! expires; a new one takes its share; a rolling restart under load converges. Who wrote what
//! comes from the API server's audit log (the user agent carries each replica's name), and no
//! Foo is ever written by two replicas: no generation's status twice, no writer coming back.

mod common;

use kwop_tests::shards::{self, FooKey, Ring};
use kwop_tests::{plugins, ControlPlane, Mode};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const KWOP: &str = env!("CARGO_BIN_EXE_kwop-host");
const GATE: &str = "--feature-gates=ShardedListAndWatch=true";
const NAMESPACES: usize = 60;
const PER_NAMESPACE: usize = 5;
/// Member Lease timing of the replicas.
const LEASE: Duration = Duration::from_secs(6);
const RETRY: Duration = Duration::from_secs(1);

/// One scenario at a time: each runs three or four replicas and a control plane.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct World {
    plane: ControlPlane,
    client: kube::Client,
    namespaces: Vec<String>,
    dir: std::path::PathBuf,
    flags: Vec<String>,
}

async fn world(gate: bool, by: &str) -> anyhow::Result<World> {
    let plane = ControlPlane::start_with(Mode::Api, if gate { &[GATE] } else { &[] })?;
    let client = plane.client().await?;
    let leases = plane.namespace("kwop-system")?;
    let namespaces = shards::namespaces(&plane, "shard", NAMESPACES)?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    let flags = vec![
        format!("--sharding={by}"),
        format!("--leader-election-namespace={leases}"),
        format!("--leader-lease-duration={}s", LEASE.as_secs()),
        "--leader-renew-deadline=4s".into(),
        format!("--leader-retry-period={}s", RETRY.as_secs()),
        "--shutdown-grace=5s".into(),
    ];
    Ok(World { plane, client, namespaces, dir, flags })
}

impl World {
    fn audit(&self) -> shards::Audit {
        shards::audit(&self.plane)
    }
}

/// Load: bumps the replicas of a few Foos at a time, round robin, until dropped.
struct Load(tokio::task::JoinHandle<usize>, tokio_util::sync::CancellationToken);

fn load(client: &kube::Client, foos: &[FooKey]) -> Load {
    let stop = tokio_util::sync::CancellationToken::new();
    let (client, foos, s) = (client.clone(), foos.to_vec(), stop.clone());
    let task = tokio::spawn(async move {
        let mut changes = 0;
        for round in 0.. {
            for k in foos.iter().skip((round * 7) % foos.len()).take(7) {
                if shards::set_replicas(&client, k, 2 + (round as i64 % 3)).await.is_ok() {
                    changes += 1;
                }
            }
            tokio::select! {
                _ = s.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_millis(150)) => {}
            }
        }
        changes
    });
    Load(task, stop)
}

impl Load {
    async fn stop(self) -> usize {
        self.1.cancel();
        self.0.await.unwrap_or(0)
    }
}

/// Three replicas, settled, then every Foo created and converged.
async fn three_in_sync(w: &World) -> anyhow::Result<(Ring<'_>, Vec<FooKey>)> {
    let mut ring = Ring::new(&w.plane, KWOP, &w.dir, w.flags.clone());
    for r in ["a", "b", "c"] {
        ring.add(r)?;
    }
    ring.settled(Duration::from_secs(30)).await?;
    let foos = shards::create_foos(&w.client, &w.namespaces, PER_NAMESPACE).await?;
    shards::converged(&w.client, &foos, Duration::from_secs(90)).await?;
    Ok((ring, foos))
}

fn assert_no_double_writes(w: &World, foos: &[FooKey], what: &str) {
    let d = shards::double_writes(&w.audit());
    assert!(d.checked >= foos.len(), "{what}: the audit log shows the generation of every status write: {d:?}");
    assert!(d.is_empty(), "{what}: Foos written by two replicas: {d:#?}");
}

/// The check above can fail: two replicas that do not shard (nor elect a leader) both write.
#[tokio::test(flavor = "multi_thread")]
async fn the_double_write_check_sees_two_replicas_that_do_not_shard() -> anyhow::Result<()> {
    let _one = SERIAL.lock().await;
    let mut w = world(false, "namespace").await?;
    w.flags = vec!["--shutdown-grace=2s".into()];
    let mut ring = Ring::new(&w.plane, KWOP, &w.dir, w.flags.clone());
    for r in ["x", "y"] {
        ring.add(r)?;
    }
    let foos = shards::create_foos(&w.client, &w.namespaces[..6], PER_NAMESPACE).await?;
    shards::converged(&w.client, &foos, Duration::from_secs(60)).await?;
    for k in &foos {
        shards::set_replicas(&w.client, k, 3).await?;
    }
    shards::converged(&w.client, &foos, Duration::from_secs(60)).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let d = shards::double_writes(&w.audit());
    assert!(d.checked >= foos.len(), "{d:?}");
    assert!(!d.generations.is_empty() || !d.without_handover.is_empty(), "two unsharded writers went unseen: {d:?}");
    Ok(())
}

async fn three_share_the_foos(gate: bool, by: &str) -> anyhow::Result<()> {
    let _one = SERIAL.lock().await;
    let w = world(gate, by).await?;
    let (ring, foos) = three_in_sync(&w).await?;

    // Each wrote only its own Foos, and never one another wrote.
    let audit = w.audit().by_foo;
    let mut per: BTreeMap<String, usize> = BTreeMap::new();
    for (foo, ws) in &audit {
        let writers: BTreeSet<&String> = ws.iter().map(|(r, _)| r).collect();
        assert_eq!(writers.len(), 1, "{foo:?} written by {writers:?}");
        for r in writers {
            *per.entry(r.clone()).or_default() += 1;
        }
    }
    assert_eq!(audit.len(), foos.len(), "every Foo written");
    let mut counts: Vec<usize> = per.values().copied().collect();
    counts.sort();
    eprintln!("Foos per replica: {per:?}");
    assert_eq!(counts.len(), 3, "{per:?}");
    if by == "namespace" {
        // The ranges are cut at equal counts of namespaces (the cluster's other namespaces,
        // default, kube-system..., count too: hence not exactly 20 of these each).
        assert!(counts.iter().all(|c| (70..=130).contains(c)), "{per:?}");
    }
    for c in &counts {
        assert!(*c >= foos.len() / 6 && *c <= foos.len() * 2 / 3, "about a third each: {per:?}");
    }
    assert_no_double_writes(&w, &foos, "sharing");

    // What each watch received and cached.
    for (name, shard) in ring.shards() {
        let cached = shard["cachedObjects"]["samplecontroller.k8s.io/v1alpha1/Foo"].as_u64().unwrap_or(0) as usize;
        let outside = ring.metric(
            &name,
            "kwop_watch_objects_outside_shard_total",
            &[("kind", "samplecontroller.k8s.io/v1alpha1/Foo")],
        );
        let host = &ring.hosts[&name];
        match (by, gate) {
            ("namespace", true) => {
                assert_eq!(cached, per[&name], "{name} caches its slice: {shard}");
                assert_eq!(outside, 0.0, "{name}: the API server sent only its slice");
                assert!(host.log().contains("sliced by the API server"), "{}", host.proc.tail(40));
            }
            ("namespace", false) => {
                assert_eq!(cached, per[&name], "{name} caches its slice: {shard}");
                assert!(outside >= (foos.len() - per[&name]) as f64, "{name} received all, dropped {outside}");
                assert!(host.log().contains("sliced here"), "{}", host.proc.tail(40));
            }
            _ => assert_eq!(cached, foos.len(), "uid: every replica caches everything"),
        }
        assert_eq!(shard["serverSide"], serde_json::json!(gate && by == "namespace"), "{shard}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn three_replicas_share_300_foos_sliced_by_the_api_server() -> anyhow::Result<()> {
    three_share_the_foos(true, "namespace").await
}

#[tokio::test(flavor = "multi_thread")]
async fn three_replicas_share_300_foos_sliced_by_each_replica() -> anyhow::Result<()> {
    three_share_the_foos(false, "namespace").await
}

#[tokio::test(flavor = "multi_thread")]
async fn three_replicas_share_300_foos_by_uid() -> anyhow::Result<()> {
    three_share_the_foos(true, "uid").await
}

async fn kill_and_add(gate: bool) -> anyhow::Result<()> {
    let _one = SERIAL.lock().await;
    let w = world(gate, "namespace").await?;
    let (mut ring, foos) = three_in_sync(&w).await?;

    // b dies; every Foo changes at once, b's included.
    ring.kill("b");
    let killed = Instant::now();
    for k in &foos {
        shards::set_replicas(&w.client, k, 2).await?;
    }
    let took = shards::converged(&w.client, &foos, Duration::from_secs(60)).await?;
    let moved = killed.elapsed();
    ring.settled(Duration::from_secs(10)).await?;
    eprintln!("killed b: everything converged {took:?} after the changes, {moved:?} after the kill");
    // Its part moved once its Lease expired (seen unchanged for the lease duration by the
    // others, who look every retry period), plus a relist.
    assert!(moved < LEASE + RETRY * 3 + Duration::from_secs(5), "b's part moved after {moved:?}");
    assert_no_double_writes(&w, &foos, "after a kill");

    // d joins under load: a takes its third from the others without two writing one Foo.
    let load = load(&w.client, &foos);
    ring.add("d")?;
    ring.settled(Duration::from_secs(30)).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let changes = load.stop().await;
    shards::converged(&w.client, &foos, Duration::from_secs(60)).await?;
    eprintln!("d joined under {changes} changes");
    assert_no_double_writes(&w, &foos, "a replica added under load");
    let d_wrote = w.audit().by_foo.values().filter(|ws| ws.iter().any(|(r, _)| r == "d")).count();
    assert!(d_wrote > 0, "d took its part and wrote");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_replicas_part_moves_and_a_new_one_takes_its_share_gate_on() -> anyhow::Result<()> {
    kill_and_add(true).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_replicas_part_moves_and_a_new_one_takes_its_share_gate_off() -> anyhow::Result<()> {
    kill_and_add(false).await
}

/// A replica frozen past its Lease (a stopped VM, a long GC pause) finds its part taken when it
/// wakes: its Lease renews, but it writes nothing of that part until it has checked the ring again
/// (a lapse starts a new term, see `shard::Shard::may_write`).
#[tokio::test(flavor = "multi_thread")]
async fn a_replica_frozen_past_its_lease_writes_nothing_of_its_old_part() -> anyhow::Result<()> {
    let _one = SERIAL.lock().await;
    let w = world(false, "namespace").await?;
    let (ring, foos) = three_in_sync(&w).await?;

    ring.hosts["b"].proc.signal(libc::SIGSTOP);
    for k in &foos {
        shards::set_replicas(&w.client, k, 2).await?;
    }
    // a and c take b's part once its Lease expired, and converge it.
    shards::converged(&w.client, &foos, Duration::from_secs(60)).await?;
    // b wakes up under load: whatever it held before, it must not write it now.
    let load = load(&w.client, &foos);
    ring.hosts["b"].proc.signal(libc::SIGCONT);
    ring.settled(Duration::from_secs(30)).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    load.stop().await;
    shards::converged(&w.client, &foos, Duration::from_secs(60)).await?;
    assert_no_double_writes(&w, &foos, "a replica frozen past its Lease");
    Ok(())
}

async fn rolling_restart(gate: bool) -> anyhow::Result<()> {
    let _one = SERIAL.lock().await;
    let w = world(gate, "namespace").await?;
    let (mut ring, foos) = three_in_sync(&w).await?;

    let load = load(&w.client, &foos);
    for (old, new) in [("a", "a2"), ("b", "b2"), ("c", "c2")] {
        // As a Deployment's rolling update: the new pod first, then the old one goes.
        ring.add(new)?;
        ring.settled(Duration::from_secs(30)).await?;
        let log = ring.stop(old, Duration::from_secs(10));
        // It left in order: the others took its part at once, not after its Lease expired.
        assert!(log.contains("left the shard ring"), "{old}: {log}");
        ring.settled(Duration::from_secs(30)).await?;
    }
    let changes = load.stop().await;
    shards::converged(&w.client, &foos, Duration::from_secs(60)).await?;
    eprintln!("rolling restart under {changes} changes");
    assert_no_double_writes(&w, &foos, "a rolling restart under load");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rolling_restart_under_load_writes_nothing_twice_gate_on() -> anyhow::Result<()> {
    rolling_restart(true).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rolling_restart_under_load_writes_nothing_twice_gate_off() -> anyhow::Result<()> {
    rolling_restart(false).await
}

/// The sharded install (`deploy/sharded/`): its service account is enough for sharding, every
/// replica runs the cluster's ReconcilerPlugins and takes a hot swap, and the leader alone writes
/// their status.
#[tokio::test(flavor = "multi_thread")]
async fn the_sharded_install_runs_reconciler_plugins_on_every_replica_with_one_status_writer() -> anyhow::Result<()> {
    let _one = SERIAL.lock().await;
    let w = world(true, "namespace").await?;
    let tree = common::deploy_tree()?;
    let sharded = tree.join("sharded").display().to_string();
    w.plane.kubectl_output(&["apply", "--server-side", "--force-conflicts", "-k", &sharded])?;
    w.plane.kubectl_output(&[
        "wait",
        "--for=condition=established",
        "--timeout=60s",
        "crd/reconcilerplugins.kwop.dev",
    ])?;
    let example = kwop_tests::repo_root().join("deploy/plugins/guest-foo.yaml").display().to_string();
    w.plane.kubectl_output(&["apply", "--server-side", "-f", &example])?;
    let d: serde_json::Value = serde_json::from_str(&w.plane.kubectl_output(&[
        "get",
        "-n",
        "kwop-system",
        "deployment/kwop",
        "-o",
        "json",
    ])?)?;
    assert_eq!(d["spec"]["replicas"], 3);
    let args = d["spec"]["template"]["spec"]["containers"][0]["args"].clone();
    assert!(args.as_array().is_some_and(|a| a.iter().any(|x| x == "--sharding=namespace")), "{args}");

    // Two replicas with nothing but the install's service account.
    let token = w.plane.kubectl_output(&["create", "token", "kwop", "-n", "kwop-system", "--duration=1h"])?;
    let kc = w.plane.kubeconfig_with_token(token.trim(), "kwop-sa.kubeconfig")?;
    let mut flags = w.flags.clone();
    flags.retain(|f| !f.starts_with("--leader-election-namespace"));
    flags.push("--leader-election-namespace=kwop-system".into());
    let mut ring = Ring::reconciler_plugins(&w.plane, KWOP, &kc, flags);
    for r in ["p", "q"] {
        ring.add(r)?;
    }
    ring.settled(Duration::from_secs(30)).await?;
    let foos = shards::create_foos(&w.client, &w.namespaces[..12], PER_NAMESPACE).await?;
    shards::converged(&w.client, &foos, Duration::from_secs(90)).await?;

    // Hot swap: the ReconcilerPlugin now names v2 (which annotates its Deployments).
    let v2 = format!("guest-foo.wasm={}", plugins::GUEST_FOO_V2);
    w.plane.kubectl_output(&[
        "create",
        "configmap",
        "-n",
        "kwop-system",
        "kwop-plugins-v2",
        &format!("--from-file={v2}"),
    ])?;
    let patch = r#"{"spec":{"source":{"configMap":{"name":"kwop-plugins-v2","key":"guest-foo.wasm"}}}}"#;
    w.plane.kubectl_output(&["patch", "reconcilerplugin", "guest-foo", "--type=merge", "-p", patch])?;
    let deps: kube::Api<k8s_openapi::api::apps::v1::Deployment> = kube::Api::all(w.client.clone());
    kwop_tests::wait::until("every replica on v2, every Deployment by v2", Duration::from_secs(90), || async {
        let on_v2 = ring.hosts.values().all(|h| {
            common::plugins_json(h.port)
                .is_ok_and(|p| p["plugins"].as_array().into_iter().flatten().any(|x| x["version"] == "0.1.0-v2"))
        });
        let list = deps.list(&Default::default()).await.map_err(|e| e.to_string())?;
        let annotated = list
            .items
            .iter()
            .filter(|d| d.metadata.namespace.as_deref().is_some_and(|n| n.starts_with("shard-")))
            .filter(|d| {
                d.metadata.annotations.as_ref().and_then(|a| a.get("samplecontroller.k8s.io/reconciled-by"))
                    == Some(&"guest-foo-v2".to_string())
            })
            .count();
        Ok((on_v2 && annotated == foos.len()).then_some(()))
    })
    .await?;
    assert_no_double_writes(&w, &foos, "a hot swap of a ReconcilerPlugin on two replicas");

    // Both reconciled their part; one wrote the ReconcilerPlugin's status.
    let audit = kwop_tests::audit::writes(&w.plane.dir, "kwop/");
    let status_writers: BTreeSet<String> = audit
        .iter()
        .filter(|x| x.resource == "reconcilerplugins" && x.subresource == "status")
        .filter_map(|x| x.user_agent.split_once('(').map(|(_, r)| r.chars().take(2).collect()))
        .collect();
    assert_eq!(status_writers.len(), 1, "ReconcilerPlugin status by the leader alone: {status_writers:?}");
    let foo_writers: BTreeSet<String> = w.audit().by_foo.values().flatten().map(|(r, _)| r.clone()).collect();
    assert_eq!(foo_writers, BTreeSet::from(["p".to_string(), "q".to_string()]));
    assert!(!audit.iter().any(|x| x.code == 403), "nothing forbidden to the service account");

    // Leaving: its member Lease goes too (the Role of deploy/sharded allows the delete).
    let log = ring.stop("q", Duration::from_secs(10));
    assert!(log.contains("left the shard ring"), "{log}");
    let leases = w.plane.kubectl_output(&["get", "lease", "-n", "kwop-system", "-o", "name"])?;
    assert!(!leases.contains("kwop-shard.kwop.q-"), "{leases}");
    assert!(leases.contains("kwop-shard.kwop.p-"), "{leases}");
    Ok(())
}
