//! The Foo → Deployment logic, ported from sample-controller's `controller.go`.

use crate::intent::{
    Container, Deployment, DeploymentSpec, LabelSelector, Meta as ObjectMeta, PodSpec, PodTemplateSpec,
};
use kwop_guest::conditions::{set_condition, Condition};
use kwop_guest::{Event, Failure, Meta, Time, Violation};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Event reason when a Foo is synced (sample-controller's `SuccessSynced`).
pub const SUCCESS_SYNCED: &str = "Synced";
/// Message of the `Synced` event (sample-controller's `MessageResourceSynced`).
pub const MESSAGE_RESOURCE_SYNCED: &str = "Foo synced successfully";
/// Event reason when the Deployment exists but is not ours (sample-controller's `ErrResourceExists`).
pub const ERR_RESOURCE_EXISTS: &str = "ErrResourceExists";
/// Event reason for a Foo whose spec cannot be acted on. sample-controller only logs these; we
/// also tell the user, on the object, why nothing happens.
pub const INVALID_SPEC: &str = "InvalidSpec";
/// Condition: the Deployment has at least the replicas the Foo asks for available.
pub const READY: &str = "Ready";
/// Condition: the Deployment is being created or scaled towards the Foo's replicas.
pub const PROGRESSING: &str = "Progressing";

/// The Foo custom resource (`samplecontroller.k8s.io/v1alpha1`), the fields the logic reads.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct Foo {
    /// Name, namespace, UID.
    #[serde(default)]
    pub metadata: Meta,
    /// Desired state.
    #[serde(default)]
    pub spec: FooSpec,
    /// What the last reconcile reported (its conditions keep their transition times).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<FooStatus>,
}

/// `spec` of a Foo.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FooSpec {
    /// Name of the Deployment to manage.
    #[serde(default)]
    pub deployment_name: Option<String>,
    /// Its replicas (the CRD allows 1..=10; unset leaves the Deployment's default).
    #[serde(default)]
    pub replicas: Option<i32>,
}

/// `status` of a Foo: sample-controller's `availableReplicas`, and the generation and conditions
/// a user checks with `kubectl wait --for=condition=Ready`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FooStatus {
    /// The Deployment's available replicas.
    #[serde(default)]
    pub available_replicas: i32,
    /// The Foo's `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` and `Progressing`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A successful sync.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The server-side apply intent for the Deployment.
    pub deployment: Deployment,
    /// The Foo's new status.
    pub status: FooStatus,
    /// Events to record on the Foo.
    pub events: Vec<Event>,
}

/// What the logic reads of an existing Deployment: its owners and its available replicas. A
/// narrow type instead of k8s-openapi's `Deployment` keeps the component small (the full type's
/// deserialiser is most of a megabyte of WebAssembly); the intent is narrow too (`intent`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct Observed {
    /// Owner references only.
    #[serde(default)]
    pub metadata: ObservedMeta,
    /// Status, if any.
    #[serde(default)]
    pub status: Option<ObservedStatus>,
}

/// `metadata` of an observed Deployment.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObservedMeta {
    /// Owner references.
    #[serde(default)]
    pub owner_references: Vec<OwnerRef>,
}

/// One owner reference.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct OwnerRef {
    /// Owner UID.
    #[serde(default)]
    pub uid: String,
    /// Whether it is the controller.
    #[serde(default)]
    pub controller: Option<bool>,
}

/// `status` of an observed Deployment.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObservedStatus {
    /// Available replicas.
    #[serde(default)]
    pub available_replicas: Option<i32>,
}

