//! The calls into plugins running now: what `/plugins` lists, what the in-flight and stuck
//! metrics count, and what `/healthz` checks.
//!
//! A call is registered when it is admitted and leaves the registry when its task really ends.
//! A call whose task outlives its deadline plus [`CALL_GRACE`] is *stuck*: the host has already
//! freed the worker and the permits it held (and stopped waiting for it), but something inside
//! the task still runs. No plugin can cause that (see `plugin::wasi`: nothing a plugin calls can
//! block); it would be a host bug, and `/healthz` fails so the kubelet restarts the container.

use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long past its deadline the host waits for a call before abandoning it.
pub const CALL_GRACE: Duration = Duration::from_millis(500);

struct Call {
    plugin: Arc<str>,
    object: String,
    started: Instant,
    deadline: Duration,
    abandoned: bool,
}

/// A call as `/plugins` shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct CallView {
    /// Plugin name.
    pub plugin: String,
    /// `namespace/name`, or `-` for `info()`.
    pub object: String,
    /// Milliseconds since it started.
    pub age_ms: u64,
    /// Its deadline in milliseconds.
    pub deadline_ms: u64,
    /// The host stopped waiting for it (deadline + grace passed, or its controller stopped).
    pub abandoned: bool,
    /// Still running past its deadline plus the grace.
    pub stuck: bool,
}

/// In-flight and stuck calls of one plugin.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Counts {
    /// Calls running now.
    pub in_flight: usize,
    /// Of those, calls past their deadline plus the grace.
    pub stuck: usize,
}

/// The registry.
#[derive(Default)]
pub struct InFlight {
    next: AtomicU64,
    calls: Mutex<HashMap<u64, Call>>,
}

/// Keeps a call registered; dropping it (when the call's task ends) removes it.
pub struct Registration {
    id: u64,
    registry: Arc<InFlight>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.id);
    }
}

impl Registration {
    /// The host stopped waiting for this call.
    pub fn abandon(&self) {
        if let Some(c) = self.registry.lock().get_mut(&self.id) {
            c.abandoned = true;
        }
    }

    /// A handle to mark the call abandoned from outside its task.
    pub fn handle(&self) -> CallHandle {
        CallHandle { id: self.id, registry: self.registry.clone() }
    }
}

/// Marks a registered call abandoned without owning its registration.
#[derive(Clone)]
pub struct CallHandle {
    id: u64,
    registry: Arc<InFlight>,
}

impl CallHandle {
    /// The host stopped waiting for this call.
    pub fn abandon(&self) {
        if let Some(c) = self.registry.lock().get_mut(&self.id) {
            c.abandoned = true;
        }
    }
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Call>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a call starting now.
    pub fn register(self: &Arc<Self>, plugin: Arc<str>, object: String, deadline: Duration) -> Registration {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let call = Call { plugin, object, started: Instant::now(), deadline, abandoned: false };
        self.lock().insert(id, call);
        Registration { id, registry: self.clone() }
    }

    fn view(c: &Call, now: Instant) -> CallView {
        let age = now.saturating_duration_since(c.started);
        CallView {
            plugin: c.plugin.to_string(),
            object: c.object.clone(),
            age_ms: age.as_millis() as u64,
            deadline_ms: c.deadline.as_millis() as u64,
            abandoned: c.abandoned,
            stuck: age > c.deadline + CALL_GRACE,
        }
    }

    /// Every call running now, oldest first.
    pub fn calls(&self) -> Vec<CallView> {
        let now = Instant::now();
        let mut v: Vec<CallView> = self.lock().values().map(|c| Self::view(c, now)).collect();
        v.sort_by_key(|c| std::cmp::Reverse(c.age_ms));
        v
    }

    /// Calls running past their deadline plus the grace.
    pub fn stuck(&self) -> Vec<CallView> {
        self.calls().into_iter().filter(|c| c.stuck).collect()
    }

    /// In-flight and stuck counts by plugin.
    pub fn counts(&self) -> BTreeMap<String, Counts> {
        let mut m: BTreeMap<String, Counts> = BTreeMap::new();
        for c in self.calls() {
            let e = m.entry(c.plugin).or_default();
            e.in_flight += 1;
            e.stuck += usize::from(c.stuck);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_past_its_deadline_and_grace_is_stuck_until_its_task_ends() {
        let r = Arc::new(InFlight::default());
        let quick = r.register("p".into(), "ns/a".into(), Duration::from_secs(60));
        let slow = r.register("p".into(), "ns/b".into(), Duration::ZERO);
        std::thread::sleep(CALL_GRACE + Duration::from_millis(20));
        slow.abandon();
        let stuck = r.stuck();
        assert_eq!(stuck.len(), 1);
        assert_eq!((stuck[0].object.as_str(), stuck[0].abandoned), ("ns/b", true));
        assert_eq!(r.counts().get("p"), Some(&Counts { in_flight: 2, stuck: 1 }));
        drop(slow);
        assert!(r.stuck().is_empty(), "an ended call is neither in flight nor stuck");
        drop(quick);
        assert!(r.calls().is_empty());
    }
}
