//! Leader election on a coordination.k8s.io Lease, with client-go's timing: a lease of 15 s, a
//! renew deadline of 10 s, a try every 2 s. Only the leader runs controllers, and every write of
//! the host passes the [`gate`]: past the renew deadline without a successful renewal this
//! replica stops writing — on its own monotonic clock, even if its election task never ran
//! again (e.g. the process was frozen) — and that is always before another replica can have
//! acquired the lease (it waits a whole lease duration from when it last saw the lease change).
//!
//! Why not kube-lease-manager (used before): it has no renew deadline (a leader whose renewals
//! fail keeps leading until a later successful read shows another holder, i.e. after the standby
//! already leads), it writes the Lease with patches that carry no resourceVersion (a stale
//! replica can overwrite the holder), and it judges expiry by comparing the holder's renewTime
//! with the local wall clock (clock skew between nodes moves the takeover).
//!
//! Floor 5 of 0–15 (`docs/ARCHITECTURE.md`). May use: nothing else in the crate. Used by:
//! `admission`, `cli`, `controller`, `report`, `shard`, `source`.

pub mod gate;
mod lease;

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use lease::{LeaseLock, Try};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Election settings.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This instance's identity (pod name + a random suffix).
    pub identity: String,
    /// How long a replica that stopped renewing blocks the others.
    pub lease_duration: Duration,
    /// How long the leader keeps writing without a successful renewal.
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew.
    pub retry_period: Duration,
}

impl ElectionConfig {
    /// client-go's rule: lease duration > renew deadline > retry period × 1.2.
    pub fn validate(&self) -> Result<(), String> {
        if self.lease_duration <= self.renew_deadline {
            return Err(format!(
                "the leader lease duration ({:?}) must be longer than the renew deadline ({:?})",
                self.lease_duration, self.renew_deadline
            ));
        }
        if self.renew_deadline.as_secs_f64() <= self.retry_period.as_secs_f64() * 1.2 {
            return Err(format!(
                "the leader renew deadline ({:?}) must be longer than 1.2 × the retry period ({:?})",
                self.renew_deadline, self.retry_period
            ));
        }
        Ok(())
    }
}

/// Whether this replica may write now.
pub struct Leadership {
    elected: bool,
    valid_until: Mutex<Option<Instant>>,
    /// Incremented whenever the lease is renewed after having lapsed (or for the first time):
    /// what was decided under an older term may have been taken over meanwhile.
    term: AtomicU64,
}

impl Leadership {
    /// No election: always allowed.
    pub fn always() -> Arc<Self> {
        Arc::new(Leadership { elected: false, valid_until: Mutex::new(None), term: AtomicU64::new(0) })
    }

