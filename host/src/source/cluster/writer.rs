//! Writing each ReconcilerPlugin's status (server-side apply of the status subresource, only
//! while this replica leads), and an Event on it for what changed since the last write
//! ([`status::happened`]: pulled, swapped, degraded, recovered, forbidden, conflict) — so
//! `kubectl describe rp` tells the story, not only the current conditions.

use super::{is_candidate, key_of, status, ClusterSource, CANDIDATE};
use crate::vocab::crd::ReconcilerPlugin;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use std::collections::BTreeMap;

impl ClusterSource {
    /// Writes every status that changed (server-side apply of the status subresource), only
    /// while this replica leads.
    pub(super) async fn write_statuses(&mut self) {
        self.health.set_reconcilerplugin_conditions(status::conditions(&self.plugins));
        if !self.leadership.may_write() {
            return;
        }
        let api: Api<ReconcilerPlugin> = Api::all(self.client.clone());
        let candidates: BTreeMap<String, status::CandidateKnown> = self
            .plugins
            .iter()
            .filter_map(|(n, p)| Some((n.strip_suffix(CANDIDATE)?.to_string(), p)))
            .map(|(n, p)| {
                let c = status::CandidateKnown {
                    key: p.key.clone(),
                    invalid: p.invalid.clone(),
                    fetched: p.fetched.as_ref().map(|f| f.sha256.clone()),
                    fetch_error: p.fetch_error.clone(),
                    state: self.candidates.get(&key_of(&n)),
                };
                (n, c)
            })
            .collect();
        for (name, p) in self.plugins.iter_mut().filter(|(n, _)| !is_candidate(n)) {
            let Some(rp) = &p.obj else { continue };
            let known = status::Known {
                generation: rp.metadata.generation,
                key: p.key.clone(),
                invalid: p.invalid.clone(),
                fetched: p.fetched.as_ref(),
                fetching: p.fetching.is_some(),
                fetch_error: p.fetch_error.as_ref(),
                report: p.report.as_ref(),
                synced: self.health.synced(&key_of(name)),
                suspend: rp.spec.suspend,
                candidate: candidates.get(name),
            };
            let old = p.written.as_ref().or(rp.status.as_ref());
            let want = status::compute(&known, old);
            if old.is_some_and(|o| status::same(o, &want)) {
                continue;
            }
            let body = serde_json::json!({
                "apiVersion": "kwop.dev/v1alpha1", "kind": "ReconcilerPlugin", "status": want,
            });
            match api.patch_status(name, &PatchParams::apply("kwop").force(), &Patch::Apply(&body)).await {
                Ok(_) => {
                    let reference = ObjectReference {
                        api_version: Some("kwop.dev/v1alpha1".into()),
                        kind: Some("ReconcilerPlugin".into()),
                        name: Some(name.clone()),
                        uid: rp.metadata.uid.clone(),
                        ..Default::default()
                    };
                    for (warning, reason, note) in status::happened(old, &want) {
                        let type_ = if warning { EventType::Warning } else { EventType::Normal };
                        let ev = Event {
                            type_,
                            reason: reason.into(),
                            note: Some(note),
                            action: "Status".into(),
                            secondary: None,
                        };
                        if let Err(e) = self.events.publish(&ev, &reference, &[]).await {
                            tracing::warn!(reconcilerplugin = %name, "cannot record event {reason}: {e}");
                        }
                    }
                    p.written = Some(want);
                }
                Err(e) => tracing::warn!(reconcilerplugin = %name, "cannot write status (retried): {e}"),
            }
        }
    }
}
