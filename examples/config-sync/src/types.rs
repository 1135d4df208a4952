//! The objects config-sync reads and writes: the ConfigSync custom resource (spec and status),
//! and narrow views of the source, of Namespaces and of the copies it owns.
//!
//! Narrow types instead of k8s-openapi's keep the component small. Every field is optional or
//! defaulted, so an object parses whatever it holds: a spec the CRD would refuse (folder mode
//! has no API server to validate it) becomes an `InvalidSpec` condition, not a parse failure, and
//! a source's data is never inspected — it is copied as the JSON it is, so no parse error (whose
//! message could quote a value) can ever mention it.

use kwop_guest::conditions::Condition;
use kwop_guest::{Gvk, Meta};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// `examples.kwop.dev/v1alpha1`, kind `ConfigSync` (cluster-scoped).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct ConfigSync {
    /// Name, uid, generation.
    #[serde(default)]
    pub metadata: Meta,
    /// What to copy where.
    #[serde(default)]
    pub spec: ConfigSyncSpec,
    /// What the last reconcile reported (its conditions keep their transition times).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ConfigSyncStatus>,
}

/// `spec` of a ConfigSync.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ConfigSyncSpec {
    /// The object copied.
    #[serde(default)]
    pub source: SourceRef,
    /// The namespaces it is copied into (a `metav1.LabelSelector`; empty selects every namespace).
    #[serde(default)]
    pub namespace_selector: LabelSelector,
}

/// `spec.source`: which ConfigMap or Secret.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct SourceRef {
    /// `ConfigMap` or `Secret`.
    #[serde(default)]
    pub kind: String,
    /// Its namespace.
    #[serde(default)]
    pub namespace: String,
    /// Its name (the copies have the same name).
    #[serde(default)]
    pub name: String,
}

/// A `metav1.LabelSelector`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// `key: value` pairs, each an equality requirement.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<Requirement>,
}

/// One `metav1.LabelSelectorRequirement`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct Requirement {
    /// The label key.
    #[serde(default)]
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    #[serde(default)]
    pub operator: String,
    /// Values for `In` and `NotIn` (required non-empty there, forbidden for the others).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// `status` of a ConfigSync.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ConfigSyncStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Namespaces holding an up-to-date copy (the copies this reconcile applied).
    #[serde(default)]
    pub synced: u32,
    /// Namespaces where an object of the source's kind and name exists that config-sync did not
    /// create (sorted): nothing is written there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
}

/// The kinds config-sync copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `v1/ConfigMap`.
    ConfigMap,
    /// `v1/Secret`.
    Secret,
}

impl Kind {
    /// Both kinds.
    pub const ALL: [Kind; 2] = [Kind::ConfigMap, Kind::Secret];

    /// The kind of that name (`ConfigMap` or `Secret`, exactly).
    pub fn parse(kind: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == kind)
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ConfigMap => "ConfigMap",
            Kind::Secret => "Secret",
        }
    }

    /// Its group/version/kind (core group, `v1`).
    pub fn gvk(self) -> Gvk {
        Gvk::new("", "v1", self.as_str())
    }
}

/// The source object: only what a copy carries, each field as the JSON it is (a Secret's data
/// is base64 text, copied as it is).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    /// `data`.
    #[serde(default)]
    pub data: Option<Value>,
    /// `binaryData`.
    #[serde(default)]
    pub binary_data: Option<Value>,
    /// `type` (Secrets only).
    #[serde(default, rename = "type")]
    pub type_: Option<Value>,
}

/// A Namespace: its name and whether it is being deleted.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct Namespace {
    /// Name and deletion timestamp.
    #[serde(default)]
    pub metadata: NamespaceMeta,
    /// Phase.
    #[serde(default)]
    pub status: Option<NamespaceStatus>,
}

/// `metadata` of a Namespace.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceMeta {
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Set once the namespace is being deleted.
    #[serde(default)]
    pub deletion_timestamp: Option<Value>,
}

/// `status` of a Namespace.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct NamespaceStatus {
    /// `Active` or `Terminating`.
    #[serde(default)]
    pub phase: Option<Value>,
}

impl Namespace {
    /// Whether it is being deleted: the API server refuses to create objects in it.
    pub fn is_terminating(&self) -> bool {
        self.metadata.deletion_timestamp.as_ref().is_some_and(|t| !t.is_null())
            || self.status.as_ref().and_then(|s| s.phase.as_ref()).and_then(Value::as_str) == Some("Terminating")
    }
}

/// One object config-sync owns (a copy), as the request's owned objects name it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CopyRef {
    /// ConfigMap or Secret.
    pub kind: Kind,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl CopyRef {
    /// The owned copies among the request's owned objects (`Context::owned_json`): the
    /// ConfigMaps and Secrets (`v1`) with a namespace and a name. Only kind, namespace and name
    /// are read; a Secret's data is never looked at.
    pub fn from_owned(owned: &[Value]) -> Vec<CopyRef> {
        let mut out: Vec<CopyRef> = owned
            .iter()
            .filter(|o| o.get("apiVersion").and_then(Value::as_str) == Some("v1"))
            .filter_map(|o| {
                let kind = Kind::parse(o.get("kind")?.as_str()?)?;
                let text = |field: &str| o.pointer(&format!("/metadata/{field}"))?.as_str().filter(|s| !s.is_empty());
                Some(CopyRef { kind, namespace: text("namespace")?.to_string(), name: text("name")?.to_string() })
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }
}
