//! The versions a plugin saw: the resourceVersion of every owned object in its request, so a
//! delete it decided is preconditioned on that view. An object changed during the call is then
//! refused by the API server (409, retried on the new view), never deleted on a stale decision.

use crate::vocab::Gvk;
use crate::watch::Cached;
use kube::api::DynamicObject;
use std::sync::Arc;

/// The owned objects of the plugin's request, as they were shown (shared with the cache: only
/// looked into when the outcome deletes something).
#[derive(Debug, Default)]
pub(crate) struct Seen<'a>(Vec<(&'a Gvk, Arc<Cached>)>);

impl<'a> Seen<'a> {
    /// Remembers `o` (of kind `gvk`) as the plugin sees it.
    pub(crate) fn record(&mut self, gvk: &'a Gvk, o: &Arc<Cached>) {
        self.0.push((gvk, o.clone()));
    }

    /// The objects shown, in the order of the request.
    pub(crate) fn objects(&self) -> impl Iterator<Item = (&'a Gvk, &Arc<Cached>)> + '_ {
        self.0.iter().map(|(g, o)| (*g, o))
    }

    /// `observed` (the cache now) carrying the resourceVersion the plugin saw, if it saw it.
    pub(crate) fn as_seen(
        &self,
        gvk: &Gvk,
        namespace: Option<&str>,
        name: &str,
        observed: Option<DynamicObject>,
    ) -> Option<DynamicObject> {
        let mut o = observed?;
        let shown = self.0.iter().find(|(g, s)| *g == gvk && s.namespace() == namespace && s.name() == name);
        if let Some((_, s)) = shown {
            o.metadata.resource_version = Some(s.resource_version().to_string());
        }
        Some(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(rv: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": "a", "namespace": "ns", "resourceVersion": rv, "uid": "u" }
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_seen_object_keeps_the_version_the_plugin_saw() {
        let g = Gvk::from_api_version("v1", "ConfigMap");
        let mut s = Seen::default();
        s.record(&g, &Arc::new(Cached::new(cm("1"))));
        let o = s.as_seen(&g, Some("ns"), "a", Some(cm("2")));
        assert_eq!(o.and_then(|o| o.metadata.resource_version).as_deref(), Some("1"));
        // Not in the request: the cache's version.
        let o = s.as_seen(&g, Some("ns"), "b", Some(cm("2")));
        assert_eq!(o.and_then(|o| o.metadata.resource_version).as_deref(), Some("2"));
        assert!(s.as_seen(&g, Some("ns"), "a", None).is_none(), "gone: nothing to delete");
    }
}
