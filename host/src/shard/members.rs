//! The ring on the API server: one Lease per member (`kwop-shard.<ring>.<member>`, held and
//! renewed by that member through the leader-election machinery), and the ring object
//! (`kwop-shard.<ring>`, a Lease too) whose annotation is the assignment, changed only by
//! compare-and-swap.

use super::handover::{self, Assignment};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// The ring object's annotation holding the assignment.
pub const ASSIGNMENT: &str = "kwop.dev/shard-assignment";

/// The ring object's annotation naming the member that last confirmed its part (see
/// [`Ring::confirm`]) and when.
pub const CONFIRMED: &str = "kwop.dev/shard-confirmed";

/// A member's name from a replica identity: lowercase letters, digits and `-`.
pub fn member_name(identity: &str) -> String {
    let s: String =
        identity.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    s.trim_matches('-').chars().take(200).collect()
}

/// The member Lease's name.
pub fn member_lease(ring: &str, member: &str) -> String {
    format!("kwop-shard.{ring}.{member}")
}

/// The ring object's name.
pub fn ring_lease(ring: &str) -> String {
    format!("kwop-shard.{ring}")
}

/// A member Lease as last seen, and when it last changed (on this replica's clock).
struct Seen {
    resource_version: Option<String>,
    holder: bool,
    duration: Duration,
    at: Instant,
}

/// Reads the ring and its members.
pub struct Ring {
    api: Api<Lease>,
    namespaces: Api<Namespace>,
    ring: String,
    seen: HashMap<String, Seen>,
}

impl Ring {
    /// The ring `ring` with its Leases in `namespace`.
    pub fn new(client: kube::Client, namespace: &str, ring: &str) -> Self {
        Ring {
            api: Api::namespaced(client.clone(), namespace),
            namespaces: Api::all(client),
            ring: ring.to_string(),
            seen: HashMap::new(),
        }
    }

    /// The hashes of the cluster's namespaces (what namespace sharding splits by count).
    pub async fn namespace_points(&self) -> Result<Vec<u64>, kube::Error> {
        let list = self.namespaces.list_metadata(&ListParams::default()).await?;
        Ok(list.items.iter().filter_map(|n| n.metadata.name.as_deref()).map(super::ring::fnv1a64).collect())
    }

    /// The members alive: a held member Lease that changed within its lease duration, as this
    /// replica has seen it (never judged by another machine's clock).
    pub async fn live(&mut self) -> Result<BTreeSet<String>, kube::Error> {
        let prefix = format!("kwop-shard.{}.", self.ring);
        let leases = self.api.list(&ListParams::default()).await?.items;
        let now = Instant::now();
        let mut present = BTreeSet::new();
        for l in leases {
            let Some(member) = l.metadata.name.as_deref().and_then(|n| n.strip_prefix(&prefix)).map(str::to_string)
            else {
                continue;
            };
            let spec = l.spec.unwrap_or_default();
            let holder = spec.holder_identity.is_some_and(|h| !h.is_empty());
            let duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64);
            let rv = l.metadata.resource_version;
            let changed = self.seen.get(&member).is_none_or(|s| s.resource_version != rv);
            if changed {
                self.seen.insert(member.clone(), Seen { resource_version: rv, holder, duration, at: now });
            }
            present.insert(member);
        }
        self.seen.retain(|m, _| present.contains(m));
        Ok(self
            .seen
            .iter()
            .filter(|(_, s)| s.holder && now.duration_since(s.at) < s.duration)
            .map(|(m, _)| m.clone())
            .collect())
    }

    /// Members whose Lease was released or has not changed for twice its duration (as of the
    /// last [`Ring::live`]): leftovers of replicas gone, whose Leases may be deleted.
    pub fn expired(&self) -> Vec<String> {
        let now = Instant::now();
        self.seen
            .iter()
            .filter(|(_, s)| !s.holder || now.duration_since(s.at) >= s.duration * 2)
            .map(|(m, _)| m.clone())
            .collect()
    }

    /// The assignment and the resourceVersion to swap against (`None`: no ring object yet).
    pub async fn assignment(&self) -> Result<(Assignment, Option<String>), kube::Error> {
        match self.api.get_opt(&ring_lease(&self.ring)).await? {
            None => Ok((Assignment::new(), None)),
            Some(l) => {
                let text = l.metadata.annotations.as_ref().and_then(|a| a.get(ASSIGNMENT)).cloned().unwrap_or_default();
                let a = handover::parse(&text).unwrap_or_else(|e| {
                    tracing::warn!(ring = %self.ring, "the shard assignment does not parse ({e}); starting from none");
                    Assignment::new()
                });
                Ok((a, l.metadata.resource_version))
            }
        }
    }

    /// Writes `next` if the ring object is still at `resource_version`; `false` if someone
    /// changed it meanwhile (plan again).
    pub async fn swap(&self, next: &Assignment, resource_version: Option<String>) -> Result<bool, kube::Error> {
        Ok(self.write(next, resource_version, None).await?.is_some())
    }

    /// Writes the assignment read at `resource_version` back unchanged but for a mark of `member`
    /// (so the object's resourceVersion moves: the API server skips writes that change nothing),
    /// and returns the new resourceVersion; `None` if someone changed it meanwhile. What a member
    /// whose Lease lapsed does before it holds again: a taker that judged it gone and read the
    /// same version is refused, and a taker whose swap came first makes this one refused.
    pub async fn confirm(
        &self,
        assignment: &Assignment,
        resource_version: Option<String>,
        member: &str,
    ) -> Result<Option<String>, kube::Error> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        let written = self.write(assignment, resource_version, Some(format!("{member} {nanos}"))).await?;
        Ok(written.and_then(|l| l.metadata.resource_version).filter(|v| !v.is_empty()))
    }

    async fn write(
        &self,
        next: &Assignment,
        resource_version: Option<String>,
        confirmed_by: Option<String>,
    ) -> Result<Option<Lease>, kube::Error> {
        let mut annotations = std::collections::BTreeMap::from([(ASSIGNMENT.to_string(), handover::render(next))]);
        if let Some(c) = confirmed_by {
            annotations.insert(CONFIRMED.to_string(), c);
        }
        let meta = ObjectMeta {
            name: Some(ring_lease(&self.ring)),
            annotations: Some(annotations),
            resource_version: resource_version.clone(),
            ..ObjectMeta::default()
        };
        let lease = Lease { metadata: meta, spec: None };
        let r = match resource_version {
            None => self.api.create(&PostParams::default(), &lease).await,
            Some(_) => self.api.replace(&ring_lease(&self.ring), &PostParams::default(), &lease).await,
        };
        match r {
            Ok(l) => Ok(Some(l)),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Deletes the Lease of a member gone from the assignment (best effort: leftovers of crashed
    /// replicas).
    pub async fn forget(&self, member: &str) {
        let name = member_lease(&self.ring, member);
        if let Err(e) = self.api.delete(&name, &DeleteParams::default()).await {
            tracing::debug!(lease = %name, "cannot delete a gone member's Lease: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_lease_names_and_unambiguous_across_rings() {
        assert_eq!(member_name("kwop-7d9f_0a1b2c3d4e5f"), "kwop-7d9f-0a1b2c3d4e5f");
        assert_eq!(member_lease("default", "kwop-a"), "kwop-shard.default.kwop-a");
        // A ring named "a" never lists the members of a ring named "a-b".
        assert!(!member_lease("a-b", "x").starts_with("kwop-shard.a."));
    }
}
