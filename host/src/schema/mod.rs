//! Offline schema checks: what the API server would refuse, found before a cluster sees it.
//!
//! `kwop plugin reconcile --crd FILE` and `kwop plugin test --crd FILE` load CustomResourceDefinitions
//! and check every applied object, and the primary's status, against the served version's
//! openAPIV3Schema ([`structural`]); built-in kinds are checked against their k8s-openapi types
//! ([`builtin`]). A CRD also tells whether its kind is namespaced.
//!
//! Floor 1 of 0–15 (`docs/ARCHITECTURE.md`). May use: `vocab`. Used by: `cli`, `offline`.

pub mod builtin;
pub mod structural;
pub mod values;

use crate::vocab::Gvk;
use serde_json::Value;
use std::collections::HashMap;
pub use structural::{Required, Violation};

/// Why CRD files could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// Not a CRD, or one without what is needed.
    #[error("{file}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
}

#[derive(Debug, Clone)]
struct Crd {
    namespaced: bool,
    schema: Option<Value>,
}

/// The kinds known from CRD files.
#[derive(Debug, Clone, Default)]
pub struct Schemas {
    crds: HashMap<Gvk, Crd>,
}

impl Schemas {
    /// Adds the CustomResourceDefinitions among `objects` (other kinds are an error).
    pub fn add_crds(&mut self, file: &str, objects: &[Value]) -> Result<(), SchemaError> {
        let invalid = |message: String| SchemaError::Invalid { file: file.to_string(), message };
        for o in objects {
            if o.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
                return Err(invalid(format!(
                    "expected a CustomResourceDefinition, found kind {}",
                    o.get("kind").map(Value::to_string).unwrap_or_else(|| "(none)".into())
                )));
            }
            let spec = o.get("spec").ok_or_else(|| invalid("a CRD without spec".into()))?;
            let group = spec.get("group").and_then(Value::as_str).unwrap_or_default();
            let kind = spec
                .pointer("/names/kind")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("a CRD without spec.names.kind".into()))?;
            let namespaced = spec.get("scope").and_then(Value::as_str) != Some("Cluster");
            for v in spec.get("versions").and_then(Value::as_array).into_iter().flatten() {
                let Some(version) = v.get("name").and_then(Value::as_str) else { continue };
                let schema = v
                    .pointer("/schema/openAPIV3Schema")
                    .or_else(|| spec.pointer("/validation/openAPIV3Schema"))
                    .cloned();
                self.crds.insert(Gvk::new(group, version, kind), Crd { namespaced, schema });
            }
        }
        Ok(())
    }

    /// Whether a kind is namespaced, when a CRD says.
    pub fn namespaced(&self, gvk: &Gvk) -> Option<bool> {
        self.crds.get(gvk).map(|c| c.namespaced)
    }

    /// What the API server would refuse in an applied object (a partial intent: `required` is
    /// not checked). Kinds with neither a CRD nor a built-in type pass.
    pub fn check_object(&self, object: &Value) -> Vec<Violation> {
        let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
        let gvk = Gvk::from_api_version(api_version, kind);
        if let Some(schema) = self.crds.get(&gvk).and_then(|c| c.schema.as_ref()) {
            let mut out = Vec::new();
            let mut body = object.clone();
            if let Some(map) = body.as_object_mut() {
                // The API server checks type and metadata itself; the CRD's schema covers the rest.
                for k in ["apiVersion", "kind", "metadata"] {
                    map.remove(k);
                }
            }
            structural::check(schema, &body, "", Required::Skip, &mut out);
            return out;
        }
        builtin::check(api_version, kind, object).unwrap_or_default()
    }

    /// What the API server would refuse in `status`, the new status of a primary of kind `gvk`.
    pub fn check_status(&self, gvk: &Gvk, status: &Value) -> Vec<Violation> {
        let Some(schema) = self.crds.get(gvk).and_then(|c| c.schema.as_ref()) else {
            return vec![];
        };
        let mut out = Vec::new();
        match schema.pointer("/properties/status") {
            Some(s) => structural::check(s, status, ".status", Required::Skip, &mut out),
            None if schema.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true) => {}
            None => out.push(Violation { path: ".status".into(), message: "field not declared in schema".into() }),
        }
        out
    }
}

#[cfg(test)]
mod tests;