/// One sync of a Foo, as sample-controller's `syncHandler` does it, at the instant `now` (the
/// reconcile's, for the conditions' transition times).
///
/// `deployment` looks up a Deployment by namespace and name in the cache (sample-controller's
/// `deploymentsLister.Deployments(ns).Get(name)`); the host answers from its informer cache.
pub fn sync(foo: &Foo, deployment: &dyn Fn(&str, &str) -> Option<Observed>, now: Time) -> Result<Decision, Failure> {
    let name = match foo.spec.deployment_name.as_deref() {
        Some(n) if !n.is_empty() => n,
        // sample-controller logs "Deployment name missing from object reference" and drops the
        // item (no retry): the user has to fix the Foo, which triggers a new sync.
        _ => return Err(invalid("spec.deploymentName is missing or empty: no Deployment to manage".into())),
    };
    if let Err(why) = check_dns_subdomain(name) {
        // sample-controller would retry a create the API server rejects, forever; we say why once.
        return Err(invalid(format!("spec.deploymentName {name:?} is not a valid Deployment name: {why}")));
    }

    let namespace = foo.metadata.namespace.as_deref().unwrap_or_default();
    let observed = deployment(namespace, name);
    if let Some(d) = &observed {
        if !is_controlled_by(d, &foo.metadata.uid) {
            let msg = format!("Resource {name:?} already exists and is not managed by Foo");
            return Err(Failure::retry(msg.clone()).event(Event::warning(ERR_RESOURCE_EXISTS, msg)));
        }
    }
    let available = observed.and_then(|d| d.status).and_then(|s| s.available_replicas).unwrap_or(0);
    Ok(Decision {
        deployment: new_deployment(foo, name),
        status: status(foo, name, available, now),
        events: vec![Event::normal(SUCCESS_SYNCED, MESSAGE_RESOURCE_SYNCED)],
    })
}

/// The Foo's status: `availableReplicas` as sample-controller writes it, the generation it
/// describes, and the conditions Ready (enough replicas available) and Progressing (the
/// Deployment is being scaled to the Foo's replicas). A Deployment just created and one not yet
/// in the cache read the same (0 available), so the status is written once, not twice.
fn status(foo: &Foo, name: &str, available: i32, now: Time) -> FooStatus {
    // An unset spec.replicas leaves the Deployment at its default, 1.
    let desired = foo.spec.replicas.unwrap_or(1);
    let generation = foo.metadata.generation;
    let mut conditions = foo.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    let counted = format!("{available} of {desired} replicas available");
    let ready = if available >= desired {
        Condition::new(READY, true, "Available", counted.clone())
    } else {
        Condition::new(READY, false, "Unavailable", counted.clone())
    };
    set_condition(&mut conditions, ready.observed_generation(generation), now);
    let progressing = match available.cmp(&desired) {
        std::cmp::Ordering::Less => Condition::new(PROGRESSING, true, "ScalingUp", counted),
        std::cmp::Ordering::Greater => Condition::new(PROGRESSING, true, "ScalingDown", counted),
        std::cmp::Ordering::Equal => {
            Condition::new(PROGRESSING, false, "Complete", format!("Deployment {name:?} has {desired} available"))
        }
    };
    set_condition(&mut conditions, progressing.observed_generation(generation), now);
    FooStatus { available_replicas: available, observed_generation: generation, conditions }
}

/// Admission: what the API server should refuse to store, so `kubectl apply` says it at once
/// instead of an `InvalidSpec` or `ErrResourceExists` event after the fact. Schema checks
/// (`replicas` 1–10) stay in the CRD.
///
/// A missing or invalid `deploymentName`, or one naming an existing Deployment this Foo does not
/// control, is refused on CREATE and whenever an UPDATE changes `spec`; an UPDATE that leaves
/// `spec` as it was (labels, annotations, finalizers) is never refused for it — a warning says
/// what is wrong instead — so a Foo that went wrong can still be labelled, fixed or deleted.
pub fn admit(
    foo: &Foo,
    old: Option<&Foo>,
    deployment: &dyn Fn(&str, &str) -> Option<Observed>,
) -> Result<Vec<String>, Vec<Violation>> {
    let field = "spec.deploymentName";
    let problem = match foo.spec.deployment_name.as_deref() {
        Some(n) if !n.is_empty() => match check_dns_subdomain(n) {
            Err(why) => Some(format!("{n:?} is not a valid Deployment name: {why}")),
            Ok(()) => {
                let namespace = foo.metadata.namespace.as_deref().unwrap_or_default();
                match deployment(namespace, n) {
                    Some(d) if !is_controlled_by(&d, &foo.metadata.uid) => Some(format!(
                        "Deployment {n:?} already exists in namespace {namespace:?} and is not managed by this Foo; \
                         choose another name"
                    )),
                    _ => None,
                }
            }
        },
        _ => Some("is required: the name of the Deployment this Foo manages".to_string()),
    };
    // v2 (the hot-swap tests' second version) also refuses names starting with "old-".
    let problem = problem.or_else(|| {
        let name = foo.spec.deployment_name.as_deref().unwrap_or_default();
        (cfg!(feature = "v2") && name.starts_with("old-"))
            .then(|| format!("{name:?} starts with \"old-\", which guest-foo v2 does not take"))
    });
    let Some(message) = problem else {
        return Ok(Vec::new());
    };
    match old {
        Some(old) if old.spec == foo.spec => Ok(vec![format!("{field}: {message}")]),
        _ => Err(vec![Violation::field(field, message)]),
    }
}

