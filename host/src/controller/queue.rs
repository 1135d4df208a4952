//! The work queue: client-go's semantics, in tokio.
//!
//! - a key is queued at most once (`dirty`), and never handed to two workers at once
//!   (`processing`): a key added while being processed is re-queued when `done` is called;
//! - delayed adds keep only the earliest due time per key, as one entry per key (a key delayed,
//!   added and delayed again over and over does not pile up entries);
//! - failures back off per key (5 ms · 2ⁿ, capped at 1000 s) and, together, through a token
//!   bucket (50/s, burst 300) — the larger delay wins, as in `DefaultControllerRateLimiter`.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Backoff settings.
#[derive(Debug, Clone)]
pub struct RateLimit {
    /// First retry delay.
    pub base: Duration,
    /// Longest per-key delay.
    pub max: Duration,
    /// Overall retry rate.
    pub qps: f64,
    /// Overall retry burst.
    pub burst: f64,
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit { base: Duration::from_millis(5), max: Duration::from_secs(1000), qps: 50.0, burst: 300.0 }
    }
}

struct Bucket {
    tokens: f64,
    last: Instant,
}

struct State<K> {
    ready: VecDeque<K>,
    dirty: HashSet<K>,
    processing: HashSet<K>,
    /// Delayed keys by due time (and a sequence number, for keys due at the same instant).
    delayed: BTreeMap<(Instant, u64), K>,
    due: HashMap<K, (Instant, u64)>,
    failures: HashMap<K, u32>,
    /// When each ready key became ready (the queue wait of its next reconcile).
    readied: HashMap<K, Instant>,
    bucket: Bucket,
    seq: u64,
    shutdown: bool,
}

/// A deduplicating, delaying, rate-limited work queue.
pub struct Queue<K> {
    state: Mutex<State<K>>,
    notify: Notify,
    limit: RateLimit,
}

impl<K: Clone + Eq + Hash + Ord> Queue<K> {
    /// An empty queue.
    pub fn new(limit: RateLimit) -> Self {
        Queue {
            state: Mutex::new(State {
                ready: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                delayed: BTreeMap::new(),
                due: HashMap::new(),
                failures: HashMap::new(),
                readied: HashMap::new(),
                bucket: Bucket { tokens: limit.burst, last: Instant::now() },
                seq: 0,
                shutdown: false,
            }),
            notify: Notify::new(),
            limit,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        // A worker that panicked while holding the lock leaves consistent-enough state behind
        // (every operation is a few collection updates); keep serving.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn undelay(s: &mut State<K>, key: &K) {
        if let Some(at) = s.due.remove(key) {
            s.delayed.remove(&at);
        }
    }

    fn add_locked(&self, s: &mut State<K>, key: K) {
        if s.shutdown || !s.dirty.insert(key.clone()) {
            return;
        }
        Self::undelay(s, &key);
        if !s.processing.contains(&key) {
            s.readied.insert(key.clone(), Instant::now());
            s.ready.push_back(key);
            self.notify.notify_one();
        }
    }

    /// Queues a key now.
    pub fn add(&self, key: K) {
        let mut s = self.lock();
        self.add_locked(&mut s, key);
    }

    /// Queues a key after a delay (the earliest pending delay wins).
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let mut s = self.lock();
        if s.shutdown || s.dirty.contains(&key) {
            return;
        }
        let at = Instant::now() + delay;
        if s.due.get(&key).is_some_and(|&(t, _)| t <= at) {
            return;
        }
        Self::undelay(&mut s, &key);
        s.seq += 1;
        let seq = s.seq;
        s.due.insert(key.clone(), (at, seq));
        s.delayed.insert((at, seq), key);
        // A waiting worker may need to wake earlier than it planned.
        self.notify.notify_one();
    }

    /// Queues a key after its backoff; returns the delay chosen.
    pub fn add_rate_limited(&self, key: K) -> Duration {
        let delay = {
            let mut s = self.lock();
            let n = s.failures.entry(key.clone()).or_insert(0);
            let exp = self.limit.base.saturating_mul(1u32 << (*n).min(30)).min(self.limit.max);
            *n = n.saturating_add(1);
            let now = Instant::now();
            let b = &mut s.bucket;
            b.tokens = (b.tokens + now.duration_since(b.last).as_secs_f64() * self.limit.qps).min(self.limit.burst);
            b.last = now;
            b.tokens -= 1.0;
            let bucket =
                if b.tokens >= 0.0 { Duration::ZERO } else { Duration::from_secs_f64(-b.tokens / self.limit.qps) };
            exp.max(bucket)
        };
        self.add_after(key, delay);
        delay
    }

    /// Forgets a key's failures (after a success).
    pub fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// How many times a key has failed in a row.
    pub fn failures(&self, key: &K) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// Drops everything pending for a key (e.g. its object was deleted).
    pub fn remove(&self, key: &K) {
        let mut s = self.lock();
        s.failures.remove(key);
        Self::undelay(&mut s, key);
        if s.dirty.remove(key) {
            s.ready.retain(|k| k != key);
            s.readied.remove(key);
        }
    }

