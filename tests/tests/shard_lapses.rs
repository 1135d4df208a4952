//! A shard member whose Lease lapses (issue 35, defects 1 and 10), on a real API server.
//!
//! Step by step, in this process: two members of a ring (the host's own `shard::Shard`, stepped
//! by the test, their member Leases renewed by the test), so the interleavings that a freeze
//! makes rare are played exactly:
//! - a member that stepped while its Lease was lapsed holds its part again once renewed
//!   (before: it shrank to nothing and, the assignment still listing it, never grew back), and
//!   one whose swap the API server applied but whose answer was lost holds what it took;
//! - a member waking from a lapse never holds what a taker — which judged it gone and read the
//!   same assignment — swaps away (before: it confirmed from a read, the taker's swap went
//!   through, and both held the range until its next step).
//!
//! Then three `kwop run --sharding=namespace` replicas: one frozen past its renew deadline (under
//! its lease) reconciles its part again when it wakes, and one cut off from the API server says
//! on `/readyz` and in `kwop_shard_unheld_ppm` that it is assigned ranges it does not hold.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kwop::leader::{ElectionConfig, Leadership};
use kwop::shard::handover;
use kwop::shard::members::{self, Ring};
use kwop::shard::ring::Ranges;
use kwop::shard::{Shard, ShardBy, ShardConfig};
use kwop_tests::{ControlPlane, Mode};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The member Leases' duration (what a taker waits before judging a member gone).
const LEASE_SECONDS: i32 = 2;

/// One member, stepped by the test.
struct Member {
    name: String,
    shard: Arc<Shard>,
    lease: Arc<Leadership>,
    ring: Ring,
    leases: Api<Lease>,
    ring_name: String,
}

impl Member {
    fn new(client: &kube::Client, namespace: &str, ring_name: &str, name: &str) -> Member {
        let lease = Leadership::elected();
        let config = ShardConfig {
            by: ShardBy::Uid,
            ring: ring_name.into(),
            member: name.into(),
            lease: ElectionConfig {
                namespace: namespace.into(),
                name: members::member_lease(ring_name, name),
                identity: name.into(),
                lease_duration: Duration::from_secs(LEASE_SECONDS as u64),
                renew_deadline: Duration::from_millis(1500),
                retry_period: Duration::from_millis(500),
            },
        };
        Member {
            name: name.into(),
            shard: Shard::new(config, lease.clone()),
            lease,
            ring: Ring::new(client.clone(), namespace, ring_name),
            leases: Api::namespaced(client.clone(), namespace),
            ring_name: ring_name.into(),
        }
    }

    /// Renews its member Lease (written: the others see it change) and its write gate.
    async fn renew(&self) -> anyhow::Result<()> {
        let name = members::member_lease(&self.ring_name, &self.name);
        let spec = LeaseSpec {
            holder_identity: Some(self.name.clone()),
            lease_duration_seconds: Some(LEASE_SECONDS),
            renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            ..LeaseSpec::default()
        };
        if self.leases.get_opt(&name).await?.is_none() {
            let l = Lease { metadata: ObjectMeta { name: Some(name), ..ObjectMeta::default() }, spec: Some(spec) };
            self.leases.create(&PostParams::default(), &l).await?;
        } else {
            let patch = serde_json::json!({ "spec": spec });
            self.leases.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        }
        self.lease.extend(Instant::now() + Duration::from_millis(1500));
        Ok(())
    }

    /// Its write gate closes now (a freeze past the renew deadline, as its own clock sees it).
    fn lapse(&self) {
        self.lease.extend(Instant::now());
    }

    async fn step(&mut self) -> anyhow::Result<()> {
        self.shard.step(&mut self.ring).await?;
        Ok(())
    }

    /// What it reconciles now: its holding while it may write, else nothing.
    fn held(&self) -> Ranges {
        if self.shard.may_write() {
            self.shard.holding().as_ref().clone()
        } else {
            Ranges::empty()
        }
    }
}

