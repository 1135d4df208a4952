//! Sharding across replicas (`kwop run --sharding=namespace|uid`): every replica reconciles its
//! own part of the primaries, by the 64-bit FNV-1a hash of their namespace (the default: a
//! primary and its children land together) or of their uid, exactly as the API server's sharded
//! list and watch computes it (KEP-5866).
//!
//! [`ring`] is the hash space and how live members split it; [`handover`] is how a part changes
//! hands, never held by two replicas at once (the argument is there); [`members`] is the ring on
//! the API server (a Lease per member, one Lease for the assignment); [`filter`] makes the API
//! server send each replica only its slice when it can (`shardSelector`), and tells whether it
//! does. [`Shard`] is what the rest of the host asks: does this replica reconcile that object now?
//!
//! Floor 6 of 0–15 (`docs/ARCHITECTURE.md`). May use: `leader`. Used by: `cli`, `controller`,
//! `watch`.

pub mod filter;
pub mod handover;
pub mod members;
pub mod ring;

use crate::leader::Leadership;
use arc_swap::ArcSwap;
use ring::Ranges;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, RwLock, RwLockReadGuard};

/// What the hash is taken of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardBy {
    /// The object's namespace: a primary and everything in its namespace go to one replica, and
    /// every namespaced watch can be sliced. Cluster-scoped primaries all hash alike (to one
    /// replica).
    Namespace,
    /// The primary's uid: primaries spread evenly whatever their namespaces, but children (and
    /// what plugins read) are cached by every replica — for plugins whose children are found by
    /// owner only.
    Uid,
}

impl ShardBy {
    /// The field as the API server's shard selector names it.
    pub fn field(self) -> &'static str {
        match self {
            ShardBy::Namespace => "object.metadata.namespace",
            ShardBy::Uid => "object.metadata.uid",
        }
    }
}

/// How this replica takes part.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// Namespace or uid.
    pub by: ShardBy,
    /// The ring's name (one per installation).
    pub ring: String,
    /// This replica's member name.
    pub member: String,
    /// Its member Lease (`kwop-shard.<ring>.<member>` in the host's namespace), timed as the
    /// leader's: its lease duration is how long a crashed member's part waits.
    pub lease: crate::leader::ElectionConfig,
}

/// This replica's part of the work.
pub struct Shard {
    config: ShardConfig,
    holding: ArcSwap<Ranges>,
    /// What it should hold, as it last planned.
    target: ArcSwap<Ranges>,
    /// What the assignment last read gives it and it means to keep (less what it is releasing):
    /// held unless its Lease lapsed or the assignment is not confirmed in this term yet.
    assigned: ArcSwap<Ranges>,
    /// Taken (shared) by every reconcile; taken whole before a part is given up, so none of its
    /// reconciles is still running when another replica may start them.
    drain: RwLock<()>,
    changed: watch::Sender<u64>,
    /// The member Lease is fresh (renewed within the renew deadline).
    lease: Arc<Leadership>,
    /// The API server filters watches by shard (the feature gate is on).
    server_side: AtomicBool,
    members: std::sync::atomic::AtomicUsize,
    /// The epoch (count of holding changes) of the last growth: caches listed before it may
    /// lack the objects of the namespaces it brought.
    grown: AtomicU64,
    /// The member Lease's term in which the holding was last checked against the assignment:
    /// after a lapse of the Lease, nothing is held (nor written) until it is checked again.
    confirmed: AtomicU64,
}

impl crate::leader::gate::Authority for Shard {
    fn may_write(&self) -> bool {
        Shard::may_write(self)
    }
}

impl Shard {
    /// A shard holding nothing yet; `lease` is the freshness of its member Lease.
    pub fn new(config: ShardConfig, lease: Arc<Leadership>) -> Arc<Self> {
        let (changed, _) = watch::channel(0);
        Arc::new(Shard {
            config,
            holding: ArcSwap::from_pointee(Ranges::empty()),
            target: ArcSwap::from_pointee(Ranges::empty()),
            assigned: ArcSwap::from_pointee(Ranges::empty()),
            drain: RwLock::new(()),
            changed,
            lease,
            server_side: AtomicBool::new(false),
            members: std::sync::atomic::AtomicUsize::new(0),
            grown: AtomicU64::new(0),
            confirmed: AtomicU64::new(u64::MAX),
        })
    }

    /// The settings.
    pub fn config(&self) -> &ShardConfig {
        &self.config
    }

    /// The hash of an object (its namespace or uid) for this shard.
    pub fn hash(&self, namespace: Option<&str>, uid: &str) -> u64 {
        match self.config.by {
            ShardBy::Namespace => ring::fnv1a64(namespace.unwrap_or_default()),
            ShardBy::Uid => ring::fnv1a64(uid),
        }
    }

    /// Whether this replica reconciles the primary (`namespace`, `uid`) now: its hash is held and
    /// the member Lease is fresh, in the term the holding was checked in.
    pub fn holds(&self, namespace: Option<&str>, uid: &str) -> bool {
        self.may_write() && self.holding.load().contains(self.hash(namespace, uid))
    }