    /// Waits for the next key; `None` once the queue is shut down.
    pub async fn get(&self) -> Option<K> {
        self.get_waited().await.map(|(k, _)| k)
    }

    /// Waits for the next key, with how long it waited ready (behind others or the workers).
    pub async fn get_waited(&self) -> Option<(K, Duration)> {
        loop {
            let notified = self.notify.notified();
            let next_due = {
                let mut s = self.lock();
                if s.shutdown {
                    return None;
                }
                let now = Instant::now();
                while let Some(entry) = s.delayed.first_entry() {
                    if entry.key().0 > now {
                        break;
                    }
                    let key = entry.remove();
                    s.due.remove(&key);
                    self.add_locked(&mut s, key);
                }
                if let Some(key) = s.ready.pop_front() {
                    s.dirty.remove(&key);
                    let waited = s.readied.remove(&key).map(|t| now.saturating_duration_since(t)).unwrap_or_default();
                    s.processing.insert(key.clone());
                    // Other workers may still have work.
                    if !s.ready.is_empty() {
                        self.notify.notify_one();
                    }
                    return Some((key, waited));
                }
                s.delayed.keys().next().map(|(at, _)| *at)
            };
            match next_due {
                Some(at) => {
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Marks a key finished; if it was added meanwhile, it is queued again.
    pub fn done(&self, key: &K) {
        let mut s = self.lock();
        s.processing.remove(key);
        if s.dirty.contains(key) && !s.shutdown {
            s.readied.insert(key.clone(), Instant::now());
            s.ready.push_back(key.clone());
            self.notify.notify_one();
        }
    }

    /// Keys waiting (ready + delayed), for the queue-depth metric.
    pub fn len(&self) -> usize {
        let s = self.lock();
        s.ready.len() + s.due.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops handing out keys; workers see `None`.
    pub fn shutdown(&self) {
        self.lock().shutdown = true;
        self.notify.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q() -> Queue<&'static str> {
        Queue::new(RateLimit::default())
    }

    #[tokio::test]
    async fn a_key_is_queued_once_and_never_processed_twice_at_once() {
        let q = q();
        q.add("a");
        q.add("a");
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await, Some("a"));
        q.add("a"); // while processing: held back
        q.add("b");
        assert_eq!(q.get().await, Some("b"));
        q.done(&"b");
        assert_eq!(q.len(), 0, "a is dirty but still processing");
        q.done(&"a");
        assert_eq!(q.get().await, Some("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_keys_come_out_when_due_and_earliest_wins() {
        let q = q();
        q.add_after("a", Duration::from_secs(10));
        q.add_after("a", Duration::from_secs(1));
        q.add_after("a", Duration::from_secs(5));
        let t = Instant::now();
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(t.elapsed().as_secs(), 1);
        q.done(&"a");
        // The superseded 5 s and 10 s entries do not bring it back.
        let waited = tokio::time::timeout(Duration::from_secs(20), q.get()).await;
        assert!(waited.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_exponentially_up_to_the_cap_and_forget_resets() {
        let q = q();
        let delays: Vec<_> = (0..4).map(|_| q.add_rate_limited("a")).collect();
        assert_eq!(delays, [5, 10, 20, 40].map(Duration::from_millis));
        for _ in 0..40 {
            q.add_rate_limited("a");
        }
        assert_eq!(q.add_rate_limited("a"), Duration::from_secs(1000));
        q.forget(&"a");
        assert_eq!(q.add_rate_limited("a"), Duration::from_millis(5));
    }

    #[tokio::test(start_paused = true)]
    async fn the_bucket_spreads_a_burst_of_failures() {
        let q: Queue<u32> = Queue::new(RateLimit { burst: 2.0, qps: 10.0, ..RateLimit::default() });
        let d: Vec<_> = (0..4).map(|k| q.add_rate_limited(k)).collect();
        assert_eq!(d[0], Duration::from_millis(5));
        assert_eq!(d[1], Duration::from_millis(5));
        assert_eq!(d[2], Duration::from_millis(100));
        assert_eq!(d[3], Duration::from_millis(200));
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_delayed_added_and_delayed_again_keeps_one_entry() {
        let q = q();
        for _ in 0..10_000 {
            q.add_after("a", Duration::from_secs(3600));
            q.add_after("a", Duration::from_secs(60));
            q.add("a");
            assert_eq!(q.get().await, Some("a"));
            q.done(&"a");
        }
        q.add_after("a", Duration::from_secs(3600));
        let s = q.lock();
        assert_eq!((s.delayed.len(), s.due.len()), (1, 1), "one entry per key, not one per add_after");
    }

    #[tokio::test]
    async fn shutdown_releases_waiting_workers() {
        let q = std::sync::Arc::new(q());
        let w = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        q.shutdown();
        assert_eq!(w.await.ok().flatten(), None);
    }
}
