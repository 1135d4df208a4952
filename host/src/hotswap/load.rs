//! Taking what a source offers: each entry loaded (compiled, `info()` run) in the background
//! under its limits, checked against its grants and the one-plugin-per-kind rule, and kept as the
//! plugin's good version, or refused with the reason a status or /plugins shows.

use super::slot::status_of;
use super::supervisor::{Event, Loaded, Supervisor};
use crate::plugin::{LimitSet, LoadError, LoadedPlugin, PluginEngine, Shadow};
use crate::shadow::stats::{CandidateState, Stats};
use crate::shadow::Candidate;
use crate::source::report::{reason_of_load_label, State};
use crate::source::{Catalog, Entry};
use crate::telemetry::metrics::LoadLabels;
use crate::vocab::grants::Grants;
use std::sync::Arc;

impl Supervisor {
    pub(super) fn on_catalog(&mut self, catalog: Catalog) {
        let Catalog { entries, errors } = catalog;
        for (file, e) in errors {
            tracing::error!(file, "plugin rejected: {e}");
        }
        let removed: Vec<String> = self
            .slots
            .iter()
            .filter(|(f, s)| !s.removed && !entries.contains_key(*f))
            .map(|(f, _)| f.clone())
            .collect();
        for file in removed {
            if let Some(slot) = self.slots.get_mut(&file) {
                slot.removed = true;
                if let Some(l) = slot.loading.take() {
                    l.abort();
                    tracing::info!(file, "plugin removed while it was loading; the load is abandoned");
                }
                tracing::info!(file, "plugin removed; stopping its controller, nothing deleted in the cluster");
            }
            self.drive(&file);
        }
        for (file, entry) in entries {
            let fingerprint = entry.fingerprint();
            let limits = self.limits_for(&entry);
            let slot = self.slots.entry(file.clone()).or_default();
            let suspend_changed = slot.entry.as_ref().is_some_and(|e| e.suspend != entry.suspend);
            if slot.seen == fingerprint && !slot.removed {
                slot.entry = Some(entry);
                if suspend_changed {
                    self.drive(&file);
                    self.report_idle_or_running(&file);
                }
                continue;
            }
            slot.removed = false;
            slot.seen = fingerprint.clone();
            if let Some(l) = slot.loading.take() {
                l.abort();
            }
            let limits = match limits {
                Ok(l) => l,
                Err(msg) => {
                    slot.entry = Some(entry);
                    self.load_failed(&file, "invalid", msg);
                    continue;
                }
            };
            let (engine, tx, f, fp) = (self.engine.clone(), self.events.0.clone(), file.clone(), fingerprint);
            tracing::info!(file, sha256 = %entry.sha256, origin = %entry.origin.display(), "loading plugin");
            let (path, bytes) = (entry.origin.clone(), entry.bytes.clone());
            let shadow = entry.candidate.clone();
            slot.entry = Some(entry);
            let task = tokio::spawn(async move {
                let plugin = load(&engine, bytes, path, &limits).await;
                let candidate = match shadow {
                    Some(c) => Some(load(&engine, c.bytes, c.origin, &limits).await),
                    None => None,
                };
                let _ =
                    tx.send(Event::Loaded { file: f, fingerprint: fp, result: Box::new(Loaded { plugin, candidate }) });
            });
            slot.loading = Some(task.abort_handle());
            self.report(&file, State::Loading);
        }
    }

    /// The limits an entry loads under: the host's, with the entry's own over them.
    fn limits_for(&self, entry: &Entry) -> Result<LimitSet, String> {
        let o = &entry.limits;
        if o.memory.is_none() && o.timeout.is_none() {
            return Ok((*self.limits).clone());
        }
        let mut l = self.limits.default.clone();
        if let Some(m) = o.memory {
            let max = self.engine.config.max_memory_bytes;
            if m > max {
                return Err(format!(
                    "spec.limits.memory ({m} bytes) is above the host's largest plugin memory ({max} bytes, --plugin-memory-max)"
                ));
            }
            l.memory_bytes = m;
        }
        l.deadline = o.timeout.unwrap_or(l.deadline);
        Ok(LimitSet::from(l))
    }

