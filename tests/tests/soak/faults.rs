//! The faults the soak injects, each as it happens to an installation: a replica killed, frozen
//! (past its renew deadline but under its Lease, or past its Lease), restarted; kube-apiserver or
//! etcd restarted; one replica cut off from the API server; guest-foo hot-swapped between v1 and
//! v2; its grants narrowed to half the namespaces and widened back; the registry down while a
//! swap needs it.

use super::checks::{Revoked, NARROWING_REACHES};
use super::world::{foo_grants, World, LEASE, RENEW_DEADLINE, SLOTS};
use k8s_openapi::jiff::Timestamp;
use kwop_tests::wait;
use std::time::Duration;

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Kill,
    FreezeRenew,
    FreezeLease,
    Restart,
    ApiServer,
    Etcd,
    Cut,
    Swap,
    Grants,
    RegistryOutage,
}

/// Faults of the cluster or the replicas (one per round).
pub const INFRA: [Kind; 7] =
    [Kind::Kill, Kind::FreezeRenew, Kind::FreezeLease, Kind::Restart, Kind::ApiServer, Kind::Etcd, Kind::Cut];
/// Faults of the plugins (one per round, overlapping its infrastructure fault).
pub const PLUGIN: [Kind; 3] = [Kind::Swap, Kind::Grants, Kind::RegistryOutage];

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Kill => "replica killed (SIGKILL), restarted",
            Kind::FreezeRenew => "replica frozen past renew deadline",
            Kind::FreezeLease => "replica frozen past its Lease",
            Kind::Restart => "replica restarted (SIGTERM)",
            Kind::ApiServer => "kube-apiserver restarted",
            Kind::Etcd => "etcd restarted",
            Kind::Cut => "replica cut off from the API server",
            Kind::Swap => "guest-foo hot-swapped v1<->v2",
            Kind::Grants => "guest-foo grants narrowed, widened",
            Kind::RegistryOutage => "registry outage during a swap",
        }
    }
}

/// A plugin fault in progress, healed after the round's infrastructure fault.
pub struct Open {
    kind: Kind,
    /// Grants narrowed: the namespaces revoked, since when (wall clock).
    revoked: Option<(Vec<String>, Timestamp)>,
}

/// Swaps guest-foo to the other version.
async fn swap(w: &mut World) -> anyhow::Result<()> {
    let next = if w.version == "v1" { "v2" } else { "v1" };
    let source =
        serde_json::json!({ "source": { "oci": format!("{}/soak/guest-foo:{next}", w.registry.host_port()) } });
    super::common::rp::patch_spec(&w.client, "guest-foo", source).await?;
    w.version = next;
    Ok(())
}

/// Starts a plugin fault.
pub async fn open(w: &mut World, kind: Kind, rng: &mut fastrand::Rng) -> anyhow::Result<Open> {
    let mut revoked = None;
    match kind {
        Kind::Swap => swap(w).await?,
        Kind::Grants => {
            let mut keep = w.namespaces.clone();
            rng.shuffle(&mut keep);
            let gone = keep.split_off(keep.len() / 2);
            super::common::rp::patch_spec(&w.client, "guest-foo", serde_json::json!({ "grants": foo_grants(&keep) }))
                .await?;
            revoked = Some((gone, Timestamp::now()));
        }
        Kind::RegistryOutage => {
            w.registry.stop();
            swap(w).await?;
        }
        _ => anyhow::bail!("{kind:?} is not a plugin fault"),
    }
    Ok(Open { kind, revoked })
}

/// Heals a plugin fault, at least 2 s after the infrastructure fault healed at `healed`. Grants
/// are widened again only once the narrowing had [`NARROWING_REACHES`] to reach every replica
/// after both were made and the replicas could see them (an API server down, a replica frozen
/// or cut off sees nothing), plus 3 s in which a Deployment written in a revoked namespace is a
/// violation: that window is returned.
pub async fn close(w: &mut World, open: Open, healed: Timestamp) -> anyhow::Result<Option<Revoked>> {
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut window = None;
    match open.kind {
        Kind::Grants => {
            let Some((namespaces, narrowed)) = open.revoked else { anyhow::bail!("grants narrowed without a record") };
            let from = narrowed.max(healed) + NARROWING_REACHES;
            let until = from + Duration::from_secs(3);
            if let Ok(wait) = Duration::try_from(until.duration_since(Timestamp::now())) {
                tokio::time::sleep(wait).await;
            }
            let all = foo_grants(&w.namespaces);
            super::common::rp::patch_spec(&w.client, "guest-foo", serde_json::json!({ "grants": all })).await?;
            window = Some(Revoked { namespaces, from, to: Timestamp::now() });
        }
        Kind::RegistryOutage => tokio::task::block_in_place(|| w.registry.restart())?,
        _ => {}
    }
    Ok(window)
}

/// Injects an infrastructure fault and heals it, with churn while it lasts.
pub async fn infra(w: &mut World, kind: Kind, rng: &mut fastrand::Rng) -> anyhow::Result<usize> {
    let slot = SLOTS[rng.usize(..SLOTS.len())];
    let name = w.name(slot);
    let past = |d: Duration| d + Duration::from_secs(1);
    let mut churned = 0;
    match kind {
        Kind::Kill => {
            w.ring.kill(&name);
            churned += w.churn(rng).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            tokio::task::block_in_place(|| w.start_replica(slot, false))?;
        }
        Kind::FreezeRenew | Kind::FreezeLease => {
            let pause = if kind == Kind::FreezeRenew { past(RENEW_DEADLINE) } else { past(LEASE) };
            if let Some(h) = w.ring.hosts.get(&name) {
                h.proc.signal(libc::SIGSTOP);
            }
            churned += w.churn(rng).await;
            tokio::time::sleep(pause).await;
            if let Some(h) = w.ring.hosts.get(&name) {
                h.proc.signal(libc::SIGCONT);
            }
        }
        Kind::Restart => {
            tokio::task::block_in_place(|| w.ring.stop(&name, Duration::from_secs(5)));
            churned += w.churn(rng).await;
            tokio::task::block_in_place(|| w.start_replica(slot, false))?;
        }
        Kind::ApiServer => {
            tokio::task::block_in_place(|| w.plane.stop_component("kube-apiserver"));
            tokio::time::sleep(Duration::from_secs(1)).await;
            tokio::task::block_in_place(|| w.plane.start_component("kube-apiserver"))?;
            w.client = w.plane.client().await?;
            churned += w.churn(rng).await;
        }
        Kind::Etcd => {
            tokio::task::block_in_place(|| w.plane.stop_component("etcd"));
            churned += w.churn(rng).await;
            tokio::time::sleep(Duration::from_secs(2)).await;
            tokio::task::block_in_place(|| w.plane.start_component("etcd"))?;
            let client = w.client.clone();
            wait::until("the API server serving again after etcd", Duration::from_secs(60), || async {
                let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client.clone());
                let listed = tokio::time::timeout(Duration::from_secs(3), api.list(&Default::default())).await;
                Ok(listed.ok().and_then(Result::ok).map(drop))
            })
            .await?;
        }
        Kind::Cut => {
            w.proxy.cut();
            churned += w.churn(rng).await;
            tokio::time::sleep(past(RENEW_DEADLINE)).await;
            w.proxy.restore();
        }
        _ => anyhow::bail!("{kind:?} is not an infrastructure fault"),
    }
    Ok(churned)
}
