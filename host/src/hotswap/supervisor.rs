//! The supervisor: one task owning every plugin slot and controller, driven by commands.

use super::folder;
use crate::controller::{Controller, Shared};
use crate::plugin::{Limits, LoadedPlugin, PluginEngine};
use crate::telemetry::metrics::LoadLabels;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// What the supervisor can be asked to do.
#[derive(Debug)]
pub enum Command {
    /// Something changed in the folder.
    Rescan,
    /// Leadership gained (`true`) or lost (`false`).
    SetActive(bool),
    /// Stop every controller, then answer.
    Shutdown(oneshot::Sender<()>),
}

#[derive(Default)]
struct Slot {
    /// Last version that loaded and validated (runs while active).
    good: Option<Arc<LoadedPlugin>>,
    /// Hash of the last content examined (good or not), so a bad file is not retried in a loop.
    seen: String,
    controller: Option<Controller>,
    start_error: Option<String>,
}

/// Owns the plugin slots.
pub struct Supervisor {
    dir: PathBuf,
    engine: Arc<PluginEngine>,
    limits: Limits,
    shared: Arc<Shared>,
    slots: BTreeMap<String, Slot>,
    active: bool,
    /// Limits by plugin name, overriding `limits`.
    overrides: std::collections::HashMap<String, Limits>,
}

/// How often failed controller starts are retried and the folder rescanned without a trigger.
const RETRY: Duration = Duration::from_secs(10);

impl Supervisor {
    /// A supervisor for `dir` (nothing loaded yet).
    pub fn new(dir: PathBuf, engine: Arc<PluginEngine>, limits: Limits, shared: Arc<Shared>) -> Self {
        Supervisor { dir, engine, limits, shared, slots: BTreeMap::new(), active: false, overrides: Default::default() }
    }

    /// Per-plugin limits (by `info()` name).
    pub fn with_overrides(mut self, overrides: std::collections::HashMap<String, Limits>) -> Self {
        self.overrides = overrides;
        self
    }

    /// Loads what is in the folder now (called once before serving readiness).
    pub async fn initial_scan(&mut self) -> anyhow::Result<()> {
        if !self.dir.is_dir() {
            anyhow::bail!("plugin folder {} does not exist or is not a folder", self.dir.display());
        }
        self.rescan().await;
        self.shared.health.set_loaded();
        Ok(())
    }

