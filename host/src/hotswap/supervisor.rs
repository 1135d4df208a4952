//! The supervisor: one task owning every plugin slot, driven by commands and by the results of
//! the work it hands out.
//!
//! Nothing slow runs on its loop: folder scans, compiles, `info()` calls, controller starts
//! (discovery, watches) and stops (bounded by `--shutdown-grace`) are spawned, and report back
//! as events. So one plugin's 20 s compile or a stop waiting on a stuck call never delays
//! another plugin's swap, a leadership change or a shutdown; the loop beats every second and
//! `/healthz` fails if it stops beating.

use super::folder;
use super::slot::{status_of, Slot};
use crate::controller::{Controller, Shared, StartError};
use crate::plugin::{LimitSet, LoadError, LoadedPlugin, PluginEngine};
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
    /// Leadership gained (`true`) or lost (`false`).
    SetActive(bool),
    /// Stop every controller (each within the shutdown grace), then answer.
    Shutdown(oneshot::Sender<()>),
}

/// Results of work the supervisor spawned.
enum Event {
    Scanned(std::io::Result<folder::Scan>),
    Loaded { file: String, sha256: String, result: Box<Result<LoadedPlugin, LoadError>> },
    Started { file: String, result: Result<Controller, StartError> },
    Stopped { file: String },
}

/// Owns the plugin slots.
pub struct Supervisor {
    dir: PathBuf,
    engine: Arc<PluginEngine>,
    limits: Arc<LimitSet>,
    shared: Arc<Shared>,
    slots: BTreeMap<String, Slot>,
    active: bool,
    shutdown: Option<oneshot::Sender<()>>,
    scanning: bool,
    rescan_at: Option<Instant>,
    events: (mpsc::UnboundedSender<Event>, mpsc::UnboundedReceiver<Event>),
}

/// How often failed controller starts are retried and the folder rescanned without a trigger.
const RETRY: Duration = Duration::from_secs(10);
/// A copy or a ConfigMap update is several file events: rescan once they settle.
const DEBOUNCE: Duration = Duration::from_millis(150);

