//! The config-sync decisions — which copies to apply, which to delete, the status and the events
//! — as plain functions over typed inputs: no host calls, so they run natively in unit tests.
//!
//! What the rules protect:
//! - an object config-sync did not create is never written or deleted (a conflict instead);
//! - a source that is briefly missing, or a spec that is invalid, never wipes the copies: nothing
//!   is applied or deleted until it is back or fixed;
//! - a Secret's data appears only in the apply intents: events, status and messages name kinds,
//!   namespaces, names and counts, never a value.

use crate::selector;
use crate::types::{ConfigSync, ConfigSyncStatus, CopyRef, Kind, Namespace, Source, SourceRef};
use kwop_guest::conditions::{set_condition, Condition};
use kwop_guest::{Delete, Event, Time};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

/// The condition every reconcile sets.
pub const READY: &str = "Ready";
/// Ready reason (and Normal event): every selected namespace holds an up-to-date copy.
pub const SYNCED: &str = "Synced";
/// Ready reason: some selected namespaces hold an object config-sync did not create.
pub const CONFLICT: &str = "Conflict";
/// Ready reason and Warning event: the source does not exist (the copies are kept).
pub const SOURCE_NOT_FOUND: &str = "SourceNotFound";
/// Ready reason and Warning event: the spec cannot be acted on (the copies are kept).
pub const INVALID_SPEC: &str = "InvalidSpec";
/// Warning event: an object of the source's kind and name exists and is not ours
/// (sample-controller's `ErrResourceExists`).
pub const ERR_RESOURCE_EXISTS: &str = "ErrResourceExists";
/// Normal event of `finalize`.
pub const CLEANED: &str = "Cleaned";
/// The annotation each copy carries: `<namespace>/<name>` of its source.
pub const SOURCE_ANNOTATION: &str = "examples.kwop.dev/config-sync-source";
/// At most this many `ErrResourceExists` events per reconcile; the rest are summed up in one.
pub const MAX_CONFLICT_EVENTS: usize = 5;
/// At most this many conflicting namespaces are named in the Ready message.
const NAMED_IN_MESSAGE: usize = 3;

/// What a reconcile reads besides its ConfigSync: the host's cache (through the SDK in the
/// plugin, a fake in tests) and the copies the request says are ours.
pub struct World<'a> {
    /// The source object: kind, namespace, name.
    pub source: &'a dyn Fn(Kind, &str, &str) -> Option<Source>,
    /// The Namespaces matching a label-selector string.
    pub namespaces: &'a dyn Fn(&str) -> Vec<Namespace>,
    /// Whether an object of a kind exists in a namespace under a name.
    pub exists: &'a dyn Fn(Kind, &str, &str) -> bool,
    /// The copies this ConfigSync owns (the request's owned objects).
    pub owned: &'a [CopyRef],
}

/// What one reconcile decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Server-side apply intents: one copy per selected namespace without a conflict.
    pub apply: Vec<Value>,
    /// Owned copies no longer wanted.
    pub delete: Vec<Delete>,
    /// The ConfigSync's new status.
    pub status: ConfigSyncStatus,
    /// Events to record on the ConfigSync.
    pub events: Vec<Event>,
}

/// One reconcile of `cs` at the instant `now` (for the condition's transition time).
pub fn sync(cs: &ConfigSync, world: &World<'_>, now: Time) -> Decision {
    let src = &cs.spec.source;
    let kind = match check_source(src) {
        Ok(kind) => kind,
        Err(why) => return held(cs, INVALID_SPEC, why, now),
    };
    let query = match selector::to_query(&cs.spec.namespace_selector) {
        Ok(q) => q,
        Err(why) => return held(cs, INVALID_SPEC, why, now),
    };
    let Some(source) = (world.source)(kind, &src.namespace, &src.name) else {
        let why = format!(
            "source {} {:?} not found in namespace {:?}: the existing copies are kept until it is back",
            kind.as_str(),
            src.name,
            src.namespace
        );
        return held(cs, SOURCE_NOT_FOUND, why, now);
    };

    // The selected namespaces, except the source's own and those being deleted (the API server
    // refuses creates there), sorted.
    let targets: BTreeSet<String> = (world.namespaces)(&query)
        .into_iter()
        .filter(|n| !n.is_terminating())
        .map(|n| n.metadata.name)
        .filter(|n| !n.is_empty() && *n != src.namespace)
        .collect();
    let owned: BTreeSet<&CopyRef> = world.owned.iter().collect();
    let (mut apply, mut wanted, mut conflicts) = (Vec::new(), BTreeSet::new(), Vec::new());
    for ns in targets {
        let copy = CopyRef { kind, namespace: ns, name: src.name.clone() };
        if !owned.contains(&copy) && (world.exists)(kind, &copy.namespace, &copy.name) {
            conflicts.push(copy.namespace);
            continue;
        }
        apply.push(intent(&copy, src, &source));
        wanted.insert(copy);
    }
    let is_source = |c: &CopyRef| c.kind == kind && c.namespace == src.namespace && c.name == src.name;
    let delete =
        world.owned.iter().filter(|c| !wanted.contains(*c) && !is_source(c)).map(delete_of).collect::<Vec<_>>();

    let synced = count(apply.len());
    let copied = format!("copied to {}", namespaces(synced));
    let mut events = conflict_events(kind, &src.name, &cs.metadata.name, &conflicts);
    events.push(Event::normal(SYNCED, format!("ConfigSync synced to {}", namespaces(synced))));
    let ready = if conflicts.is_empty() {
        Condition::new(READY, true, SYNCED, copied)
    } else {
        let message = format!(
            "{copied}; {} a {} {:?} not managed by this ConfigSync: {}",
            match conflicts.len() {
                1 => "1 namespace holds".to_string(),
                n => format!("{n} namespaces hold"),
            },
            kind.as_str(),
            src.name,
            first_few(&conflicts)
        );
        Condition::new(READY, false, CONFLICT, message)
    };
    let mut status = ConfigSyncStatus {
        observed_generation: cs.metadata.generation,
        conditions: previous(cs).conditions,
        synced,
        conflicts,
    };
    set_condition(&mut status.conditions, ready.observed_generation(cs.metadata.generation), now);
    Decision { apply, delete, status, events }
}

