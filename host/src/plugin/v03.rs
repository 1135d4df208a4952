//! `kwop:reconciler@0.3.0` at the boundary: the host's values (0.2's records) converted to what a
//! 0.3 plugin receives, and what it returns converted back — or refused, where it asks for
//! something this host does not serve yet.
//!
//! 0.3 names a cluster wherever an object is named, and adds descendants, metadata patches and
//! generated secrets (`docs/design/wit-0.3.md`). Until the host links other clusters (issue 41)
//! and serves the data plane (issue 42), a 0.3 plugin that names a cluster or asks for those is
//! told so, by name, in a failure that reaches its events — never silently dropped. `info()`
//! declaring them is refused at load, so such a plugin never starts half-served.

use super::bindings::v03::kwop::reconciler::types as new;
use super::bindings::wit;
use super::world::{AdmissionRequest, ConversionRequest, Mutation, Operation};
use crate::vocab::{Gvk, PluginInfo};
use std::time::SystemTime;

/// A 0.3 `info()` in the host's terms, or why this host cannot run it.
pub(crate) fn info(i: new::PluginInfo) -> Result<PluginInfo, String> {
    let conv = |g: new::Gvk| Gvk { group: g.group, version: g.version, kind: g.kind };
    if let Some(o) = i.owns.iter().find(|o| o.across_clusters) {
        return Err(format!(
            "kind {} is owned across clusters, which this host does not serve yet (no ClusterLinks)",
            conv(o.kind.clone())
        ));
    }
    if let Some(r) = i.reads.iter().find(|r| r.across_clusters) {
        return Err(format!(
            "kind {} is read across clusters, which this host does not serve yet (no ClusterLinks)",
            conv(r.kind.clone())
        ));
    }
    if let Some(d) = i.descendants.first() {
        return Err(format!("descendants ({}) are not served by this host yet", conv(d.kind.clone())));
    }
    if !i.connects.is_empty() {
        return Err("connections (plugin-info.connects) are not served by this host yet".into());
    }
    let across = i.owns.iter().filter(|o| o.across_namespaces).map(|o| conv(o.kind.clone())).collect();
    let info = PluginInfo {
        name: i.name,
        version: i.version,
        primary: conv(i.primary),
        owns: i.owns.into_iter().map(|o| conv(o.kind)).collect(),
        across,
        reads: i.reads.into_iter().map(|r| conv(r.kind)).collect(),
        finalizes: i.finalizes,
        validates: i.validates,
        mutates: i.mutates,
        converts: i.converts,
    };
    info.validate()?;
    Ok(info)
}

fn instant(i: &wit::Instant) -> new::Instant {
    new::Instant { seconds: i.seconds, nanoseconds: i.nanoseconds }
}

/// The request of a reconcile or finalize: every owned object in the host's cluster.
pub(crate) fn request(r: &wit::Request) -> new::Request {
    new::Request {
        primary: r.primary.clone(),
        owned: r.owned.iter().map(|o| new::Observed { object: o.clone(), cluster: None }).collect(),
        descendants: Vec::new(),
        now: instant(&r.now),
    }
}

/// An admission request (validate and mutate).
pub(crate) fn admission(r: &AdmissionRequest, now: SystemTime) -> new::AdmissionRequest {
    let w = r.to_wit(now);
    new::AdmissionRequest {
        operation: match r.operation {
            Operation::Create => new::Operation::Create,
            Operation::Update => new::Operation::Update,
        },
        object: w.object,
        old_object: w.old_object,
        subresource: r.subresource.clone(),
        user: w.user,
        dry_run: w.dry_run,
        now: instant(&w.now),
    }
}

/// A conversion request.
pub(crate) fn conversion(r: &ConversionRequest) -> new::ConversionRequest {
    new::ConversionRequest { object: r.object.clone(), desired_api_version: r.desired_api_version.clone() }
}

/// What this host does not serve yet, named for the plugin's author.
fn unserved(what: String) -> wit::Failure {
    wit::Failure {
        message: format!("kwop: {what}, which this host does not serve yet (see docs/design/wit-0.3.md)"),
        events: Vec::new(),
        retry: false,
    }
}

fn gvk(g: new::Gvk) -> wit::Gvk {
    wit::Gvk { group: g.group, version: g.version, kind: g.kind }
}

fn here(cluster: &Option<String>, what: impl FnOnce() -> String) -> Result<(), wit::Failure> {
    match cluster {
        None => Ok(()),
        Some(c) => Err(unserved(format!("{} names cluster {c:?}", what()))),
    }
}

fn object_ref(r: new::ObjectRef) -> Result<wit::ObjectRef, wit::Failure> {
    here(&r.cluster, || format!("a delete of {}/{}", r.gvk.kind, r.name))?;
    Ok(wit::ObjectRef { gvk: gvk(r.gvk), namespace: r.namespace, name: r.name })
}

fn events(es: Vec<new::Event>) -> Result<Vec<wit::Event>, wit::Failure> {
    es.into_iter()
        .map(|e| {
            if let Some(r) = &e.regarding {
                return Err(unserved(format!(
                    "event {:?} is about {}/{} (event.regarding)",
                    e.reason, r.gvk.kind, r.name
                )));
            }
            let severity = match e.severity {
                new::EventType::Normal => wit::EventType::Normal,
                new::EventType::Warning => wit::EventType::Warning,
            };
            Ok(wit::Event { severity, reason: e.reason, message: e.message })
        })
        .collect()
}