/// The whole reconcile at the JSON boundary, as the plugin does it (parse the Foo, look up the
/// Deployment as JSON, serialise the intent and status): the native side of the WASM-vs-native
/// benchmark. Returns (apply intents, status) as JSON text.
pub fn reconcile_json(
    primary: &str,
    lookup: &dyn Fn(&str, &str) -> Option<String>,
    now: Time,
) -> Result<(Vec<String>, String), Failure> {
    let foo: Foo = serde_json::from_str(primary)
        .map_err(|e| Failure::permanent(format!("the primary object does not parse: {e}")))?;
    let d = sync(&foo, &|ns, name| lookup(ns, name).and_then(|t| serde_json::from_str(&t).ok()), now)?;
    let intent = serde_json::to_string(&d.deployment).map_err(|e| Failure::permanent(e.to_string()))?;
    let status = serde_json::to_string(&d.status).map_err(|e| Failure::permanent(e.to_string()))?;
    Ok((vec![intent], status))
}

fn invalid(message: String) -> Failure {
    Failure::permanent(message.clone()).event(Event::warning(INVALID_SPEC, message))
}

/// sample-controller's `newDeployment`, as a server-side apply intent. The owner reference is
/// not here: the kwop host sets the controller reference itself.
fn new_deployment(foo: &Foo, name: &str) -> Deployment {
    let labels = BTreeMap::from([
        ("app".to_string(), "nginx".to_string()),
        ("controller".to_string(), foo.metadata.name.clone()),
    ]);
    #[allow(unused_mut)]
    let mut annotations = None;
    #[cfg(feature = "v2")]
    {
        annotations =
            Some(BTreeMap::from([("samplecontroller.k8s.io/reconciled-by".to_string(), "guest-foo-v2".to_string())]));
    }
    Deployment {
        api_version: "apps/v1",
        kind: "Deployment",
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: foo.metadata.namespace.clone().filter(|n| !n.is_empty()),
            annotations,
            ..ObjectMeta::default()
        },
        spec: DeploymentSpec {
            // Unset replicas stay unset (the API server defaults them to 1), as in sample-controller.
            replicas: foo.spec.replicas,
            selector: LabelSelector { match_labels: labels.clone() },
            template: PodTemplateSpec {
                metadata: ObjectMeta { labels: Some(labels), ..ObjectMeta::default() },
                spec: PodSpec { containers: vec![Container { name: "nginx".into(), image: "nginx:latest".into() }] },
            },
        },
    }
}

/// `metav1.IsControlledBy`: the object's controller owner reference has the Foo's UID.
fn is_controlled_by(d: &Observed, uid: &str) -> bool {
    !uid.is_empty() && d.metadata.owner_references.iter().any(|r| r.controller == Some(true) && r.uid == uid)
}

/// RFC 1123 subdomain, as the API server checks a Deployment name.
fn check_dns_subdomain(s: &str) -> Result<(), &'static str> {
    if s.len() > 253 {
        return Err("must be no more than 253 characters");
    }
    let ok_label = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if s.split('.').all(ok_label) {
        Ok(())
    } else {
        Err("must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")
    }
}

#[cfg(test)]
mod tests;
