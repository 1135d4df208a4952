//! The supervisor: one task owning every plugin slot, driven by commands (a folder rescan, a
//! catalog pushed by the ReconcilerPlugin source, leadership) and by the results of the work it
//! hands out.
//!
//! Nothing slow runs on its loop: folder scans, compiles, `info()` calls, controller starts
//! (discovery, watches) and stops (bounded by `--shutdown-grace`) are spawned, and report back
//! as events. So one plugin's 20 s compile or a stop waiting on a stuck call never delays
//! another plugin's swap, a leadership change or a shutdown; the loop beats every second and
//! `/healthz` fails if it stops beating.

use super::report::{reason_of_load_label, Report, State};
use super::slot::{status_of, Slot};
use crate::controller::{Controller, Shared, StartError};
use crate::plugin::{LimitSet, LoadError, LoadedPlugin, PluginEngine};
use crate::source::{folder, grants::Grants, Catalog, Entry};
use crate::telemetry::metrics::LoadLabels;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// What the supervisor can be asked to do.
#[derive(Debug)]
pub enum Command {
    /// Something changed in the folder.
    Rescan,
    /// Everything the ReconcilerPlugin source offers now.
    Catalog(Catalog),
    /// Leadership gained (`true`) or lost (`false`).
    SetActive(bool),
    /// Stop every controller (each within the shutdown grace), then answer.
    Shutdown(oneshot::Sender<()>),
}

/// Results of work the supervisor spawned.
pub(super) enum Event {
    Scanned(std::io::Result<folder::Scan>),
    Loaded { file: String, fingerprint: String, result: Box<Result<LoadedPlugin, LoadError>> },
    Started { file: String, result: Result<Controller, StartError> },
    Stopped { file: String },
}

/// Owns the plugin slots.
pub struct Supervisor {
    /// The plugin folder; `None` when a source pushes catalogs.
    dir: Option<PathBuf>,
    pub(super) engine: Arc<PluginEngine>,
    limits: Arc<LimitSet>,
    pub(super) shared: Arc<Shared>,
    pub(super) slots: BTreeMap<String, Slot>,
    pub(super) active: bool,
    pub(super) shutdown: Option<oneshot::Sender<()>>,
    scanning: bool,
    rescan_at: Option<Instant>,
    pub(super) events: (mpsc::UnboundedSender<Event>, mpsc::UnboundedReceiver<Event>),
    pub(super) reports: Option<mpsc::UnboundedSender<Report>>,
}

/// How often failed controller starts are retried and the folder rescanned without a trigger.
const RETRY: Duration = Duration::from_secs(10);
/// A copy or a ConfigMap update is several file events: rescan once they settle.
const DEBOUNCE: Duration = Duration::from_millis(150);

impl Supervisor {
    /// A supervisor following the plugin folder `dir` (nothing loaded yet).
    pub fn new(dir: PathBuf, engine: Arc<PluginEngine>, limits: LimitSet, shared: Arc<Shared>) -> Self {
        Self::with_source(Some(dir), engine, limits, shared)
    }

    /// A supervisor fed by [`Command::Catalog`], reporting on every plugin to `reports`.
    pub fn pushed(
        engine: Arc<PluginEngine>,
        limits: LimitSet,
        shared: Arc<Shared>,
        reports: mpsc::UnboundedSender<Report>,
    ) -> Self {
        let mut s = Self::with_source(None, engine, limits, shared);
        s.reports = Some(reports);
        s
    }

    fn with_source(dir: Option<PathBuf>, engine: Arc<PluginEngine>, limits: LimitSet, shared: Arc<Shared>) -> Self {
        Supervisor {
            dir,
            engine,
            limits: Arc::new(limits),
            shared,
            slots: BTreeMap::new(),
            active: false,
            shutdown: None,
            scanning: false,
            rescan_at: None,
            events: mpsc::unbounded_channel(),
            reports: None,
        }
    }

    /// Loads what is in the folder now, or the first catalog a source pushes on `rx` (called once
    /// before serving readiness).
    pub async fn initial_scan(&mut self, rx: &mut mpsc::Receiver<Command>) -> anyhow::Result<()> {
        match &self.dir {
            Some(dir) if !dir.is_dir() => {
                anyhow::bail!("plugin folder {} does not exist or is not a folder", dir.display())
            }
            Some(_) => self.start_scan(),
            None => loop {
                match rx.recv().await {
                    Some(Command::Catalog(c)) => break self.on_catalog(c),
                    Some(Command::SetActive(a)) => self.active = a,
                    Some(_) => {}
                    None => anyhow::bail!("the plugin source stopped before its first catalog"),
                }
            },
        }
        while self.scanning || self.slots.values().any(|s| s.loading.is_some()) {
            let Some(ev) = self.events.1.recv().await else { break };
            self.on_event(ev);
        }
        self.shared.health.set_loaded();
        let names: Vec<&str> =
            self.slots.values().filter_map(|s| s.good.as_ref()).map(|g| g.info.name.as_str()).collect();
        for name in self.limits.unmatched(&names) {
            tracing::warn!(plugin = name, "--plugin-limit names a plugin that is not loaded (a typo?); it applies when a plugin of that name appears");
        }
        self.publish_unmatched();
        Ok(())
    }

