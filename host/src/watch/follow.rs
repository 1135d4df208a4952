//! What follows a change of this replica's holding in the shard ring (`--sharding`): the pool
//! relists (see `Pool::reshard`), and the metrics and `/plugins` say what it holds and caches.

use super::Pool;
use crate::shard::Shard;
use crate::telemetry::{Health, Metrics};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Runs until `stop`: on every change of the holding, relists; every second, reports.
pub async fn run(
    shard: Arc<Shard>,
    pool: Arc<Pool>,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    stop: CancellationToken,
) {
    let mut changed = shard.subscribe();
    let mut grown = shard.grown();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            r = changed.changed() => {
                if r.is_err() {
                    return;
                }
                // Grown since (changes coalesce: a shrink and a growth back to the same part
                // still relist).
                let now = shard.grown();
                pool.reshard(now != grown);
                grown = now;
                report(&shard, &pool, &metrics, &health);
            }
            _ = tick.tick() => report(&shard, &pool, &metrics, &health),
        }
    }
}

fn report(shard: &Shard, pool: &Pool, metrics: &Metrics, health: &Health) {
    metrics.shard_range_ppm.set(shard.holding().ppm() as i64);
    metrics.shard_unheld_ppm.set(shard.unheld().ppm() as i64);
    metrics.shard_members.set(shard.members() as i64);
    let mut status = shard.status();
    status["cachedObjects"] = serde_json::json!(pool.counts());
    health.set_shard(status);
}
