//! The epoch ticker: the thread that advances wasmtime's epoch, so a running guest yields and its
//! deadline is checked (see `sandbox::new_store`). It ticks only while a store exists.
//!
//! An idle host used to wake every tick (200 times a second) for nothing: 10 % of its CPU in the
//! steady state (BENCHMARKS.md). The invariant that keeps deadlines enforced: every store holds a
//! [`Ticking`] for as long as it exists, and the thread ticks whenever one is held. Guest code
//! runs only inside a store, so it never runs unticked. The first [`Ticking`] wakes the thread
//! (`unpark` keeps its token if it comes before the `park`, so no wake-up is lost); the thread
//! parks again only after it saw none held.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Duration;
use wasmtime::EngineWeak;

/// Stores alive now, and the ticking thread.
#[derive(Debug, Default)]
pub struct Ticker {
    live: AtomicUsize,
    ticks: AtomicU64,
    thread: OnceLock<Thread>,
}

/// Held by each store: the ticker runs while any is held.
#[derive(Debug)]
pub struct Ticking(Arc<Ticker>);

impl Drop for Ticking {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Ticker {
    /// Starts the thread, which ends with the engine.
    pub fn start(engine: EngineWeak, tick: Duration) -> std::io::Result<Arc<Ticker>> {
        let ticker = Arc::new(Ticker::default());
        let me = ticker.clone();
        let handle = std::thread::Builder::new().name("kwop-epoch".into()).spawn(move || loop {
            if me.live.load(Ordering::Acquire) == 0 {
                // The timeout only bounds how long a dropped engine keeps this thread.
                std::thread::park_timeout(Duration::from_secs(5));
                if engine.upgrade().is_none() {
                    return;
                }
                continue;
            }
            std::thread::sleep(tick);
            match engine.upgrade() {
                Some(e) => {
                    e.increment_epoch();
                    me.ticks.fetch_add(1, Ordering::Relaxed);
                }
                None => return,
            }
        })?;
        let _ = ticker.thread.set(handle.thread().clone());
        Ok(ticker)
    }

    /// A ticker whose thread never runs (fault injection: deadlines not enforced).
    pub fn stopped() -> Arc<Ticker> {
        Arc::new(Ticker::default())
    }

    /// Keeps the ticker running until the result is dropped.
    pub fn hold(self: &Arc<Self>) -> Ticking {
        if self.live.fetch_add(1, Ordering::AcqRel) == 0 {
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
        Ticking(self.clone())
    }

    /// Ticks so far.
    pub fn ticks(&self) -> u64 {
        self.ticks.load(Ordering::Relaxed)
    }

    /// Stores holding the ticker now.
    pub fn held(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_ticks_while_a_store_is_held_and_not_otherwise() {
        let mut c = wasmtime::Config::new();
        c.epoch_interruption(true);
        let e = wasmtime::Engine::new(&c).unwrap_or_else(|e| panic!("{e}"));
        let t = Ticker::start(e.weak(), Duration::from_millis(1)).unwrap_or_else(|e| panic!("{e}"));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(t.ticks(), 0, "ticked with no store");
        let a = t.hold();
        let b = t.hold();
        assert_eq!(t.held(), 2);
        std::thread::sleep(Duration::from_millis(50));
        assert!(t.ticks() > 0, "no tick while held");
        drop(a);
        assert_eq!(t.held(), 1);
        drop(b);
        assert_eq!(t.held(), 0);
        std::thread::sleep(Duration::from_millis(20));
        let parked = t.ticks();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(t.ticks(), parked, "ticked after the last store went");
        // Held again: it wakes at once (the unpark is not lost).
        let _c = t.hold();
        std::thread::sleep(Duration::from_millis(50));
        assert!(t.ticks() > parked, "not woken by a new store");
    }
}