    /// Runs until shut down.
    pub async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut last_retry = Instant::now();
        loop {
            self.shared.health.supervisor_beat();
            let rescan_at = self.rescan_at;
            tokio::select! {
                c = rx.recv(), if self.shutdown.is_none() => match c {
                    Some(Command::Rescan) => {
                        self.rescan_at.get_or_insert(Instant::now() + DEBOUNCE);
                    }
                    Some(Command::Catalog(c)) => self.on_catalog(c),
                    Some(Command::SetActive(a)) => self.set_active(a),
                    Some(Command::Shutdown(done)) => self.begin_shutdown(Some(done)),
                    None => self.begin_shutdown(None),
                },
                Some(ev) = self.events.1.recv() => self.on_event(ev),
                _ = async { tokio::time::sleep_until(rescan_at.unwrap_or_else(Instant::now)).await }, if rescan_at.is_some() => {
                    self.rescan_at = None;
                    self.start_scan();
                }
                _ = tick.tick() => {
                    if last_retry.elapsed() >= RETRY && self.shutdown.is_none() {
                        last_retry = Instant::now();
                        self.start_scan();
                        let files: Vec<String> = self.slots.keys().cloned().collect();
                        files.iter().for_each(|f| self.drive(f));
                    }
                }
            }
            if self.shutdown.is_some() && self.slots.values().all(Slot::idle) {
                if let Some(done) = self.shutdown.take() {
                    let _ = done.send(());
                }
                return;
            }
        }
    }

    fn begin_shutdown(&mut self, done: Option<oneshot::Sender<()>>) {
        let (tx, _rx) = oneshot::channel();
        self.shutdown = Some(done.unwrap_or(tx));
        self.active = false;
        for slot in self.slots.values_mut() {
            if let Some(l) = slot.loading.take() {
                l.abort();
            }
        }
        self.drive_all();
    }

    fn set_active(&mut self, active: bool) {
        if active != self.active {
            self.active = active;
            self.drive_all();
            let files: Vec<String> = self.slots.keys().cloned().collect();
            for f in files {
                let state = match self.slots.get(&f) {
                    Some(s) if s.controller.is_some() && active => State::Running,
                    Some(s) if s.good.is_some() && !active => State::Idle,
                    _ => continue,
                };
                self.report(&f, state);
            }
        }
    }

    pub(super) fn drive_all(&mut self) {
        let files: Vec<String> = self.slots.keys().cloned().collect();
        files.iter().for_each(|f| self.drive(f));
    }

    fn start_scan(&mut self) {
        let Some(dir) = self.dir.clone() else { return };
        if self.scanning {
            // One at a time; the next one starts when this one reports.
            self.rescan_at.get_or_insert(Instant::now() + DEBOUNCE);
            return;
        }
        self.scanning = true;
        let tx = self.events.0.clone();
        tokio::spawn(async move {
            let r = tokio::task::spawn_blocking(move || folder::scan(&dir))
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())));
            let _ = tx.send(Event::Scanned(r));
        });
    }

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Scanned(r) => {
                self.scanning = false;
                match r {
                    Ok(scan) => self.on_catalog(folder::catalog(scan)),
                    Err(e) => tracing::error!(dir = ?self.dir, "cannot list the plugin folder: {e}"),
                }
            }
            Event::Loaded { file, fingerprint, result } => self.on_loaded(file, fingerprint, *result),
            Event::Started { file, result } => {
                if !self.slots.contains_key(&file) {
                    // The file went away while its controller started: stop what started.
                    if let Ok(c) = result {
                        let grace = self.shared.config.shutdown_grace;
                        tokio::spawn(c.stop(grace));
                    }
                    return;
                }
                if let Some(slot) = self.slots.get_mut(&file) {
                    slot.busy = false;
                    slot.starting = None;
                    match result {
                        Ok(c) => {
                            slot.controller = Some(c);
                            slot.start_error = None;
                            self.report(&file, State::Running);
                        }
                        Err(e) => {
                            tracing::error!(file, "cannot start controller (retrying every {}s): {e}", RETRY.as_secs());
                            let reason =
                                if matches!(e, StartError::Forbidden(_)) { "Forbidden" } else { "Unavailable" };
                            if let Some(g) = &slot.good {
                                // Listed, not synced: the host is not ready while a plugin cannot run.
                                let mut status = status_of(&file, g);
                                status.last_error = Some(e.to_string());
                                self.shared.health.set_plugin(&file, status);
                            }
                            slot.start_error = Some((e.to_string(), Instant::now() + RETRY));
                            self.report(&file, State::StartFailed { reason, message: e.to_string() });
                        }
                    }
                }
                self.drive(&file);
            }
            Event::Stopped { file } => {
                if let Some(slot) = self.slots.get_mut(&file) {
                    slot.busy = false;
                    if !slot.removed {
                        self.shared.health.set_stopped(&file);
                    }
                }
                self.drive(&file);
                // A stopped controller may free a primary kind another plugin waits for.
                self.drive_all();
            }
        }
    }

    fn on_catalog(&mut self, catalog: Catalog) {
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
            slot.entry = Some(entry);
            let task = tokio::spawn(async move {
                let e2 = engine.clone();
                let compiled = tokio::task::spawn_blocking(move || LoadedPlugin::compile(&e2, &bytes, &path)).await;
                let result = match compiled {
                    Ok(Ok(c)) => LoadedPlugin::from_compiled(&engine, c, &limits).await,
                    Ok(Err(e)) => Err(e),
                    Err(e) => Err(LoadError::NotAComponent(format!("compiler task failed: {e}"))),
                };
                let _ = tx.send(Event::Loaded { file: f, fingerprint: fp, result: Box::new(result) });
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

    fn on_loaded(&mut self, file: String, fingerprint: String, result: Result<LoadedPlugin, LoadError>) {
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

    pub(super) fn publish_unmatched(&self) {
        let names: Vec<&str> =
            self.slots.values().filter_map(|s| s.good.as_ref()).map(|g| g.info.name.as_str()).collect();
        let unmatched = self.limits.unmatched(&names).into_iter().map(str::to_string).collect();
        self.shared.health.set_unmatched_limits(unmatched);
    }
}