/// Cleanup for a ConfigSync being deleted: a deletion of every copy it owns, and the `Cleaned`
/// event.
pub fn cleanup(owned: &[CopyRef]) -> (Vec<Delete>, Event) {
    let n = owned.len();
    let event = Event::normal(CLEANED, format!("deleted {n} {}", if n == 1 { "copy" } else { "copies" }));
    (owned.iter().map(delete_of).collect(), event)
}

/// The copy of `source` in `copy.namespace`: name, namespace, the source annotation, and the
/// source's `data`, `binaryData` and (a Secret's) `type`, as they are. Nothing else of the
/// source's metadata: not its labels, annotations, owner references or finalizers (the host adds
/// its own tracking labels).
fn intent(copy: &CopyRef, src: &SourceRef, source: &Source) -> Value {
    let mut o = Map::new();
    o.insert("apiVersion".into(), json!("v1"));
    o.insert("kind".into(), json!(copy.kind.as_str()));
    o.insert(
        "metadata".into(),
        json!({
            "name": copy.name,
            "namespace": copy.namespace,
            "annotations": { SOURCE_ANNOTATION: format!("{}/{}", src.namespace, src.name) },
        }),
    );
    let mut put = |field: &str, v: &Option<Value>| {
        if let Some(v) = v.as_ref().filter(|v| !v.is_null()) {
            o.insert(field.into(), v.clone());
        }
    };
    put("data", &source.data);
    put("binaryData", &source.binary_data);
    if copy.kind == Kind::Secret {
        put("type", &source.type_);
    }
    Value::Object(o)
}

/// A status that keeps everything as it is but the Ready condition (False, `reason`) and the
/// observed generation, with a Warning event saying the same: nothing is applied or deleted.
/// `synced` and `conflicts` keep the last sync's values, since the copies they count are kept.
fn held(cs: &ConfigSync, reason: &str, message: String, now: Time) -> Decision {
    let mut status = previous(cs);
    status.observed_generation = cs.metadata.generation;
    let ready = Condition::new(READY, false, reason, message.clone()).observed_generation(cs.metadata.generation);
    set_condition(&mut status.conditions, ready, now);
    Decision { apply: vec![], delete: vec![], status, events: vec![Event::warning(reason, message)] }
}

fn previous(cs: &ConfigSync) -> ConfigSyncStatus {
    cs.status.clone().unwrap_or_default()
}

/// The source's kind, or why `spec.source` cannot be acted on.
fn check_source(src: &SourceRef) -> Result<Kind, String> {
    let kind = Kind::parse(&src.kind)
        .ok_or_else(|| format!("spec.source.kind {:?} is not supported: it must be ConfigMap or Secret", src.kind))?;
    if !selector::is_dns_label(&src.namespace) {
        return Err(format!("spec.source.namespace {:?} is not a valid namespace name", src.namespace));
    }
    if !selector::is_dns_subdomain(&src.name) {
        return Err(format!("spec.source.name {:?} is not a valid {} name", src.name, kind.as_str()));
    }
    Ok(kind)
}

/// One `ErrResourceExists` Warning per conflicting namespace, at most [`MAX_CONFLICT_EVENTS`],
/// and one more counting the rest.
fn conflict_events(kind: Kind, name: &str, sync_name: &str, conflicts: &[String]) -> Vec<Event> {
    let mut events: Vec<Event> = conflicts
        .iter()
        .take(MAX_CONFLICT_EVENTS)
        .map(|ns| {
            Event::warning(
                ERR_RESOURCE_EXISTS,
                format!(
                    "{} {name:?} in namespace {ns:?} already exists and is not managed by ConfigSync {sync_name:?}",
                    kind.as_str()
                ),
            )
        })
        .collect();
    let rest = conflicts.len().saturating_sub(MAX_CONFLICT_EVENTS);
    if rest > 0 {
        events.push(Event::warning(
            ERR_RESOURCE_EXISTS,
            format!(
                "{} {name:?} also exists and is not managed by ConfigSync {sync_name:?} in {rest} more {} (see status.conflicts)",
                kind.as_str(),
                if rest == 1 { "namespace" } else { "namespaces" }
            ),
        ));
    }
    events
}

fn delete_of(c: &CopyRef) -> Delete {
    Delete { gvk: c.kind.gvk(), namespace: Some(c.namespace.clone()), name: c.name.clone() }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// `1 namespace`, `3 namespaces`.
fn namespaces(n: u32) -> String {
    if n == 1 {
        "1 namespace".into()
    } else {
        format!("{n} namespaces")
    }
}

/// `a, b, c and 2 more`.
fn first_few(names: &[String]) -> String {
    let shown = names.iter().take(NAMED_IN_MESSAGE).map(String::as_str).collect::<Vec<_>>().join(", ");
    match names.len().saturating_sub(NAMED_IN_MESSAGE) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

#[cfg(test)]
mod secret_tests;
#[cfg(test)]
mod tests;