    /// Allowed only while a renewal younger than the renew deadline holds.
    pub fn elected() -> Arc<Self> {
        Arc::new(Leadership { elected: true, valid_until: Mutex::new(None), term: AtomicU64::new(0) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.valid_until.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True while this replica surely leads.
    pub fn may_write(&self) -> bool {
        !self.elected || self.lock().is_some_and(|t| Instant::now() < t)
    }

    /// The current term (see `term`): unchanged as long as renewals never lapsed.
    pub fn term(&self) -> u64 {
        self.term.load(Ordering::Acquire)
    }

    /// Records a successful renewal, valid until `until` (the election's; tests drive it too).
    pub fn extend(&self, until: Instant) {
        let mut valid = self.lock();
        if !valid.is_some_and(|t| Instant::now() < t) {
            self.term.fetch_add(1, Ordering::AcqRel);
        }
        *valid = Some(until);
    }

    fn revoke(&self) {
        *self.lock() = None;
    }
}

/// A running election.
pub struct Election {
    /// `true` while this instance leads.
    pub leading: watch::Receiver<bool>,
    /// The write gate's view of leadership.
    pub leadership: Arc<Leadership>,
    stop: CancellationToken,
    task: JoinHandle<LeaseLock>,
}

impl Election {
    /// Joins the election.
    pub fn start(client: Client, cfg: ElectionConfig, leadership: Arc<Leadership>) -> Self {
        let api: Api<Lease> = Api::namespaced(client, &cfg.namespace);
        let lock = LeaseLock::new(api, &cfg.name, &cfg.identity, cfg.lease_duration);
        let (tx, leading) = watch::channel(false);
        let stop = CancellationToken::new();
        let task = tokio::spawn(run(lock, cfg, leadership.clone(), tx, stop.clone()));
        Election { leading, leadership, stop, task }
    }

    /// Leaves the election; releases the Lease if held, so a standby takes over at once. Call it
    /// once nothing writes any more.
    pub async fn release(self) {
        self.leadership.revoke();
        self.stop.cancel();
        let Ok(mut lock) = self.task.await else {
            return tracing::warn!("leader election task failed");
        };
        match lock.release().await {
            Ok(true) => tracing::info!("leader lease released"),
            Ok(false) => tracing::info!("leader lease not held; nothing to release"),
            Err(e) => {
                tracing::warn!("could not release the leader lease (the standby takes over when it expires): {e}")
            }
        }
    }
}

/// Jitter of client-go's wait.JitterUntil (factor 1.2), without a random source: spread by
/// identity hash so two replicas started together do not try in lockstep.
fn jittered(d: Duration, identity: &str, round: u32) -> Duration {
    let h = identity.bytes().fold(u32::from(round as u8), |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    d + d.mul_f64(0.2 * f64::from(h % 1000) / 1000.0)
}

async fn run(
    mut lock: LeaseLock,
    cfg: ElectionConfig,
    leadership: Arc<Leadership>,
    tx: watch::Sender<bool>,
    stop: CancellationToken,
) -> LeaseLock {
    let mut round = 0u32;
    let mut leading = false;
    let mut last_holder = String::new();
    loop {
        round = round.wrapping_add(1);
        let attempt = Instant::now();
        // A try that cannot finish before the renew deadline counts as failed.
        let budget = if leading { cfg.renew_deadline.min(cfg.retry_period * 2) } else { cfg.renew_deadline };
        let result = tokio::select! {
            _ = stop.cancelled() => return lock,
            r = tokio::time::timeout(budget, lock.try_acquire_or_renew()) => r,
        };
        match result {
            Ok(Ok(Try::Holding)) => {
                leadership.extend(attempt + cfg.renew_deadline);
                if !leading {
                    leading = true;
                    tracing::info!(identity = %cfg.identity, "acquired the leader lease");
                    let _ = tx.send(true);
                }
            }
            Ok(Ok(Try::HeldBy(holder))) => {
                if leading {
                    tracing::warn!(
                        holder,
                        "the leader lease is held by another replica; stopped writing and stepping down"
                    );
                    leadership.revoke();
                    leading = false;
                    let _ = tx.send(false);
                }
                if holder != last_holder {
                    tracing::info!(holder, "leader lease held by another replica; standing by");
                    last_holder = holder;
                }
            }
            Ok(Err(e)) => tracing::warn!(leading, "leader lease try failed: {e}"),
            Err(_) => tracing::warn!(leading, "leader lease try timed out after {budget:?}"),
        }
        if leading && !leadership.may_write() {
            leading = false;
            tracing::warn!(renew_deadline = ?cfg.renew_deadline, "no successful renewal within the renew deadline; stopped writing and stepping down");
            let _ = tx.send(false);
        }
        let next = if leading { cfg.retry_period } else { jittered(cfg.retry_period, &cfg.identity, round) };
        tokio::select! {
            _ = stop.cancelled() => return lock,
            _ = tokio::time::sleep(next) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_closes_at_the_renew_deadline_on_its_own() {
        let l = Leadership::elected();
        assert!(!l.may_write(), "not before the first acquisition");
        l.extend(Instant::now() + Duration::from_millis(50));
        assert!(l.may_write());
        std::thread::sleep(Duration::from_millis(60));
        assert!(!l.may_write(), "nobody renewed: closed without any task running");
        let term = l.term();
        l.extend(Instant::now() + Duration::from_millis(50));
        assert_eq!(l.term(), term + 1, "renewed after a lapse: a new term");
        l.extend(Instant::now() + Duration::from_millis(50));
        assert_eq!(l.term(), term + 1, "renewed in time: the same term");
        assert!(Leadership::always().may_write());
    }

    #[test]
    fn timings_follow_client_go_rules() {
        let cfg = |l, r, p| ElectionConfig {
            namespace: "n".into(),
            name: "l".into(),
            identity: "i".into(),
            lease_duration: Duration::from_secs(l),
            renew_deadline: Duration::from_secs(r),
            retry_period: Duration::from_secs(p),
        };
        assert!(cfg(15, 10, 2).validate().is_ok());
        assert!(cfg(10, 10, 2).validate().is_err());
        assert!(cfg(15, 2, 2).validate().is_err());
    }
}