    pub(super) fn on_loaded(
        &mut self,
        file: String,
        fingerprint: String,
        result: Result<LoadedPlugin, LoadError>,
        candidate: Option<Result<LoadedPlugin, LoadError>>,
    ) {
        let Some(slot) = self.slots.get_mut(&file) else {
            tracing::info!(file, "plugin removed while it was loading; discarded");
            return;
        };
        if slot.seen != fingerprint || slot.removed {
            tracing::info!(file, fingerprint, "plugin changed or removed while it was loading; discarded");
            return;
        }
        slot.loading = None;
        // Gone since, and the folder scan has not told yet: do not start it (the scan removes
        // the slot).
        if self.dir.as_ref().is_some_and(|d| !d.join(&file).is_file()) {
            tracing::info!(file, fingerprint, "plugin file removed while it was loading; discarded");
            return;
        }
        let mut plugin = match result {
            Ok(p) => p,
            Err(e) => return self.load_failed(&file, e.label(), e.to_string()),
        };
        // Another name for the same primary kind is a new version renaming the plugin (another
        // kind too is another plugin in the same place: as a removal and an addition).
        let renamed = |g: &&Arc<LoadedPlugin>| {
            g.info.name != plugin.info.name && g.info.primary.same_group_kind(&plugin.info.primary)
        };
        if let Some(old) = slot.good.as_ref().filter(renamed) {
            let msg = format!(
                "the new version's info() says its name is {:?}, the running version's is {:?}: a plugin's name is its \
                 finalizer (kwop.dev/<name>), its objects' tracking label and its field manager, so a version that \
                 changes it is refused and the running one is kept (to rename: remove this plugin, then add the \
                 renamed one)",
                plugin.info.name, old.info.name
            );
            if let Some(rp) = file.strip_prefix("reconcilerplugin/") {
                let reference = k8s_openapi::api::core::v1::ObjectReference {
                    api_version: Some("kwop.dev/v1alpha1".into()),
                    kind: Some("ReconcilerPlugin".into()),
                    name: Some(rp.into()),
                    ..Default::default()
                };
                crate::report::host_warning(&self.shared.client, reference, "Renamed", &msg);
            }
            return self.load_failed(&file, "renamed", msg);
        }
        let entry = slot.entry.clone();
        match entry.as_ref().and_then(|e| e.grants.clone()) {
            Some(g) => {
                if let Err(msg) = g.check(&plugin.info) {
                    // The admin's grants changed under a running version: it stops too.
                    if slot.good.as_ref().is_some_and(|old| old.grants != g) {
                        slot.good = None;
                        self.drive(&file);
                    }
                    return self.load_failed(&file, "forbidden", msg);
                }
                if plugin.info.converts() && !g.conversion {
                    not_granted_conversion(&self.shared.client, &file, &plugin.info);
                }
                plugin.grants = g;
            }
            None => {
                tracing::warn!(file, plugin = %plugin.info.name, "folder mode: the plugin's own info() is its authority (a cluster grants it with a ReconcilerPlugin)");
                plugin.grants = Arc::new(Grants::from_info(&plugin.info));
            }
        }
        plugin.limits.concurrency = entry.as_ref().and_then(|e| e.limits.concurrency);
        if let Some(holder) = self.running_holder(&file, &plugin.info.primary) {
            if self.slots.get(&file).is_some_and(|s| s.good.is_some()) {
                let msg = format!(
                    "{}: {}; the running version is kept",
                    file,
                    super::drive::conflict_message(&holder, &plugin.info.primary)
                );
                return self.load_failed(&file, "conflict", msg);
            }
        }
        let taken = self.slots.iter().find(|(f, s)| {
            // Same name and same primary kind: the one-plugin-per-kind rule decides (Conflict).
            **f != file
                && s.good.as_ref().is_some_and(|g| {
                    g.info.name == plugin.info.name && !g.info.primary.same_group_kind(&plugin.info.primary)
                })
        });
        if let Some((other, _)) = taken {
            let msg = format!(
                "plugin name {:?} is already provided by {other}; names must be unique (they name the field manager)",
                plugin.info.name
            );
            return self.load_failed(&file, "duplicate_name", msg);
        }
        tracing::info!(file, plugin = %plugin.info.name, version = %plugin.info.version, sha256 = %plugin.sha256,
            precompiled_cache_hit = plugin.from_cache, "plugin loaded");
        // The swap (or first start) is its own trace.
        let _swap = tracing::info_span!("plugin.swap", file, plugin = %plugin.info.name,
            version = %plugin.info.version, digest = %plugin.sha256)
        .entered();
        let sha = entry.as_ref().and_then(|e| e.candidate.as_ref()).map(|c| c.sha256.clone()).unwrap_or_default();
        plugin.shadow = self.attach_candidate(&file, &plugin, sha, candidate);
        let plugin = Arc::new(plugin);
        if let Some(slot) = self.slots.get_mut(&file) {
            slot.good = Some(plugin.clone());
            if slot.controller.is_none() && !slot.busy {
                self.shared.health.set_plugin(&file, status_of(&file, &plugin));
            }
        }
        self.publish_unmatched();
        self.report(&file, State::Loaded);
        self.drive(&file);
        if self.slots.get(&file).is_some_and(|s| s.controller.is_some()) {
            self.report(&file, State::Running);
        }
    }

