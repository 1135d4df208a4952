//! The host's own finalizer on a primary: added before a finalizing plugin's first write,
//! removed once its `finalize` is done (or when the plugin no longer finalizes).

use super::Applier;
use crate::watch::Resolved;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::json;

impl Applier {
    /// Adds (`present`) or removes `finalizer` on `primary` unless it already is so. The whole
    /// list is written as a merge patch pinned to the resourceVersion it was read at: if the
    /// object moved on (someone else's finalizer came or went) the API server answers 409 and the
    /// reconcile is retried on the new version, so no one else's finalizer is ever lost. Returns
    /// whether a request was sent; a primary already gone is not an error.
    pub async fn set_finalizer(
        &self,
        r: &Resolved,
        primary: &DynamicObject,
        finalizer: &str,
        present: bool,
    ) -> Result<bool, kube::Error> {
        let list = primary.metadata.finalizers.clone().unwrap_or_default();
        if list.iter().any(|f| f == finalizer) == present {
            return Ok(false);
        }
        let next: Vec<String> = if present {
            list.into_iter().chain(std::iter::once(finalizer.to_string())).collect()
        } else {
            list.into_iter().filter(|f| f != finalizer).collect()
        };
        let patch = json!({ "metadata": {
            "finalizers": next,
            "resourceVersion": primary.metadata.resource_version,
        }});
        let name = primary.metadata.name.clone().unwrap_or_default();
        let pp = PatchParams { field_manager: Some(self.field_manager.clone()), ..PatchParams::default() };
        match self.api(r, primary.metadata.namespace.as_deref()).patch(&name, &pp, &Patch::Merge(&patch)).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
            Err(e) => Err(e),
        }
    }
}