    /// Whether writes may go out (the client's write gate in sharded mode): the member Lease is
    /// fresh and has not lapsed since the holding was last checked against the assignment.
    pub fn may_write(&self) -> bool {
        self.lease.may_write() && self.confirmed.load(Ordering::Acquire) == self.lease.term()
    }

    /// What the hash is taken of.
    pub fn by(&self) -> ShardBy {
        self.config.by
    }

    /// How many times the holding changed (caches note the epoch they listed at).
    pub fn epoch(&self) -> u64 {
        *self.changed.borrow()
    }

    /// Whether caches listed at `listed` (the oldest of a reconcile's caches) are fresh enough for
    /// what this replica holds now: listed after its holding last grew. A part taken over is
    /// reconciled only from a list read after the assignment was written, so from caches that
    /// hold the last writes of the replica that gave it up (which wrote them before that).
    pub fn caches_current(&self, listed: u64) -> bool {
        listed >= self.grown.load(Ordering::Acquire)
    }

    /// The epoch of the last growth of its holding (caches listed before it are relisted).
    pub fn grown(&self) -> u64 {
        self.grown.load(Ordering::Acquire)
    }

    /// Whether it has checked its holding against the ring yet (start-up).
    pub fn joined(&self) -> bool {
        self.confirmed.load(Ordering::Acquire) != u64::MAX
    }

    /// Whether an object belongs in this replica's caches: with namespace sharding, a
    /// namespaced object only if its namespace is held; everything else always.
    pub fn caches(&self, namespaced: bool, namespace: Option<&str>) -> bool {
        match self.config.by {
            ShardBy::Namespace if namespaced => self.holding.load().contains(self.hash(namespace, "")),
            _ => true,
        }
    }

