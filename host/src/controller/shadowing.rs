//! A reconcile's plugin call seen by the shadow machinery: a candidate started on the same
//! request, and the call recorded as a fixture (`--record`). Neither ever writes to the cluster.

use crate::watch::view::RecordingCache;
use super::Inner;
use crate::plugin::{CallError, CallSpec, LoadedPlugin, RawResult, Request};
use crate::shadow::record::Recording;
use crate::plugin::ShadowCall;
use crate::shadow;
use crate::telemetry::Metrics;
use crate::watch::ObjectKey;
use std::sync::Arc;
use std::time::SystemTime;

/// What the call's watchers need once it returns.
pub(super) struct Watch {
    candidate: Option<Box<dyn ShadowCall>>,
    recorded: Option<(Request, SystemTime)>,
}

impl Inner {
    /// Before the active call: starts the candidate (if any, and a slot is free) and keeps the
    /// request for the recorder. `None` when nobody watches.
    pub(super) fn watch_call(
        &self,
        plugin: &LoadedPlugin,
        req: &Request,
        spec: &CallSpec,
        ns: Option<String>,
    ) -> Option<Watch> {
        let recording = self.shared.recorder.is_some();
        if plugin.shadow.is_none() && !recording {
            return None;
        }
        let candidate = plugin.shadow.as_ref().and_then(|c| {
            let view = Arc::new(RecordingCache::new(self.caches.clone(), ns, plugin.grants.clone()));
            c.clone().begin(req, spec, view)
        });
        let recorded = recording.then(|| (req.clone(), spec.started_at));
        Some(Watch { candidate, recorded })
    }

    /// After the active call: hands its outcome to the candidate's comparison and the recorder.
    pub(super) fn watched_call(
        &self,
        key: &ObjectKey,
        plugin: &LoadedPlugin,
        r: &Result<RawResult, CallError>,
        w: Watch,
        view: &RecordingCache,
    ) {
        let result = shadow::compare::result_json(r, &self.shared.config.outcome_limits);
        let name = plugin.info.name.clone();
        if let Some(p) = w.candidate {
            p.finish(key.to_string(), result.clone());
        }
        if let (Some(rec), Some((req, started_at))) = (&self.shared.recorder, w.recorded) {
            let mut observed = req.owned;
            observed.extend(view.take_answers());
            let taken = rec.record(&Recording {
                plugin: name.clone(),
                version: plugin.info.version.clone(),
                sha256: plugin.sha256.clone(),
                object: key.to_string(),
                primary: req.primary,
                observed,
                started_at,
                result,
            });
            if taken {
                self.shared.metrics.recorded.get_or_create(&Metrics::plugin(&name)).inc();
            }
        }
    }
}
