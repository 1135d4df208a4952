//! Re-queues many keys at a bounded rate (after a swap, at each resync, after a relist).
//!
//! A new pass does not restart from the beginning: keys still waiting keep their place and only
//! keys not already waiting join at the end. So when a pass over a large store takes longer than
//! the resync period, the next pass cannot starve the tail: every key is re-queued within one
//! pass's time of being asked for.

use super::queue::Queue;
use std::collections::{HashSet, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How often the pacer hands keys to the queue.
const TICK: Duration = Duration::from_millis(10);

struct Waiting<K> {
    order: VecDeque<K>,
    set: HashSet<K>,
}

/// Keys waiting to be re-queued, drained by [`Pacer::run`].
pub(crate) struct Pacer<K> {
    waiting: Mutex<Waiting<K>>,
    notify: Notify,
    per_tick: usize,
}

impl<K: Clone + Eq + Hash + Ord> Pacer<K> {
    /// A pacer handing out `rate` keys per second.
    pub(crate) fn new(rate: f64) -> Self {
        let per_tick = (rate * TICK.as_secs_f64()).ceil().max(1.0) as usize;
        Pacer {
            waiting: Mutex::new(Waiting { order: VecDeque::new(), set: HashSet::new() }),
            notify: Notify::new(),
            per_tick,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting<K>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks for every key of `keys` to be re-queued (those already waiting keep their place).
    pub(crate) fn push_all(&self, keys: impl IntoIterator<Item = K>) {
        let mut w = self.lock();
        for k in keys {
            if w.set.insert(k.clone()) {
                w.order.push_back(k);
            }
        }
        drop(w);
        self.notify.notify_one();
    }

    /// Keys waiting.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().order.len()
    }

    /// Hands waiting keys to `queue` at the pacer's rate until `stop`.
    pub(crate) async fn run(&self, queue: &Queue<K>, stop: &CancellationToken) {
        let mut tick = tokio::time::interval(TICK);
        loop {
            let batch: Vec<K> = {
                let mut w = self.lock();
                let n = self.per_tick.min(w.order.len());
                let batch: Vec<K> = w.order.drain(..n).collect();
                batch.iter().for_each(|k| {
                    w.set.remove(k);
                });
                batch
            };
            if batch.is_empty() {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = self.notify.notified() => continue,
                }
            }
            batch.into_iter().for_each(|k| queue.add(k));
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::queue::RateLimit;
    use std::sync::Arc;

    #[tokio::test(start_paused = true)]
    async fn passes_longer_than_the_period_still_reach_the_tail() {
        // 1 000 keys at 100/s: a pass takes 10 s; new passes are asked for every 3 s.
        let (pacer, queue) = (Arc::new(Pacer::new(100.0)), Arc::new(Queue::new(RateLimit::default())));
        let stop = CancellationToken::new();
        let runner = tokio::spawn({
            let (p, q, s) = (pacer.clone(), queue.clone(), stop.clone());
            async move { p.run(&q, &s).await }
        });
        let keys: Vec<u32> = (0..1000).collect();
        let mut seen = HashSet::new();
        let drain = |seen: &mut HashSet<u32>| {
            while !queue.is_empty() {
                let k = futures::FutureExt::now_or_never(queue.get()).flatten();
                let Some(k) = k else { break };
                queue.done(&k);
                seen.insert(k);
            }
        };
        for _ in 0..4 {
            pacer.push_all(keys.iter().copied());
            for _ in 0..30 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                drain(&mut seen);
            }
        }
        assert_eq!(seen.len(), 1000, "every key was re-queued, the tail included");
        assert!(pacer.len() < 1000, "a new pass does not duplicate waiting keys");
        stop.cancel();
        let _ = runner.await;
    }
}