impl Supervisor {
    /// A supervisor for `dir` (nothing loaded yet).
    pub fn new(dir: PathBuf, engine: Arc<PluginEngine>, limits: LimitSet, shared: Arc<Shared>) -> Self {
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
        }
    }

    /// Loads what is in the folder now (called once before serving readiness).
    pub async fn initial_scan(&mut self) -> anyhow::Result<()> {
        if !self.dir.is_dir() {
            anyhow::bail!("plugin folder {} does not exist or is not a folder", self.dir.display());
        }
        self.start_scan();
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
        }
    }

    fn drive_all(&mut self) {
        let files: Vec<String> = self.slots.keys().cloned().collect();
        files.iter().for_each(|f| self.drive(f));
    }

    fn start_scan(&mut self) {
        if self.scanning {
            // One at a time; the next one starts when this one reports.
            self.rescan_at.get_or_insert(Instant::now() + DEBOUNCE);
            return;
        }
        self.scanning = true;
        let (dir, tx) = (self.dir.clone(), self.events.0.clone());
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
                    Ok(scan) => self.on_scan(scan),
                    Err(e) => tracing::error!(dir = %self.dir.display(), "cannot list the plugin folder: {e}"),
                }
            }
            Event::Loaded { file, sha256, result } => self.on_loaded(file, sha256, *result),
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
                        }
                        Err(e) => {
                            tracing::error!(file, "cannot start controller (retrying every {}s): {e}", RETRY.as_secs());
                            if let Some(g) = &slot.good {
                                // Listed, not synced: the host is not ready while a plugin cannot run.
                                let mut status = status_of(&file, g);
                                status.last_error = Some(e.to_string());
                                self.shared.health.set_plugin(&file, status);
                            }
                            slot.start_error = Some((e.to_string(), Instant::now() + RETRY));
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
            }
        }
    }

    fn on_scan(&mut self, scan: folder::Scan) {
        let folder::Scan { files, errors } = scan;
        for (file, e) in errors {
            tracing::error!(file, "plugin file rejected: {e}");
        }
        let removed: Vec<String> =
            self.slots.iter().filter(|(f, s)| !s.removed && !files.contains_key(*f)).map(|(f, _)| f.clone()).collect();
        for file in removed {
            if let Some(slot) = self.slots.get_mut(&file) {
                slot.removed = true;
                if let Some(l) = slot.loading.take() {
                    l.abort();
                    tracing::info!(file, "plugin file removed while it was loading; the load is abandoned");
                }
                tracing::info!(file, "plugin file removed; stopping its controller, nothing deleted in the cluster");
            }
            self.drive(&file);
        }
        for (file, st) in files {
            let slot = self.slots.entry(file.clone()).or_default();
            if slot.seen == st.sha256 && !slot.removed {
                continue;
            }
            slot.removed = false;
            slot.seen = st.sha256.clone();
            if let Some(l) = slot.loading.take() {
                l.abort();
            }
            let (engine, limits, tx, f, sha) =
                (self.engine.clone(), self.limits.clone(), self.events.0.clone(), file.clone(), st.sha256.clone());
            tracing::info!(file, sha256 = %st.sha256, "loading plugin file");
            let task = tokio::spawn(async move {
                let (e2, path, bytes) = (engine.clone(), st.path.clone(), st.bytes.clone());
                let compiled = tokio::task::spawn_blocking(move || LoadedPlugin::compile(&e2, &bytes, &path)).await;
                let result = match compiled {
                    Ok(Ok(c)) => LoadedPlugin::from_compiled(&engine, c, &limits).await,
                    Ok(Err(e)) => Err(e),
                    Err(e) => Err(LoadError::NotAComponent(format!("compiler task failed: {e}"))),
                };
                let _ = tx.send(Event::Loaded { file: f, sha256: sha, result: Box::new(result) });
            });
            slot.loading = Some(task.abort_handle());
        }
    }

    fn on_loaded(&mut self, file: String, sha256: String, result: Result<LoadedPlugin, LoadError>) {
        let Some(slot) = self.slots.get_mut(&file) else {
            tracing::info!(file, "plugin file removed while it was loading; discarded");
            return;
        };
        if slot.seen != sha256 || slot.removed {
            tracing::info!(file, sha256, "plugin file changed or removed while it was loading; discarded");
            return;
        }
        slot.loading = None;
        // Gone since, and the folder scan has not told yet: do not start it (the scan removes
        // the slot).
        if !self.dir.join(&file).is_file() {
            tracing::info!(file, sha256, "plugin file removed while it was loading; discarded");
            return;
        }
        let plugin = match result {
            Ok(p) => p,
            Err(e) => return self.load_failed(&file, e.label(), e.to_string()),
        };
        let taken = self
            .slots
            .iter()
            .find(|(f, s)| **f != file && s.good.as_ref().is_some_and(|g| g.info.name == plugin.info.name));
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
        self.drive(&file);
    }

    fn load_failed(&mut self, file: &str, reason: &str, msg: String) {
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
        self.shared.health.set_rejected(file, msg);
    }

    /// Brings one file's controller to what it should be: running the good version while this
    /// replica is active, stopped otherwise. At most one start or stop per file runs at a time
    /// (in the background); its completion drives the file again.
    fn drive(&mut self, file: &str) {
        let grace = self.shared.config.shutdown_grace;
        let active = self.active && self.shutdown.is_none();
        let Some(slot) = self.slots.get_mut(file) else {
            return;
        };
        let want = if active && !slot.removed { slot.good.clone() } else { None };
        if want.is_none() {
            // A start still resolving kinds is abandoned (it has spawned nothing yet).
            if let Some(s) = slot.starting.take() {
                s.abort();
                slot.busy = false;
            }
        }
        if slot.busy {
            return;
        }
        let tx = self.events.0.clone();
        match (slot.controller.take(), want) {
            (None, None) => {
                if slot.removed && slot.loading.is_none() {
                    self.slots.remove(file);
                    self.shared.health.remove(file);
                    self.publish_unmatched();
                    tracing::info!(file, "plugin removed");
                }
            }
            (None, Some(p)) => {
                if slot.start_error.as_ref().is_some_and(|(_, at)| *at > Instant::now()) {
                    return; // retried by the tick
                }
                slot.busy = true;
                let (shared, f) = (self.shared.clone(), file.to_string());
                let task = tokio::spawn(async move {
                    let result = Controller::start(shared, f.clone(), p).await;
                    let _ = tx.send(Event::Started { file: f, result });
                });
                slot.starting = Some(task.abort_handle());
            }
            (Some(c), Some(p)) if Arc::ptr_eq(&c.plugin(), &p) => slot.controller = Some(c),
            (Some(c), Some(p)) if c.plugin().info.same_kinds(&p.info) => {
                c.swap(p);
                slot.controller = Some(c);
            }
            (Some(c), want) => {
                if want.is_some() {
                    tracing::info!(file, "plugin's kinds changed; rebuilding its watches");
                }
                slot.busy = true;
                self.shared.health.set_stopping(file);
                let f = file.to_string();
                tokio::spawn(async move {
                    c.stop(grace).await;
                    let _ = tx.send(Event::Stopped { file: f });
                });
            }
        }
    }

    fn publish_unmatched(&self) {
        let names: Vec<&str> =
            self.slots.values().filter_map(|s| s.good.as_ref()).map(|g| g.info.name.as_str()).collect();
        let unmatched = self.limits.unmatched(&names).into_iter().map(str::to_string).collect();
        self.shared.health.set_unmatched_limits(unmatched);
    }
}
