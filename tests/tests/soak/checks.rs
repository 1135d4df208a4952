//! The soak's invariants, from the API server's audit log and the cluster's state:
//! - no Foo generation's status written by two replicas, no Foo changing writer without a
//!   handover between (every incarnation of a replica counts as its own writer);
//! - no write outside a plugin's grants: what the replicas wrote is only what the three plugins
//!   are granted (and the host's own Leases and events), and no Deployment is written in a
//!   namespace revoked from guest-foo once the narrowing had time to reach every replica (see
//!   `faults::close`);
//! - no finalizer left on a primary whose plugin is present, and no deletion hanging without a
//!   Warning event saying why;
//! - every replica's memory (RSS) under a bound.

use super::world::World;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use kwop_tests::audit::AuditedWrite;
use kwop_tests::shards;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long a narrowing of grants may take to reach every replica once they can see it (a
/// reload; in-flight reconciles of the old version drained within the shutdown grace).
pub const NARROWING_REACHES: Duration = Duration::from_secs(8);

/// Violations by invariant.
#[derive(Debug, Default)]
pub struct Violations(pub BTreeMap<&'static str, Vec<String>>);

impl Violations {
    pub fn add(&mut self, invariant: &'static str, what: String) {
        self.0.entry(invariant).or_default().push(what);
    }
    pub fn count(&self, invariant: &str) -> usize {
        self.0.get(invariant).map_or(0, Vec::len)
    }
    pub fn total(&self) -> usize {
        self.0.values().map(Vec::len).sum()
    }
}

pub const CONVERGE: &str = "every live primary converges within the bound";
pub const DOUBLE: &str = "no primary generation written by two replicas";
pub const GRANTS: &str = "no write outside a plugin's grants";
pub const FINALIZER: &str = "no finalizer left on a primary whose plugin is present";
pub const HANG: &str = "no deletion hangs without a Warning event";
pub const MEMORY: &str = "host memory bounded";
pub const ALL: [&str; 6] = [CONVERGE, DOUBLE, GRANTS, FINALIZER, HANG, MEMORY];

/// A window of wall-clock time in which Deployments must not be written in `namespaces`.
pub struct Revoked {
    pub namespaces: Vec<String>,
    pub from: Timestamp,
    pub to: Timestamp,
}

fn at(w: &AuditedWrite) -> Option<Timestamp> {
    w.received.parse().ok()
}

/// The audit-log invariants over everything written so far.
pub fn audit(w: &World, revoked: &[Revoked], v: &mut Violations) {
    let d = shards::double_writes(&shards::audit(w.plane));
    for (foo, generation, rs) in d.generations {
        v.add(DOUBLE, format!("{}/{} generation {generation} by {rs:?}", foo.0, foo.1));
    }
    for (foo, before, after) in d.without_handover {
        v.add(DOUBLE, format!("{}/{} from {before} to {after} with no handover between", foo.0, foo.1));
    }
    let ours: Vec<&String> = w.namespaces.iter().chain([&w.source_ns]).collect();
    for x in w.plane.audited("kwop/") {
        let allowed = match (x.namespace.as_str(), x.resource.as_str()) {
            (ns, "leases") => ns == w.system,
            (ns, "events") => ns == w.system || ns == "default" || ours.contains(&&ns.to_string()),
            // The host asks the API server what it may do (a question, written nowhere).
            ("", r) => matches!(r, "reconcilerplugins" | "configsyncs" | "selfsubjectaccessreviews"),
            (ns, "foos" | "deployments" | "fins") => w.namespaces.contains(&ns.to_string()),
            (ns, "configmaps") => w.namespaces.contains(&ns.to_string()),
            _ => false,
        };
        if !allowed {
            v.add(GRANTS, format!("{} {} {}/{} by {}", x.verb, x.resource, x.namespace, x.name, x.user_agent));
            continue;
        }
        if x.resource != "deployments" {
            continue;
        }
        let Some(t) = at(&x) else { continue };
        for r in revoked {
            if r.namespaces.contains(&x.namespace) && r.from < t && t < r.to {
                v.add(
                    GRANTS,
                    format!("{} deployments {}/{} at {t}, revoked since {}", x.verb, x.namespace, x.name, r.from),
                );
            }
        }
    }
}

/// Primaries being deleted for longer than `bound`: a finalizer left (the plugins are all
/// present), and a hang without a Warning event if none says why.
pub async fn deletions(w: &World, bound: Duration, v: &mut Violations) -> anyhow::Result<()> {
    let now = Timestamp::now();
    let kinds = [("test.kwop.dev", "v1", "Fin"), ("examples.kwop.dev", "v1alpha1", "ConfigSync")];
    for (g, ver, k) in kinds {
        let api: Api<DynamicObject> =
            Api::all_with(w.client.clone(), &ApiResource::from_gvk(&GroupVersionKind::gvk(g, ver, k)));
        for o in api.list(&ListParams::default()).await?.items {
            let Some(since) = o.metadata.deletion_timestamp.as_ref().map(|t| t.0) else { continue };
            if now.duration_since(since).as_secs() < bound.as_secs() as i64 {
                continue;
            }
            let ns = o.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            let name = o.metadata.name.clone().unwrap_or_default();
            let finalizers = o.metadata.finalizers.clone().unwrap_or_default();
            v.add(FINALIZER, format!("{k} {ns}/{name} deleted at {since}, finalizers {finalizers:?}"));
            let events = super::common::events_for(&w.client, &ns, &name).await?;
            if !events.iter().any(|e| e.type_.as_deref() == Some("Warning")) {
                v.add(HANG, format!("{k} {ns}/{name} deleted at {since} with no Warning event"));
            }
        }
    }
    Ok(())
}

/// Each replica's resident memory in bytes (from /proc).
pub fn rss(w: &World) -> BTreeMap<String, u64> {
    w.ring
        .hosts
        .iter()
        .filter_map(|(n, h)| {
            let status = std::fs::read_to_string(format!("/proc/{}/status", h.proc.pid())).ok()?;
            let kb: u64 = status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()?;
            Some((n.clone(), kb * 1024))
        })
        .collect()
}