    /// Held by a reconcile for as long as it runs (see `drain`).
    pub async fn enter(&self) -> RwLockReadGuard<'_, ()> {
        self.drain.read().await
    }

    /// What it holds now.
    pub fn holding(&self) -> Arc<Ranges> {
        self.holding.load_full()
    }

    /// What the ring assigns it (as last read, less what it is giving up) and it does not hold
    /// now: its Lease lapsed, or it has not confirmed the assignment since. Empty when all is well;
    /// readiness fails while it is not.
    pub fn unheld(&self) -> Ranges {
        let held = if self.may_write() { self.holding() } else { Arc::new(Ranges::empty()) };
        self.assigned.load().minus(&held)
    }

    /// Why readiness fails, if it does: ranges assigned and not held.
    pub fn unready(&self) -> Option<String> {
        let unheld = self.unheld();
        (!unheld.is_empty()).then(|| {
            let why = if !self.lease.may_write() {
                "its member Lease was not renewed within the renew deadline"
            } else {
                "it has not confirmed the assignment since its member Lease lapsed"
            };
            format!(
                "shard member {} is assigned {} ppm of the hash space it does not hold ({}): {why}",
                self.config.member,
                unheld.ppm(),
                unheld.to_annotation()
            )
        })
    }

    /// Told whenever the holding changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The shard selector of the API server for what it holds (namespace sharding only: a
    /// uid selector would slice children away from their owners).
    pub fn selector(&self) -> Option<String> {
        match self.config.by {
            ShardBy::Namespace if self.server_side.load(Ordering::Relaxed) => {
                self.holding.load().selector(self.config.by.field())
            }
            _ => None,
        }
    }

    /// Whether the API server filters (set once at start-up by [`filter::detect`]).
    pub fn set_server_side(&self, on: bool) {
        self.server_side.store(on, Ordering::Relaxed);
    }

    /// Whether the API server filters.
    pub fn server_side(&self) -> bool {
        self.server_side.load(Ordering::Relaxed)
    }

    /// What `/plugins` shows of it.
    pub fn status(&self) -> serde_json::Value {
        let holding = self.holding();
        serde_json::json!({
            "by": match self.config.by { ShardBy::Namespace => "namespace", ShardBy::Uid => "uid" },
            "ring": self.config.ring,
            "member": self.config.member,
            "members": self.members(),
            "holding": holding.to_annotation(),
            "holdingPpm": holding.ppm(),
            "target": self.target.load().to_annotation(),
            "unheldPpm": self.unheld().ppm(),
            "serverSide": self.server_side(),
            "leaseFresh": self.lease.may_write(),
        })
    }

    /// Live members, as last counted.
    pub fn members(&self) -> usize {
        self.members.load(Ordering::Relaxed)
    }

    /// Holds `r` from now on (a grown holding: after the assignment was written).
    fn grow(&self, r: Ranges) {
        if *self.holding.load_full() != r {
            // The caches are stale before the first reconcile can see the new holding.
            let next = self.epoch() + 1;
            self.grown.store(next, Ordering::Release);
            self.holding.store(Arc::new(r));
            self.changed.send_modify(|n| *n = next);
        }
    }

    /// Gives up what is not in `keep`: no new reconcile starts there, and this returns once the
    /// reconciles that were running have ended (before the smaller assignment is written).
    async fn shrink(&self, keep: &Ranges) {
        let now = self.holding.load_full();
        let next = now.intersect(keep);
        if next == *now {
            return;
        }
        self.holding.store(Arc::new(next));
        self.changed.send_modify(|n| *n += 1);
        drop(self.drain.write().await);
    }

    /// Takes part in the ring until `stop`, then leaves it (gives everything up, and says so).
    pub async fn run(self: Arc<Self>, client: kube::Client, stop: tokio_util::sync::CancellationToken) {
        let mut ring = members::Ring::new(client, &self.config.lease.namespace, &self.config.ring);
        let me = self.config.member.clone();
        loop {
            if let Err(e) = self.step(&mut ring).await {
                tracing::warn!(ring = %self.config.ring, "shard ring step failed (retried): {e}");
            }
            // Until the member Lease is first held, look again soon (start-up).
            let pause = if self.confirmed.load(Ordering::Acquire) == u64::MAX {
                Duration::from_millis(200)
            } else {
                self.config.lease.retry_period
            };
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(pause) => {}
            }
        }
        self.leave(&ring, &me).await;
    }

    /// One step towards its target: what [`Shard::run`] does every retry period (public so that
    /// tests can interleave replicas step by step). The holding is derived anew each step from
    /// the assignment, once confirmed in this term of the member Lease (see [`handover`]).
    pub async fn step(&self, ring: &mut members::Ring) -> Result<(), kube::Error> {
        let me = self.config.member.as_str();
        if !self.lease.may_write() {
            // Not renewed within the deadline: hold nothing until it is again.
            self.shrink(&Ranges::empty()).await;
            return Ok(());
        }
        let term = self.lease.term();
        // The assignment before the members: whoever is judged gone below was judged so after
        // this version was read, so a confirmation written since refuses a swap based on it.
        let (assignment, mut rv) = ring.assignment().await?;
        let live = ring.live().await?;
        self.members.store(live.len(), Ordering::Relaxed);
        let assigned = assignment.get(me).cloned().unwrap_or_default();
        let new_term = self.confirmed.load(Ordering::Acquire) != term;
        // Others took something from me (they judged me gone): stop there at once. In a new
        // term, everything: events dropped since the lapse (not held then) come back with the
        // relist that follows the growth below.
        self.shrink(&if new_term { Ranges::empty() } else { assigned.clone() }).await;
        if new_term && !assigned.is_empty() {
            // A new term (a lapse, or start-up): the part read may be being taken by a member
            // that judged this one gone. Write it back first; hold it only if that went through.
            self.assigned.store(Arc::new(assigned.clone()));
            match ring.confirm(&assignment, rv, me).await? {
                Some(v) => rv = Some(v),
                None => return Ok(()),
            }
        }
        self.confirmed.store(term, Ordering::Release);
        for gone in ring.expired().into_iter().filter(|m| !assignment.contains_key(m)) {
            ring.forget(&gone).await;
        }
        let live_names: Vec<String> = live.iter().cloned().collect();
        let points = match self.config.by {
            ShardBy::Namespace => ring.namespace_points().await?,
            ShardBy::Uid => Vec::new(),
        };
        let target = ring::split(&live_names, me, &points);
        self.target.store(Arc::new(target.clone()));
        let plan = handover::plan(me, &target, &assignment, &live);
        // Hold what is assigned and kept (grown back after a lapse, or after a swap that failed
        // on the way back though the API server applied it); give up (drained) what is released.
        let keep = assigned.minus(&plan.release);
        self.assigned.store(Arc::new(keep.clone()));
        self.shrink(&keep).await;
        self.grow(keep);
        if plan.is_empty() {
            return Ok(());
        }
        // Then write; take only once written.
        let next = plan.apply(me, &assignment);
        if ring.swap(&next, rv).await? {
            for m in &plan.forget {
                ring.forget(m).await;
            }
            let mine = next.get(me).cloned().unwrap_or_default();
            tracing::info!(holding = %mine.to_annotation(), members = live.len(), "shard holding changed");
            self.assigned.store(Arc::new(mine.clone()));
            self.grow(mine);
        }
        Ok(())
    }

    /// Leaves the ring: everything given up (drained), then written, so the others take over
    /// at once instead of after the lease duration.
    async fn leave(&self, ring: &members::Ring, me: &str) {
        self.shrink(&Ranges::empty()).await;
        for _ in 0..5 {
            let Ok((assignment, rv)) = ring.assignment().await else { continue };
            if !assignment.contains_key(me) {
                return;
            }
            let mut next = assignment.clone();
            next.remove(me);
            if matches!(ring.swap(&next, rv).await, Ok(true)) {
                tracing::info!("left the shard ring");
                return;
            }
        }
        tracing::warn!("could not leave the shard ring; the others take over when this member's Lease expires");
    }
}

#[cfg(test)]
mod tests;