/// Steps both (renewing both) until they split the hash space between them.
async fn settle(a: &mut Member, b: &mut Member) -> anyhow::Result<()> {
    for _ in 0..20 {
        a.renew().await?;
        b.renew().await?;
        a.step().await?;
        b.step().await?;
        let (x, y) = (a.held(), b.held());
        if !x.is_empty() && !y.is_empty() && x.union(&y) == Ranges::all() {
            assert!(x.intersect(&y).is_empty(), "held twice while settling: {x:?} {y:?}");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    anyhow::bail!("did not settle: a {:?}, b {:?}", a.held(), b.held())
}

async fn pair(ring: &str) -> anyhow::Result<(Member, Member)> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let ns = plane.namespace(ring)?;
    let (mut a, mut b) = (Member::new(&client, &ns, ring, "a"), Member::new(&client, &ns, ring, "b"));
    settle(&mut a, &mut b).await?;
    Ok((a, b))
}

/// Renews `b` only, for longer than the member Lease: `a` looks gone to `b` afterwards.
async fn only_b_renews(b: &Member) -> anyhow::Result<()> {
    let until = Instant::now() + Duration::from_millis(LEASE_SECONDS as u64 * 1000 + 600);
    while Instant::now() < until {
        b.renew().await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Ok(())
}

/// Defect 1: a step during the lapse gave everything up; renewed, the plan compared the target
/// with the assignment (which still listed the member) and nothing grew back.
#[tokio::test(flavor = "multi_thread")]
async fn a_member_that_stepped_during_a_lapse_holds_its_part_again_once_renewed() -> anyhow::Result<()> {
    let (mut a, mut b) = pair("lapse-regrow").await?;
    let before = a.held();
    a.lapse();
    a.step().await?;
    assert!(a.held().is_empty(), "nothing is held while the Lease is lapsed");
    // Renewed before anyone could judge it gone: still assigned its part.
    a.renew().await?;
    b.renew().await?;
    let (assignment, _) = b.ring.assignment().await?;
    assert_eq!(assignment.get("a"), Some(&before), "the ring still assigns a its part");
    a.step().await?;
    b.step().await?;
    assert_eq!(a.held(), before, "renewed and stepped: a holds its assigned part again");
    assert!(a.held().intersect(&b.held()).is_empty());
    Ok(())
}

/// Found by the soak: a member whose Lease lapsed between two steps (an API server restart: no
/// step ran meanwhile) relists its caches once it holds its part again — events that came while
/// it could not write were dropped (not held then), and its holding looked unchanged.
#[tokio::test(flavor = "multi_thread")]
async fn a_member_whose_lease_lapsed_between_steps_relists_when_it_holds_again() -> anyhow::Result<()> {
    let (mut a, b) = pair("lapse-relist").await?;
    let part = a.held();
    let listed = a.shard.epoch();
    assert!(a.shard.caches_current(listed));
    a.lapse();
    a.renew().await?;
    b.renew().await?;
    assert!(a.held().is_empty(), "a new term, not confirmed yet");
    a.step().await?;
    assert_eq!(a.held(), part);
    assert!(!a.shard.caches_current(listed), "caches listed before the lapse are not current: relisted");
    Ok(())
}

/// Defect 1, the other way in: a swap that errors after the API server applied it. `a` takes
/// `b`'s part (b gone) but never hears back; its next step reads the assignment that gives it
/// everything (before: the plan had nothing left to take, so `a` never held b's part).
#[tokio::test(flavor = "multi_thread")]
async fn a_member_whose_swap_was_applied_unheard_holds_what_it_took() -> anyhow::Result<()> {
    let (mut a, b) = pair("lost-swap").await?;
    let part = b.held();
    b.lapse();
    let until = Instant::now() + Duration::from_millis(LEASE_SECONDS as u64 * 1000 + 600);
    while Instant::now() < until {
        a.renew().await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // a's step as far as its swap, which lands; the answer is lost (a does not grow).
    let (assignment, rv) = a.ring.assignment().await?;
    let live = a.ring.live().await?;
    let plan = handover::plan("a", &Ranges::all(), &assignment, &live);
    assert!(plan.forget.contains(&"b".to_string()) && !plan.take.is_empty(), "{plan:?}");
    assert!(a.ring.swap(&plan.apply("a", &assignment), rv).await?, "the swap lands");
    assert!(a.held().intersect(&part).is_empty(), "a did not hear back: it holds none of b's part yet");
    a.renew().await?;
    a.step().await?;
    assert_eq!(a.held(), Ranges::all(), "a holds what the ring gives it");
    Ok(())
}

/// Defect 10: `a` wakes from a lapse while `b`, having judged it gone, is about to swap the
/// assignment it read. Either the swap goes through and `a` holds none of it, or `a` holds its
/// part and the swap is refused — never both.
#[tokio::test(flavor = "multi_thread")]
async fn a_member_waking_from_a_lapse_never_holds_what_a_taker_swaps_away() -> anyhow::Result<()> {
    let (mut a, mut b) = pair("lapse-race").await?;
    let part = a.held();
    a.lapse();
    only_b_renews(&b).await?;

    // b's step, as far as its swap: the assignment, then the members alive (a is not).
    let (assignment, rv) = b.ring.assignment().await?;
    let live: BTreeSet<String> = b.ring.live().await?;
    assert!(!live.contains("a"), "a looks gone to b: {live:?}");
    let plan = handover::plan("b", &Ranges::all(), &assignment, &live);
    assert!(plan.forget.contains(&"a".to_string()) && !plan.take.intersect(&part).is_empty(), "{plan:?}");
    let next = plan.apply("b", &assignment);

    // a wakes meanwhile: its Lease renews (a new term) and it steps.
    a.renew().await?;
    a.step().await?;
    let swapped = b.ring.swap(&next, rv).await?;
    let both = a.held().intersect(&plan.take);
    assert!(
        !swapped || both.is_empty(),
        "b swapped {:?} away from a while a holds {both:?} of it (a confirmed from a read)",
        plan.take
    );

    // And on: b steps for real (it sees a's renewal), both keep renewing; never both hold.
    for _ in 0..6 {
        a.renew().await?;
        b.renew().await?;
        a.step().await?;
        b.step().await?;
        let (x, y) = (a.held(), b.held());
        assert!(x.intersect(&y).is_empty(), "held twice: a {x:?}, b {y:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(a.held().union(&b.held()), Ranges::all(), "everything held again");
    assert!(!a.held().is_empty(), "a, alive again, got a part again");
    Ok(())
}

/// The other order, as a control: the taker's swap lands first; `a` wakes to find its part
/// gone and holds none of it.
#[tokio::test(flavor = "multi_thread")]
async fn a_member_waking_after_a_taker_swapped_holds_nothing_of_what_it_lost() -> anyhow::Result<()> {
    let (mut a, mut b) = pair("lapse-late").await?;
    let part = a.held();
    a.lapse();
    only_b_renews(&b).await?;
    b.step().await?;
    assert!(part.minus(&b.held()).is_empty(), "b took a's part: {:?}", b.held());
    a.renew().await?;
    a.step().await?;
    assert!(a.held().intersect(&b.held()).is_empty(), "a {:?} b {:?}", a.held(), b.held());
    Ok(())
}

const KWOP: &str = env!("CARGO_BIN_EXE_kwop-host");

/// Three replicas over 24 namespaces with a Foo each, b behind a proxy that can cut it off.
/// Member Leases of 8 s, renew deadline 4 s: a freeze of 5 s lapses b's Lease and wakes it before
/// the others may judge it gone.
#[tokio::test(flavor = "multi_thread")]
async fn a_replica_frozen_past_its_renew_deadline_reconciles_again_and_readyz_says_when_it_cannot() -> anyhow::Result<()>
{
    use kwop_tests::{plugins, proxy::Proxy, shards};
    let plane = ControlPlane::start(Mode::Api)?;
    let client = plane.client().await?;
    let leases = plane.namespace("kwop-system")?;
    let namespaces = shards::namespaces(&plane, "lapse", 24)?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    let flags = vec![
        "--sharding=namespace".to_string(),
        format!("--leader-election-namespace={leases}"),
        "--leader-lease-duration=8s".into(),
        "--leader-renew-deadline=4s".into(),
        "--leader-retry-period=1s".into(),
        "--shutdown-grace=3s".into(),
    ];
    let proxy = Proxy::start(Proxy::upstream_of(&plane.kubeconfig)?)?;
    let via_proxy = proxy.kubeconfig(&plane.kubeconfig, plane.dir.join("kubeconfig-b"))?;
    let mut ring = shards::Ring::new(&plane, KWOP, &dir, flags);
    ring.add("a")?;
    ring.add_with_kubeconfig("b", &via_proxy)?;
    ring.add("c")?;
    ring.settled(Duration::from_secs(30)).await?;
    let foos = shards::create_foos(&client, &namespaces, 1).await?;
    shards::converged(&client, &foos, Duration::from_secs(60)).await?;
    let ppm = |ring: &shards::Ring, r: &str| ring.shards()[r]["holdingPpm"].as_u64().unwrap_or(0);
    let b_part = ppm(&ring, "b");
    assert!(b_part > 0, "{:#?}", ring.shards());

    // Frozen 5 s: past its renew deadline, under its Lease. It wakes holding what it held.
    ring.hosts["b"].proc.signal(libc::SIGSTOP);
    tokio::time::sleep(Duration::from_secs(5)).await;
    ring.hosts["b"].proc.signal(libc::SIGCONT);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let more = shards::create_foos_named(&client, &namespaces, "g", 1).await?;
    let took = shards::converged(&client, &more, Duration::from_secs(30)).await;
    let after = ring.shards();
    took.map_err(|e| anyhow::anyhow!("{e}: the frozen replica stopped reconciling its part: {after:#?}"))?;
    assert_eq!(ppm(&ring, "b"), b_part, "b holds its part again: {after:#?}");
    assert_eq!(kwop_tests::host::http_get(ring.hosts["b"].port, "/readyz")?.0, 200);

    // Cut off: its Lease lapses, it holds nothing, and it says so while still assigned its part.
    proxy.cut();
    let b = &ring.hosts["b"];
    let unready = kwop_tests::wait::until("b unready while cut off", Duration::from_secs(30), || async {
        let (code, body) = kwop_tests::host::http_get(b.port, "/readyz").map_err(|e| e.to_string())?;
        let unheld = b.metric("kwop_shard_unheld_ppm", &[]).map_err(|e| e.to_string())?;
        Ok((code == 503 && unheld > 0.0).then_some(body))
    })
    .await?;
    assert!(unready.contains("does not hold"), "{unready}");
    proxy.restore();
    kwop_tests::wait::until("b ready again", Duration::from_secs(60), || async {
        let (code, _) = kwop_tests::host::http_get(b.port, "/readyz").map_err(|e| e.to_string())?;
        Ok((code == 200).then_some(()))
    })
    .await?;
    ring.settled(Duration::from_secs(30)).await?;
    let all: Vec<_> = foos.iter().chain(&more).cloned().collect();
    for k in &all {
        shards::set_replicas(&client, k, 3).await?;
    }
    shards::converged(&client, &all, Duration::from_secs(60)).await?;
    let d = shards::double_writes(&shards::audit(&plane));
    assert!(d.is_empty(), "written by two replicas: {d:#?}");
    Ok(())
}
