//! Admission of plugin calls: an instance slot of the engine's pool, and the call's memory limit
//! out of the host-wide plugin memory budget. A call that cannot be admitted waits (its deadline
//! has not started yet); what a running call reserved is returned when it ends or is abandoned.
//!
//! The budget is reserved up front at each call's full limit, not as the plugin grows: an
//! instance that grows into a budget another instance already holds could otherwise only be
//! refused half-way through its call, and two growing instances could wait on each other. With
//! the limit reserved before the first instruction runs, the sum of every running instance's
//! memory never exceeds the budget, so plugins alone can never get the pod OOM-killed.

use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The budget is counted in WebAssembly pages (a semaphore counts in `u32`).
const UNIT: usize = 64 << 10;

/// Instance slots and the memory budget.
pub struct Admission {
    instances: Arc<Semaphore>,
    budget: Option<Arc<Semaphore>>,
    budget_bytes: Option<usize>,
    /// Memory each call reserves on top of its limit (its async stack).
    overhead: usize,
}

/// What an admitted call holds until it ends.
pub struct Admitted {
    _instance: OwnedSemaphorePermit,
    _memory: Option<OwnedSemaphorePermit>,
    /// Bytes reserved from the budget.
    pub reserved: usize,
}

/// A call whose limit can never fit in the budget.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("a memory limit of {limit} bytes (+{overhead} bytes of stack) does not fit in the host's plugin memory budget of {budget} bytes (--plugin-memory-budget)")]
pub struct OverBudget {
    /// The call's memory limit.
    pub limit: usize,
    /// The stack reserved on top.
    pub overhead: usize,
    /// The budget.
    pub budget: usize,
}

impl Admission {
    /// `instances` slots; `budget_bytes` of plugin memory (`None`: unbounded).
    pub fn new(instances: usize, budget_bytes: Option<usize>, overhead: usize) -> Self {
        let budget = budget_bytes.map(|b| Arc::new(Semaphore::new((b / UNIT).min(Semaphore::MAX_PERMITS))));
        Admission { instances: Arc::new(Semaphore::new(instances)), budget, budget_bytes, overhead }
    }

    /// The budget in bytes, if any.
    pub fn budget_bytes(&self) -> Option<usize> {
        self.budget_bytes
    }

    /// Bytes of the budget in use now.
    pub fn reserved_bytes(&self) -> usize {
        match (&self.budget, self.budget_bytes) {
            (Some(s), Some(b)) => (b / UNIT).saturating_sub(s.available_permits()) * UNIT,
            _ => 0,
        }
    }

    /// Whether a call with this memory limit can ever be admitted.
    pub fn check(&self, memory_bytes: usize) -> Result<(), OverBudget> {
        match self.budget_bytes {
            Some(budget) if units(memory_bytes + self.overhead) > budget / UNIT => {
                Err(OverBudget { limit: memory_bytes, overhead: self.overhead, budget })
            }
            _ => Ok(()),
        }
    }

    /// Waits for an instance slot and for `memory_bytes` (plus the stack) of the budget.
    pub async fn admit(&self, memory_bytes: usize) -> Result<Admitted, OverBudget> {
        self.check(memory_bytes)?;
        let closed = || OverBudget { limit: memory_bytes, overhead: self.overhead, budget: 0 };
        // Memory first: a call waiting for memory must not sit on an instance slot meanwhile.
        let (memory, reserved) = match &self.budget {
            Some(b) => {
                let n = units(memory_bytes + self.overhead);
                let p = b.clone().acquire_many_owned(n as u32).await.map_err(|_| closed())?;
                (Some(p), n * UNIT)
            }
            None => (None, 0),
        };
        let instance = self.instances.clone().acquire_owned().await.map_err(|_| closed())?;
        Ok(Admitted { _instance: instance, _memory: memory, reserved })
    }
}

fn units(bytes: usize) -> usize {
    bytes.div_ceil(UNIT).min(u32::MAX as usize)
}

/// The default plugin memory budget: half of the container's memory limit (cgroup v2
/// `memory.max`, or v1 `memory.limit_in_bytes`), else half of the machine's memory. The other
/// half is for the host itself: caches, compiled code, buffers.
pub fn default_budget() -> Option<usize> {
    let cgroup = ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .find_map(|s| s.trim().parse::<u64>().ok())
        // cgroup v1 reports "no limit" as a huge number.
        .filter(|&b| b < (1 << 60));
    let total = cgroup.or_else(|| {
        let info = std::fs::read_to_string("/proc/meminfo").ok()?;
        let kb = info.lines().find_map(|l| l.strip_prefix("MemTotal:"))?.trim().trim_end_matches("kB").trim();
        kb.parse::<u64>().ok().map(|k| k * 1024)
    })?;
    usize::try_from(total / 2).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn calls_wait_for_the_budget_and_get_it_back_when_they_end() {
        let a = Arc::new(Admission::new(8, Some(3 << 20), 0));
        let first = a.admit(2 << 20).await.expect("fits");
        assert_eq!(a.reserved_bytes(), 2 << 20);
        // A second 2 MiB call does not fit next to the first: it waits.
        let waiting = tokio::spawn({
            let a = a.clone();
            async move { a.admit(2 << 20).await.map(|p| p.reserved) }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "admitted past the budget");
        drop(first);
        assert_eq!(waiting.await.ok().and_then(Result::ok), Some(2 << 20));
        assert!(a.check(4 << 20).is_err(), "a limit over the whole budget can never run");
    }

    #[tokio::test]
    async fn instance_slots_bound_calls_without_a_budget() {
        let a = Arc::new(Admission::new(1, None, 0));
        let held = a.admit(1 << 30).await.expect("no budget");
        let w = tokio::spawn({
            let a = a.clone();
            async move { a.admit(1).await.is_ok() }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!w.is_finished());
        drop(held);
        assert_eq!(w.await.ok(), Some(true));
    }
}
