//! The test API server's audit log: every write it served (create, update, patch, delete), at
//! Metadata level, so tests can count what a host sent and what the API server answered; writes
//! of Foo status also with their body (which generation they report: see [`Write`]).

use anyhow::Result;
use std::path::{Path, PathBuf};

/// One write the API server served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditedWrite {
    /// create, update, patch, delete...
    pub verb: String,
    /// e.g. configmaps.
    pub resource: String,
    /// The object's namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The HTTP status code of the answer (e.g. 200, 409).
    pub code: u16,
    /// The request's `fieldManager` query parameter (empty when it had none).
    pub field_manager: String,
    /// The user agent (kwop's carries the replica's identity).
    pub user_agent: String,
    /// The subresource (e.g. status), empty for the object itself.
    pub subresource: String,
    /// When the API server received it (RFC 3339, microseconds: sorts as text).
    pub received: String,
    /// When it answered.
    pub answered: String,
    /// The request body, where the policy records it (Foo status writes).
    pub request: Option<serde_json::Value>,
}

/// The writes in `dir`'s audit log whose user agent contains `user_agent` (empty if there is no
/// log: an external cluster), in the order they were answered.
pub fn writes(dir: &Path, user_agent: &str) -> Vec<AuditedWrite> {
    let text = std::fs::read_to_string(dir.join("audit.log")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete")
        .filter(|e| e["userAgent"].as_str().is_some_and(|u| u.contains(user_agent)))
        .map(|e| {
            let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
            AuditedWrite {
                verb: s(&e["verb"]),
                resource: s(&e["objectRef"]["resource"]),
                namespace: s(&e["objectRef"]["namespace"]),
                name: s(&e["objectRef"]["name"]),
                code: e["responseStatus"]["code"].as_u64().and_then(|c| u16::try_from(c).ok()).unwrap_or(0),
                field_manager: e["requestURI"]
                    .as_str()
                    .and_then(|u| u.split_once('?'))
                    .and_then(|(_, q)| q.split('&').find_map(|kv| kv.strip_prefix("fieldManager=")))
                    .unwrap_or_default()
                    .to_string(),
                user_agent: s(&e["userAgent"]),
                subresource: s(&e["objectRef"]["subresource"]),
                received: s(&e["requestReceivedTimestamp"]),
                answered: s(&e["stageTimestamp"]),
                request: e.get("requestObject").cloned(),
            }
        })
        .collect()
}

/// Writes the audit policy into `dir`: every write (not reads: they would fill the disk) at
/// Metadata level.
pub fn policy(dir: &Path) -> Result<PathBuf> {
    let path = dir.join("audit-policy.yaml");
    std::fs::write(
        &path,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n\
- level: Request\n  verbs: [update, patch]\n  resources: [{group: samplecontroller.k8s.io, resources: [foos/status]}]\n\
- level: Metadata\n  verbs: [create, update, patch, delete, deletecollection]\n- level: None\n",
    )?;
    Ok(path)
}