    pub(super) fn load_failed(&mut self, file: &str, reason: &str, msg: String) {
        self.regrant_running(file);
        let kept =
            self.slots.get(file).and_then(|s| s.good.as_ref()).map(|g| format!("{} {}", g.info.name, g.info.version));
        match &kept {
            Some(k) => {
                tracing::error!(file, reason, kept_running = %k, "plugin file rejected, previous version keeps running: {msg}")
            }
            None => tracing::error!(file, reason, "plugin file rejected: {msg}"),
        }
        self.shared
            .metrics
            .load_failures
            .get_or_create(&LoadLabels { file: file.to_string(), reason: reason.to_string() })
            .inc();
        self.shared.health.set_rejected(file, msg.clone());
        let state = State::Rejected { reason: reason_of_load_label(reason), message: msg, kept: kept.is_some() };
        self.report(file, state);
    }

    /// A reload that failed (invalid limits, a bad component...) must not leave the running version
    /// under grants the admin has since changed (issue 35: a narrowing failed open): it runs on
    /// under the entry's grants, or stops if what it declares goes beyond them.
    fn regrant_running(&mut self, file: &str) {
        let Some(slot) = self.slots.get_mut(file) else { return };
        let (Some(good), Some(grants)) = (slot.good.clone(), slot.entry.as_ref().and_then(|e| e.grants.clone())) else {
            return;
        };
        if good.grants == grants {
            return;
        }
        match grants.check(&good.info) {
            Ok(()) => {
                tracing::warn!(file, plugin = %good.info.name, "the new version was not loaded; the running one takes the new grants");
                slot.good = Some(Arc::new(good.with_grants(grants)));
                self.shared.candidates.set(file, None);
            }
            Err(m) => {
                tracing::error!(file, plugin = %good.info.name, "the new version was not loaded and the running one is not allowed by the new grants: stopped ({m})");
                slot.good = None;
            }
        }
        self.drive(file);
    }

