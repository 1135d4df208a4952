//! `kwop run --sharding`: sharing the primaries among replicas — the flags, and this
//! replica's part in the ring from start-up to leaving it.

use crate::leader::{Election, ElectionConfig, Leadership};
use crate::shard::{members, Shard, ShardBy, ShardConfig};
use crate::telemetry::{Health, Metrics};
use crate::watch::Pool;
use clap::Args;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Sharding settings of `kwop run`.
#[derive(Debug, Clone, Args)]
pub struct ShardArgs {
    /// Share the primaries among every replica running with the same --shard-ring, each
    /// reconciling its own part of the 64-bit FNV-1a hash space (as the API server's sharded
    /// list and watch computes it): by `namespace` (a primary and its children land together,
    /// and each replica caches only its namespaces — sliced by the API server when its
    /// ShardedListAndWatch feature gate is on) or by `uid` (even spread whatever the namespaces,
    /// but every replica caches everything: for plugins whose children are found by owner only).
    /// Each replica holds a Lease `kwop-shard.RING.MEMBER` in the system namespace, timed by
    /// --leader-lease-duration/-renew-deadline/-retry-period; a leader (--leader-elect is implied)
    /// still writes what is written once: ReconcilerPlugin status, the webhook configuration.
    #[arg(long, value_name = "namespace|uid", value_parser = parse_by)]
    pub sharding: Option<ShardBy>,
    /// The ring's name: replicas with the same ring share the work (one ring per installation).
    #[arg(long, default_value = "kwop", value_parser = ring_name)]
    pub shard_ring: String,
}

fn parse_by(s: &str) -> Result<ShardBy, String> {
    match s {
        "namespace" => Ok(ShardBy::Namespace),
        "uid" => Ok(ShardBy::Uid),
        other => Err(format!("{other:?} is not namespace or uid")),
    }
}

fn ring_name(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 40
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!("{s:?}: a ring name is 1-40 lowercase letters, digits or '-', starting and ending alphanumeric"))
    }
}

impl ShardArgs {
    /// The shard of this replica, if sharded: its member Lease in the namespace of the leader's
    /// `election`, for the same identity and timed alike.
    pub fn config(&self, election: &ElectionConfig) -> Option<ShardConfig> {
        self.sharding.map(|by| {
            let member = members::member_name(&election.identity);
            ShardConfig {
                by,
                ring: self.shard_ring.clone(),
                lease: ElectionConfig { name: members::member_lease(&self.shard_ring, &member), ..election.clone() },
                member,
            }
        })
    }
}

/// This replica's part in the ring.
pub(super) struct Sharding {
    /// The shard (the write gate's authority, and what controllers ask).
    pub shard: Arc<Shard>,
    lease: Arc<Leadership>,
    election: Option<Election>,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Sharding {
    /// Before the clients are built: the shard, holding nothing.
    pub fn new(config: ShardConfig) -> Self {
        let lease = Leadership::elected();
        Sharding {
            shard: Shard::new(config, lease.clone()),
            lease,
            election: None,
            stop: CancellationToken::new(),
            tasks: Vec::new(),
        }
    }

    /// Joins the ring before any watch starts: learns whether the API server slices watches,
    /// holds the member Lease, and follows the ring. `lease_client` has no write gate.
    pub async fn start(
        &mut self,
        lease_client: kube::Client,
        pool: Arc<Pool>,
        metrics: Arc<Metrics>,
        health: Arc<Health>,
    ) {
        let cfg = self.shard.config().clone();
        let server_side =
            cfg.by == ShardBy::Namespace && crate::shard::filter::detect(&lease_client, &cfg.lease.namespace).await;
        self.shard.set_server_side(server_side);
        let how = match (cfg.by, server_side) {
            (ShardBy::Uid, _) => "by uid: every replica watches and caches everything, reconciles its part",
            (ShardBy::Namespace, true) => {
                "by namespace: the API server slices each namespaced watch (ShardedListAndWatch is on)"
            }
            (ShardBy::Namespace, false) => {
                "by namespace: the API server does not slice watches (ShardedListAndWatch is off), so each replica drops the others' objects itself"
            }
        };
        tracing::info!(ring = %cfg.ring, lease = %format!("{}/{}", cfg.lease.namespace, cfg.lease.name), "sharding {how}");
        self.election = Some(Election::start(lease_client.clone(), cfg.lease.clone(), self.lease.clone()));
        self.tasks.push(tokio::spawn(self.shard.clone().run(lease_client, self.stop.clone())));
        // Watches started before the first look at the ring would list everything once more.
        let joining = tokio::time::Instant::now();
        while !self.shard.joined() && joining.elapsed() < cfg.lease.renew_deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        health.attach_shard(self.shard.clone());
        self.tasks.push(tokio::spawn(crate::watch::follow::run(
            self.shard.clone(),
            pool,
            metrics,
            health,
            self.stop.clone(),
        )));
    }

    /// Leaves the ring: gives everything up (in-flight reconciles finish first, for up to
    /// `grace`) and says so in the assignment, so the others take over at once; then releases
    /// and deletes the member Lease.
    pub async fn leave(mut self, lease_client: kube::Client, grace: Duration) {
        self.stop.cancel();
        for t in self.tasks.drain(..) {
            if tokio::time::timeout(grace + Duration::from_secs(2), t).await.is_err() {
                tracing::warn!("could not leave the shard ring in time; the others take over when its Lease expires");
            }
        }
        if let Some(e) = self.election.take() {
            if tokio::time::timeout(Duration::from_secs(3), e.release()).await.is_err() {
                tracing::warn!("could not release the shard member Lease within 3s");
            }
        }
        let cfg = self.shard.config();
        let ring = members::Ring::new(lease_client, &cfg.lease.namespace, &cfg.ring);
        ring.forget(&cfg.member).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_names_are_checked() {
        assert!(ring_name("kwop").is_ok());
        assert!(ring_name("Kwop").is_err());
        assert!(ring_name("a.b").is_err());
        assert!(ring_name("").is_err());
        assert_eq!(parse_by("uid"), Ok(ShardBy::Uid));
        assert!(parse_by("name").is_err());
    }
}
