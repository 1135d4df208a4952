//! The Foo → Deployment logic, ported from sample-controller's `controller.go`.

use serde::Deserialize;
use serde_json::{json, Value};

/// Event reason when a Foo is synced (sample-controller's `SuccessSynced`).
pub const SUCCESS_SYNCED: &str = "Synced";
/// Message of the `Synced` event (sample-controller's `MessageResourceSynced`).
pub const MESSAGE_RESOURCE_SYNCED: &str = "Foo synced successfully";
/// Event reason when the Deployment exists but is not ours (sample-controller's `ErrResourceExists`).
pub const ERR_RESOURCE_EXISTS: &str = "ErrResourceExists";
/// Event reason for a Foo whose spec cannot be acted on. sample-controller only logs these; we
/// also tell the user, on the object, why nothing happens.
pub const INVALID_SPEC: &str = "InvalidSpec";

/// Event severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// As expected.
    Normal,
    /// Needs attention.
    Warning,
}

/// An event to record on the Foo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Normal or Warning.
    pub severity: Severity,
    /// PascalCase reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

impl Event {
    fn new(severity: Severity, reason: &str, message: impl Into<String>) -> Self {
        Event { severity, reason: reason.into(), message: message.into() }
    }
}

/// A successful sync: the Deployment intent, the Foo's status, the events.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Server-side apply intents (here: exactly one Deployment).
    pub apply: Vec<Value>,
    /// The Foo's new `status`.
    pub status: Value,
    /// Events to record on the Foo.
    pub events: Vec<Event>,
}

/// A sync that could not proceed.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// What went wrong.
    pub message: String,
    /// Events to record on the Foo.
    pub events: Vec<Event>,
    /// Whether retrying (with backoff) can help.
    pub retry: bool,
}

#[derive(Deserialize)]
struct Foo {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    spec: Spec,
}

#[derive(Deserialize, Default)]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    uid: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    deployment_name: Option<String>,
    #[serde(default)]
    replicas: Option<i64>,
}

/// One sync of a Foo, as sample-controller's `syncHandler` does it.
///
/// `deployment` looks up a Deployment by namespace and name in the cache (sample-controller's
/// `deploymentsLister.Deployments(ns).Get(name)`); the host answers from its informer cache.
pub fn sync(foo: &Value, deployment: &dyn Fn(&str, &str) -> Option<Value>) -> Result<Decision, Failure> {
    let foo: Foo = Foo::deserialize(foo).map_err(|e| invalid(format!("Foo does not parse: {e}")))?;

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

    let observed = deployment(&foo.metadata.namespace, name);
    if let Some(d) = &observed {
        if !is_controlled_by(d, &foo.metadata.uid) {
            let msg = format!("Resource {name:?} already exists and is not managed by Foo");
            return Err(Failure {
                message: msg.clone(),
                events: vec![Event::new(Severity::Warning, ERR_RESOURCE_EXISTS, msg)],
                retry: true,
            });
        }
    }

    let available =
        observed.as_ref().and_then(|d| d.pointer("/status/availableReplicas")).and_then(Value::as_i64).unwrap_or(0);

    Ok(Decision {
        apply: vec![new_deployment(&foo, name)],
        status: json!({ "availableReplicas": available }),
        events: vec![Event::new(Severity::Normal, SUCCESS_SYNCED, MESSAGE_RESOURCE_SYNCED)],
    })
}

fn invalid(message: String) -> Failure {
    Failure { events: vec![Event::new(Severity::Warning, INVALID_SPEC, message.clone())], message, retry: false }
}

/// sample-controller's `newDeployment`, as a server-side apply intent. The owner reference is
/// not here: the kwop host sets the controller reference itself.
fn new_deployment(foo: &Foo, name: &str) -> Value {
    let labels = json!({ "app": "nginx", "controller": foo.metadata.name });
    let mut spec = json!({
        "selector": { "matchLabels": labels },
        "template": {
            "metadata": { "labels": labels },
            "spec": { "containers": [ { "name": "nginx", "image": "nginx:latest" } ] }
        }
    });
    // Unset replicas stay unset (the API server defaults them to 1), as in sample-controller.
    if let (Some(r), Some(obj)) = (foo.spec.replicas, spec.as_object_mut()) {
        obj.insert("replicas".into(), json!(r));
    }
    let mut metadata = json!({ "name": name });
    if let (false, Some(m)) = (foo.metadata.namespace.is_empty(), metadata.as_object_mut()) {
        m.insert("namespace".into(), json!(foo.metadata.namespace));
    }
    #[cfg(feature = "v2")]
    if let Some(m) = metadata.as_object_mut() {
        m.insert("annotations".into(), json!({ "samplecontroller.k8s.io/reconciled-by": "guest-foo-v2" }));
    }
    json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": spec })
}

/// `metav1.IsControlledBy`: the object's controller owner reference has the Foo's UID.
fn is_controlled_by(obj: &Value, uid: &str) -> bool {
    let refs = obj.pointer("/metadata/ownerReferences").and_then(Value::as_array);
    refs.into_iter().flatten().any(|r| {
        r.get("controller").and_then(Value::as_bool) == Some(true)
            && !uid.is_empty()
            && r.get("uid").and_then(Value::as_str) == Some(uid)
    })
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
