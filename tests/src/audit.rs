//! The test API server's audit log: every write it served (create, update, patch, delete), at
//! Metadata level, so tests can count what a host sent and what the API server answered.

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
}

/// The writes in `dir`'s audit log whose user agent contains `user_agent` (empty if there is no
/// log: an external cluster).
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
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n  verbs: [create, update, patch, delete, deletecollection]\n- level: None\n",
    )?;
    Ok(path)
}
