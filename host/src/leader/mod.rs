//! Leader election on a coordination.k8s.io Lease (kube-lease-manager): only the leader runs
//! controllers; a standby takes over when the lease expires; a graceful stop releases it at once.

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Election settings.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This instance's identity (pod name + a random suffix).
    pub identity: String,
    /// Lease duration in seconds: how long a dead leader blocks the standby.
    pub duration_secs: u64,
    /// Renew this many seconds before expiry.
    pub grace_secs: u64,
}

/// A running election.
pub struct Election {
    /// `true` while this instance leads.
    pub leading: watch::Receiver<bool>,
    task: JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
}

impl Election {
    /// Joins the election (creates the Lease if needed).
    pub async fn start(client: Client, cfg: &ElectionConfig) -> Result<Self, LeaseManagerError> {
        let manager = LeaseManagerBuilder::new(client, &cfg.name)
            .with_namespace(&cfg.namespace)
            .with_identity(&cfg.identity)
            .with_duration(cfg.duration_secs)
            .with_grace(cfg.grace_secs)
            .with_field_manager("kwop-leader-election")
            .build()
            .await?;
        let (leading, task) = manager.watch().await;
        Ok(Election { leading, task })
    }

    /// Leaves the election, releasing the Lease if held, so a standby takes over at once.
    pub async fn release(self) {
        drop(self.leading);
        match self.task.await {
            Ok(Ok(_)) => tracing::info!("leader lease released"),
            Ok(Err(e)) => tracing::warn!("could not release the leader lease: {e}"),
            Err(e) => tracing::warn!("leader election task failed: {e}"),
        }
    }
}
