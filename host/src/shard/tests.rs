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