    /// Runs until shut down.
    pub async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        let mut tick = tokio::time::interval(RETRY);
        tick.tick().await;
        // Commands read while debouncing rescans, to handle next (never dropped).
        let mut pending = std::collections::VecDeque::new();
        loop {
            let cmd = match pending.pop_front() {
                Some(c) => Some(c),
                None => tokio::select! {
                    c = rx.recv() => c,
                    _ = tick.tick() => {
                        self.rescan().await;
                        self.start_missing().await;
                        continue;
                    }
                },
            };
            match cmd {
                Some(Command::Rescan) => {
                    // Debounce: a copy or a ConfigMap update is several file events.
                    tokio::time::sleep(Duration::from_millis(150)).await;
                    while let Ok(c) = rx.try_recv() {
                        if !matches!(c, Command::Rescan) {
                            pending.push_back(c);
                        }
                    }
                    self.rescan().await;
                }
                Some(Command::SetActive(a)) => self.set_active(a).await,
                Some(Command::Shutdown(done)) => {
                    self.set_active(false).await;
                    let _ = done.send(());
                    return;
                }
                None => {
                    self.set_active(false).await;
                    return;
                }
            }
        }
    }

    async fn rescan(&mut self) {
        let dir = self.dir.clone();
        let scanned = tokio::task::spawn_blocking(move || folder::scan(&dir)).await;
        let folder::Scan { files, errors } = match scanned {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => {
                tracing::error!(dir = %self.dir.display(), "cannot list the plugin folder: {e}");
                return;
            }
            Err(e) => {
                tracing::error!("plugin folder scan failed: {e}");
                return;
            }
        };
        for (file, e) in errors {
            tracing::error!(file, "plugin file rejected: {e}");
        }
        let removed: Vec<String> = self.slots.keys().filter(|f| !files.contains_key(*f)).cloned().collect();
        for file in removed {
            if let Some(slot) = self.slots.remove(&file) {
                if let Some(c) = slot.controller {
                    c.stop().await;
                }
                tracing::info!(file, "plugin file removed; its controller stopped, nothing deleted in the cluster");
            }
            self.shared.health.remove(&file);
        }
        for (file, st) in files {
            if self.slots.get(&file).is_some_and(|s| s.seen == st.sha256) {
                continue;
            }
            self.slots.entry(file.clone()).or_default().seen = st.sha256.clone();
            let (engine, limits, path, bytes) =
                (self.engine.clone(), self.limits.clone(), st.path.clone(), st.bytes.clone());
            let loaded =
                tokio::task::spawn_blocking(move || LoadedPlugin::load_bytes(&engine, &bytes, &path, limits)).await;
            let plugin = match loaded {
                Ok(Ok(mut p)) => {
                    // The name is known only after info(); per-plugin limits apply from the first reconcile.
                    if let Some(l) = self.overrides.get(&p.info.name) {
                        p.limits = l.clone();
                    }
                    p
                }
                Ok(Err(e)) => {
                    self.load_failed(&file, e.label(), e.to_string());
                    continue;
                }
                Err(e) => {
                    self.load_failed(&file, "panic", e.to_string());
                    continue;
                }
            };
            if let Some((other, _)) = self
                .slots
                .iter()
                .find(|(f, s)| **f != file && s.good.as_ref().is_some_and(|g| g.info.name == plugin.info.name))
            {
                let msg = format!("plugin name {:?} is already provided by {other}; names must be unique (they name the field manager)", plugin.info.name);
                self.load_failed(&file, "duplicate_name", msg);
                continue;
            }
            tracing::info!(file, plugin = %plugin.info.name, version = %plugin.info.version, sha256 = %plugin.sha256,
                precompiled_cache_hit = plugin.from_cache, "plugin loaded");
            let plugin = Arc::new(plugin);
            if let Some(slot) = self.slots.get_mut(&file) {
                slot.good = Some(plugin.clone());
            }
            if self.active {
                self.activate(&file, plugin).await;
            } else {
                self.shared.health.set_plugin(&file, status_of(&file, &plugin));
            }
        }
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

    async fn activate(&mut self, file: &str, plugin: Arc<LoadedPlugin>) {
        let Some(slot) = self.slots.get_mut(file) else {
            return;
        };
        match slot.controller.take() {
            Some(c) if c.plugin().info.same_kinds(&plugin.info) => {
                c.swap(plugin);
                slot.controller = Some(c);
                return;
            }
            Some(c) => {
                tracing::info!(file, "plugin's kinds changed; rebuilding its watches");
                c.stop().await;
            }
            None => {}
        }
        match Controller::start(self.shared.clone(), file.to_string(), plugin.clone()).await {
            Ok(c) => {
                slot.controller = Some(c);
                slot.start_error = None;
            }
            Err(e) => {
                tracing::error!(file, "cannot start controller (retrying every {}s): {e}", RETRY.as_secs());
                // Listed, not synced: the host is not ready while a plugin cannot run.
                let mut status = status_of(file, &plugin);
                status.last_error = Some(e.to_string());
                self.shared.health.set_plugin(file, status);
                slot.start_error = Some(e.to_string());
            }
        }
    }

    async fn start_missing(&mut self) {
        if !self.active {
            return;
        }
        let missing: Vec<(String, Arc<LoadedPlugin>)> = self
            .slots
            .iter()
            .filter(|(_, s)| s.controller.is_none())
            .filter_map(|(f, s)| Some((f.clone(), s.good.clone()?)))
            .collect();
        for (file, plugin) in missing {
            self.activate(&file, plugin).await;
        }
    }

    async fn set_active(&mut self, active: bool) {
        if active == self.active {
            return;
        }
        self.active = active;
        if active {
            self.start_missing().await;
        } else {
            for slot in self.slots.values_mut() {
                if let Some(c) = slot.controller.take() {
                    c.stop().await;
                }
            }
        }
    }
}

fn status_of(file: &str, p: &LoadedPlugin) -> crate::telemetry::health::PluginStatus {
    crate::telemetry::health::PluginStatus {
        name: p.info.name.clone(),
        version: p.info.version.clone(),
        sha256: p.sha256.clone(),
        file: file.to_string(),
        primary: p.info.primary.to_string(),
        synced: false,
        last_error: None,
    }
}
