//! One try to acquire or renew the Lease, as client-go's `tryAcquireOrRenew`: every write
//! carries the resourceVersion read just before (two candidates can never both succeed), and
//! whether the current holder's lease has expired is judged by when *this* replica last saw the
//! record change, on its own monotonic clock — never by comparing clocks of two machines.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use std::time::{Duration, Instant};

/// What a try found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Try {
    /// This replica holds the lease now (acquired or renewed).
    Holding,
    /// Another replica holds it and its lease has not expired as far as we can tell.
    HeldBy(String),
}

/// The record last seen, and when.
pub(crate) struct Observed {
    resource_version: Option<String>,
    at: Instant,
}

/// Reads and writes one Lease for one identity.
pub(crate) struct LeaseLock {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
    observed: Option<Observed>,
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

impl LeaseLock {
    pub(crate) fn new(api: Api<Lease>, name: &str, identity: &str, duration: Duration) -> Self {
        LeaseLock { api, name: name.into(), identity: identity.into(), duration, observed: None }
    }

    fn observe(&mut self, resource_version: Option<String>) {
        if self.observed.as_ref().map(|o| &o.resource_version) != Some(&resource_version) {
            self.observed = Some(Observed { resource_version, at: Instant::now() });
        }
    }

    fn spec(&self, previous: Option<&LeaseSpec>) -> LeaseSpec {
        let t = now();
        let ours = previous.and_then(|p| p.holder_identity.as_deref()) == Some(self.identity.as_str());
        let transitions = previous.and_then(|p| p.lease_transitions).unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.duration.as_secs().max(1) as i32),
            acquire_time: if ours { previous.and_then(|p| p.acquire_time.clone()) } else { Some(t.clone()) },
            renew_time: Some(t),
            lease_transitions: Some(if ours || previous.is_none() { transitions } else { transitions + 1 }),
            ..LeaseSpec::default()
        }
    }

    /// One attempt. Errors are API errors (the caller retries until its renew deadline).
    pub(crate) async fn try_acquire_or_renew(&mut self) -> Result<Try, kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.name.clone()), ..ObjectMeta::default() },
                spec: Some(self.spec(None)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(l) => {
                    self.observe(l.metadata.resource_version);
                    Ok(Try::Holding)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(Try::HeldBy(String::new())),
                Err(e) => Err(e),
            };
        };
        self.observe(lease.metadata.resource_version.clone());
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64);
        let seen = self.observed.as_ref().map_or_else(Instant::now, |o| o.at);
        if !holder.is_empty() && holder != self.identity && seen.elapsed() < duration {
            return Ok(Try::HeldBy(holder));
        }
        lease.spec = Some(self.spec(Some(&spec)));
        // `replace` sends the resourceVersion we read: if anyone wrote in between, 409.
        match self.api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(l) => {
                self.observe(l.metadata.resource_version);
                Ok(Try::Holding)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Try::HeldBy(holder)),
            Err(e) => Err(e),
        }
    }

    /// Gives the lease up if this replica still holds it (same resourceVersion as last written),
    /// so a standby can take over at once.
    pub(crate) async fn release(&mut self) -> Result<bool, kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            return Ok(false);
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(false);
        }
        lease.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            renew_time: Some(now()),
            acquire_time: spec.acquire_time,
            lease_transitions: spec.lease_transitions,
            ..LeaseSpec::default()
        });
        match self.api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }
}
