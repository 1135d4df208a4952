//! Unit tests of [`super::Shard`]: the holding, the write gate and the caches' epochs.

use super::*;
use std::time::Instant;

fn shard() -> (Arc<Shard>, Arc<Leadership>) {
    let lease = Leadership::elected();
    let config = ShardConfig {
        by: ShardBy::Namespace,
        ring: "r".into(),
        member: "m".into(),
        lease: crate::leader::ElectionConfig {
            namespace: "n".into(),
            name: "kwop-shard.r.m".into(),
            identity: "m".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        },
    };
    (Shard::new(config, lease.clone()), lease)
}

#[test]
fn after_a_lapse_of_its_lease_nothing_is_held_until_the_ring_is_read_again() {
    let (s, lease) = shard();
    lease.extend(Instant::now() + Duration::from_millis(40));
    // A step: the assignment read in this term says it holds everything.
    s.confirmed.store(lease.term(), Ordering::Release);
    s.grow(Ranges::all());
    assert!(s.may_write() && s.holds(Some("a"), ""));
    // Frozen past the renew deadline: nothing, even before anyone else could take over.
    std::thread::sleep(Duration::from_millis(50));
    assert!(!s.may_write() && !s.holds(Some("a"), ""));
    // Renewed on waking: still nothing, though the Lease is fresh, until a step confirms.
    lease.extend(Instant::now() + Duration::from_secs(10));
    assert!(lease.may_write());
    assert!(!s.may_write() && !s.holds(Some("a"), ""), "the old part may have been taken meanwhile");
    s.confirmed.store(lease.term(), Ordering::Release);
    assert!(s.holds(Some("a"), ""));
}

#[tokio::test]
async fn caches_listed_before_the_holding_grew_are_not_current() {
    let (s, _) = shard();
    let before = s.epoch();
    s.grow(Ranges::all());
    assert!(!s.caches_current(before), "listed before it grew");
    assert!(s.caches_current(s.epoch()));
    s.shrink(&Ranges::empty()).await;
    assert!(s.caches_current(before + 1), "a shrink does not make caches stale");
    assert!(!s.holds(Some("a"), ""));
}

#[tokio::test]
async fn what_is_assigned_and_not_held_makes_it_unready() {
    let (s, lease) = shard();
    assert_eq!(s.unready(), None, "nothing assigned yet");
    lease.extend(Instant::now() + Duration::from_millis(40));
    s.confirmed.store(lease.term(), Ordering::Release);
    s.assigned.store(Arc::new(Ranges::all()));
    s.grow(Ranges::all());
    assert_eq!(s.unready(), None, "holds what it is assigned");
    // Its Lease lapses: it holds nothing it is assigned.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(s.unheld(), Ranges::all());
    let why = s.unready().unwrap_or_default();
    assert!(why.contains("does not hold") && why.contains("renew deadline"), "{why}");
    // Renewed, not confirmed yet: still not.
    lease.extend(Instant::now() + Duration::from_secs(10));
    assert!(s.unready().is_some_and(|w| w.contains("not confirmed")));
    s.confirmed.store(lease.term(), Ordering::Release);
    assert_eq!(s.unready(), None);
    // Giving part of it up (assigned no more, being drained) is not a reason.
    let half = Ranges::parse("0x0-0x8000000000000000").unwrap_or_else(|_| Ranges::empty());
    assert!(!half.is_empty());
    s.assigned.store(Arc::new(half.clone()));
    s.shrink(&half).await;
    assert_eq!(s.unready(), None);
}