    /// Checks a candidate against the active version it is to shadow: the same grants, and only
    /// kinds the active version watches (it sees what the active version sees). Records where it
    /// stands for `status.candidate`.
    fn attach_candidate(
        &self,
        file: &str,
        active: &LoadedPlugin,
        sha256: String,
        candidate: Option<Result<LoadedPlugin, LoadError>>,
    ) -> Option<Arc<dyn Shadow>> {
        let registry = &self.shared.candidates;
        let mut c = match candidate {
            None => {
                registry.set(file, None);
                return None;
            }
            Some(Ok(c)) => c,
            Some(Err(e)) => {
                tracing::error!(file, "candidate rejected; the active version runs without it: {e}");
                let reason = reason_of_load_label(e.label());
                registry.set(file, Some(CandidateState::Refused { sha256, reason, message: e.to_string() }));
                return None;
            }
        };
        let refused = if let Err(m) = active.grants.check(&c.info) {
            Some(("Forbidden", m))
        } else if !active.info.primary.same_group_kind(&c.info.primary)
            || !c.info.owns.iter().all(|g| active.info.owns.iter().any(|a| a.same_group_kind(g)))
            || !c.info.reads.iter().all(|g| active.info.readable().any(|a| a.same_group_kind(g)))
        {
            Some((
                "Mismatch",
                format!(
                    "the candidate's kinds (primary {}, owns {:?}, reads {:?}) must be among the active version's (primary {}, owns {:?}, reads {:?}): it sees only what the active version watches",
                    c.info.primary, c.info.owns, c.info.reads, active.info.primary, active.info.owns, active.info.reads
                ),
            ))
        } else {
            None
        };
        if let Some((reason, message)) = refused {
            tracing::error!(file, reason, "candidate rejected; the active version runs without it: {message}");
            registry.set(file, Some(CandidateState::Refused { sha256, reason, message }));
            return None;
        }
        c.grants = active.grants.clone();
        // Another load of the same candidate (the active one was reloaded) keeps its counts.
        let stats = match registry.get(file) {
            Some(CandidateState::Running { sha256: s, stats, .. }) if s == c.sha256 => stats,
            _ => Arc::new(Stats::default()),
        };
        tracing::info!(file, candidate = %c.info.name, version = %c.info.version, sha256 = %c.sha256, "candidate loaded; it runs in shadow and writes nothing");
        let state =
            CandidateState::Running { version: c.info.version.clone(), sha256: c.sha256.clone(), stats: stats.clone() };
        registry.set(file, Some(state));
        let concurrency = active.limits.concurrency.unwrap_or(self.shared.config.workers);
        let (limits, metrics) = (self.shared.config.outcome_limits.clone(), self.shared.metrics.clone());
        Some(Arc::new(Candidate::new(Arc::new(c), stats, concurrency, limits, metrics, active.info.name.clone())))
    }
}

/// Compiles (blocking, off the runtime) and loads one component.
async fn load(
    engine: &Arc<PluginEngine>,
    bytes: Arc<Vec<u8>>,
    path: std::path::PathBuf,
    limits: &LimitSet,
) -> Result<LoadedPlugin, LoadError> {
    use tracing::Instrument;
    let e2 = engine.clone();
    // One trace per load: compiling (or the precompiled cache) and the plugin's info().
    let span = tracing::info_span!("plugin.load", file = %path.display(), bytes = bytes.len(),
        result = tracing::field::Empty);
    let compile = tracing::debug_span!(parent: &span, "compile");
    let compiled =
        tokio::task::spawn_blocking(move || compile.in_scope(|| LoadedPlugin::compile(&e2, &bytes, &path))).await;
    let r = match compiled {
        Ok(Ok(c)) => {
            let info = tracing::debug_span!(parent: &span, "plugin.call", export = "info");
            LoadedPlugin::from_compiled(engine, c, limits).instrument(info).await
        }
        Ok(Err(e)) => Err(e),
        Err(e) => Err(LoadError::NotAComponent(format!("compiler task failed: {e}"))),
    };
    span.record(
        "result",
        match &r {
            Ok(_) => "loaded",
            Err(e) => e.label(),
        },
    );
    r
}

/// A plugin that declares `converts` without `grants.conversion`: it runs, is not asked to
/// convert, and its ReconcilerPlugin gets a Warning event saying so (the log too).
fn not_granted_conversion(client: &kube::Client, file: &str, info: &crate::vocab::PluginInfo) {
    let msg = format!(
        "plugin {} converts {:?} but its ReconcilerPlugin does not grant the conversion (spec.grants.conversion: \
         true): it runs, and the CRD's conversion is left as it is",
        info.name, info.converts
    );
    tracing::warn!(file, plugin = %info.name, "{msg}");
    if let Some(rp) = file.strip_prefix("reconcilerplugin/") {
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("kwop.dev/v1alpha1".into()),
            kind: Some("ReconcilerPlugin".into()),
            name: Some(rp.into()),
            ..Default::default()
        };
        crate::report::host_warning(client, reference, "ConversionNotGranted", &msg);
    }
}