fn failure(f: new::Failure) -> wit::Failure {
    // A failure's own events cannot be refused (the failure is what is reported): one about
    // another object is put on the primary, its subject said in the message.
    let events = f
        .events
        .into_iter()
        .map(|e| {
            let severity = match e.severity {
                new::EventType::Normal => wit::EventType::Normal,
                new::EventType::Warning => wit::EventType::Warning,
            };
            let message = match e.regarding {
                Some(r) => format!("{} (about {}/{})", e.message, r.gvk.kind, r.name),
                None => e.message,
            };
            wit::Event { severity, reason: e.reason, message }
        })
        .collect();
    wit::Failure { message: f.message, events, retry: f.retry }
}

fn no_extras(label: &[new::MetadataPatch], generate: &[new::GeneratedSecret]) -> Result<(), wit::Failure> {
    if let Some(l) = label.first() {
        return Err(unserved(format!("a metadata patch of {}/{} (outcome.label)", l.target.gvk.kind, l.target.name)));
    }
    if let Some(g) = generate.first() {
        return Err(unserved(format!("a generated secret {:?} (outcome.generate)", g.name)));
    }
    Ok(())
}

/// A 0.3 `reconcile` result in the host's terms.
pub(crate) fn outcome(r: Result<new::Outcome, new::Failure>) -> Result<wit::Outcome, wit::Failure> {
    let o = r.map_err(failure)?;
    no_extras(&o.label, &o.generate)?;
    let apply = o
        .apply
        .into_iter()
        .map(|i| here(&i.cluster, || "an apply".into()).map(|()| i.object))
        .collect::<Result<_, _>>()?;
    Ok(wit::Outcome {
        apply,
        delete: o.delete.into_iter().map(object_ref).collect::<Result<_, _>>()?,
        status: o.status,
        events: events(o.events)?,
        requeue_after_ms: o.requeue_after_ms,
    })
}

/// A 0.3 `finalize` result in the host's terms.
pub(crate) fn finalize_outcome(
    r: Result<new::FinalizeOutcome, new::Failure>,
) -> Result<wit::FinalizeOutcome, wit::Failure> {
    let o = r.map_err(failure)?;
    no_extras(&o.label, &[])?;
    Ok(wit::FinalizeOutcome {
        delete: o.delete.into_iter().map(object_ref).collect::<Result<_, _>>()?,
        status: o.status,
        events: events(o.events)?,
        done: o.done,
        requeue_after_ms: o.requeue_after_ms,
    })
}

fn violations(v: Vec<new::Violation>) -> Vec<wit::Violation> {
    v.into_iter().map(|v| wit::Violation { field: v.field, message: v.message }).collect()
}

/// A 0.3 `validate` result.
pub(crate) fn validated(r: Result<Vec<String>, Vec<new::Violation>>) -> Result<Vec<String>, Vec<wit::Violation>> {
    r.map_err(violations)
}

/// A 0.3 `mutate` result.
pub(crate) fn mutated(r: Result<new::Mutation, Vec<new::Violation>>) -> Result<Mutation, Vec<wit::Violation>> {
    r.map(|m| Mutation { object: m.object, warnings: m.warnings }).map_err(violations)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(kind: &str) -> new::Gvk {
        new::Gvk { group: "".into(), version: "v1".into(), kind: kind.into() }
    }

    fn outcome_with(apply: Vec<new::Intent>) -> new::Outcome {
        new::Outcome {
            apply,
            delete: vec![],
            label: vec![],
            generate: vec![],
            status: None,
            events: vec![],
            requeue_after_ms: Some(5),
        }
    }

    #[test]
    fn what_stays_in_this_cluster_converts_and_a_named_cluster_is_refused_by_name() {
        let here = outcome_with(vec![new::Intent { object: "{}".into(), cluster: None }]);
        let o = outcome(Ok(here)).expect("served");
        assert_eq!((o.apply, o.requeue_after_ms), (vec!["{}".to_string()], Some(5)));
        let there = outcome_with(vec![new::Intent { object: "{}".into(), cluster: Some("east".into()) }]);
        let f = outcome(Ok(there)).expect_err("a cluster is not served");
        assert!(f.message.contains("names cluster \"east\"") && !f.retry, "{}", f.message);
        let mut regarding = outcome_with(vec![]);
        regarding.events.push(new::Event {
            severity: new::EventType::Normal,
            reason: "Elected".into(),
            message: "m".into(),
            regarding: Some(new::ObjectRef { gvk: g("Pod"), cluster: None, namespace: None, name: "p-0".into() }),
        });
        assert!(outcome(Ok(regarding)).expect_err("not yet").message.contains("Pod/p-0"));
    }

    #[test]
    fn an_info_asking_for_the_data_plane_is_refused_at_load() {
        let base = new::PluginInfo {
            name: "p".into(),
            version: "1".into(),
            primary: new::Gvk { group: "example.com".into(), version: "v1".into(), kind: "Foo".into() },
            owns: vec![],
            reads: vec![],
            descendants: vec![],
            connects: vec![],
            finalizes: false,
            validates: false,
            mutates: vec!["spec.replicas".into()],
            converts: vec![],
        };
        assert_eq!(info(base.clone()).expect("served").mutates, vec!["spec.replicas".to_string()]);
        let mut c = base.clone();
        c.connects.push(new::ConnectionRule {
            target: new::ConnectionTarget::OwnedServices,
            ports: vec![6379],
            secrets: false,
        });
        assert!(info(c).expect_err("no connections").contains("connections"));
        let mut x = base;
        x.owns.push(new::OwnedKind { kind: g("ConfigMap"), across_namespaces: false, across_clusters: true });
        assert!(info(x).expect_err("no links").contains("v1/ConfigMap is owned across clusters"));
    }
}
