//! The Deployment guest-foo applies, as narrow typed structs: only the fields the intent sets,
//! with k8s-openapi's field names and JSON. A server-side apply intent is exactly these fields, so
//! nothing is lost — and k8s-openapi's serialiser for the whole `Deployment` (every field of
//! `PodSpec`, `Container`, ...) is most of a megabyte of WebAssembly that guest-foo does not ship.

use serde::Serialize;
use std::collections::BTreeMap;

/// `apps/v1` `Deployment`, as guest-foo applies it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Deployment {
    /// `apps/v1`.
    pub api_version: &'static str,
    /// `Deployment`.
    pub kind: &'static str,
    /// Name, namespace, annotations.
    pub metadata: Meta,
    /// The spec.
    pub spec: DeploymentSpec,
}

/// The metadata an intent sets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Meta {
    /// Name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// `DeploymentSpec`: replicas, selector, template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeploymentSpec {
    /// Unset leaves the API server's default (1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The Pods it manages.
    pub selector: LabelSelector,
    /// The Pods it makes.
    pub template: PodTemplateSpec,
}

/// `LabelSelector` with `matchLabels` only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels to match.
    pub match_labels: BTreeMap<String, String>,
}

/// `PodTemplateSpec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodTemplateSpec {
    /// The Pods' labels.
    pub metadata: Meta,
    /// The Pods' spec.
    pub spec: PodSpec,
}

/// `PodSpec` with its containers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodSpec {
    /// Containers.
    pub containers: Vec<Container>,
}

/// A `Container`: name and image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Container {
    /// Name.
    pub name: String,
    /// Image.
    pub image: String,
}
