//! The supervisor: one task owning every plugin slot, driven by commands (a folder rescan, a
//! catalog pushed by the ReconcilerPlugin source, leadership) and by the results of the work it
//! hands out.
//!
//! Nothing slow runs on its loop: folder scans, compiles, `info()` calls, controller starts
//! (discovery, watches) and stops (bounded by `--shutdown-grace`) are spawned, and report back
//! as events. So one plugin's 20 s compile or a stop waiting on a stuck call never delays
//! another plugin's swap, a leadership change or a shutdown; the loop beats every second and
//! `/healthz` fails if it stops beating.

use super::slot::{status_of, Slot};
use crate::controller::{Controller, Shared, StartError};
use crate::plugin::{LimitSet, LoadError, LoadedPlugin, PluginEngine};
use crate::source::report::{Report, State};
use crate::source::{folder, Command};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// Results of work the supervisor spawned.
pub(super) enum Event {
    Scanned(std::io::Result<folder::Scan>),
    Loaded { file: String, fingerprint: String, result: Box<Loaded> },
    Started { file: String, result: Result<Controller, StartError> },
    Stopped { file: String },
}

/// A load's result: the plugin, and its candidate if the entry has one.
pub(super) struct Loaded {
    pub plugin: Result<LoadedPlugin, LoadError>,
    pub candidate: Option<Result<LoadedPlugin, LoadError>>,
}

/// Owns the plugin slots.
pub struct Supervisor {
    /// The plugin folder; `None` when a source pushes catalogs.
    pub(super) dir: Option<PathBuf>,
    pub(super) engine: Arc<PluginEngine>,
    pub(super) limits: Arc<LimitSet>,
    pub(super) shared: Arc<Shared>,
    pub(super) slots: BTreeMap<String, Slot>,
    pub(super) active: bool,
    pub(super) shutdown: Option<oneshot::Sender<()>>,
    scanning: bool,
    /// Reuses the hashes of files unchanged since the last scan.
    scanner: folder::Scanner,
    /// A [`Command::RescanNow`] came while a scan ran: scan again as soon as it reports.
    rescan_again: bool,
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
            scanner: folder::Scanner::default(),
            rescan_again: false,
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
                    Some(Command::RescanNow) => self.rescan_now(),
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
        let scanner = self.scanner.clone();
        tokio::spawn(async move {
            let r = tokio::task::spawn_blocking(move || scanner.scan(&dir))
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())));
            let _ = tx.send(Event::Scanned(r));
        });
    }

    /// Event-driven: a completed file is scanned without waiting for a debounce.
    fn rescan_now(&mut self) {
        if self.scanning {
            self.rescan_again = true;
        } else {
            self.rescan_at = None;
            self.start_scan();
        }
    }

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Scanned(r) => {
                self.scanning = false;
                match r {
                    Ok(scan) => self.on_catalog(folder::catalog(scan)),
                    Err(e) => tracing::error!(dir = ?self.dir, "cannot list the plugin folder: {e}"),
                }
                if std::mem::take(&mut self.rescan_again) {
                    self.start_scan();
                }
            }
            Event::Loaded { file, fingerprint, result } => {
                let Loaded { plugin, candidate } = *result;
                self.on_loaded(file, fingerprint, plugin, candidate)
            }
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

    pub(super) fn publish_unmatched(&self) {
        let names: Vec<&str> =
            self.slots.values().filter_map(|s| s.good.as_ref()).map(|g| g.info.name.as_str()).collect();
        let unmatched = self.limits.unmatched(&names).into_iter().map(str::to_string).collect();
        self.shared.health.set_unmatched_limits(unmatched);
    }
}
