//! What `/healthz`, `/readyz` and `/plugins` (`kwop plugin list --url`) report.
//!
//! Liveness (`/healthz`) fails when the host cannot recover by itself: a plugin call still
//! running past its deadline plus the grace (the host abandoned it but something holds a thread),
//! or a supervisor loop that stopped beating. Readiness is about the cluster: caches synced and,
//! sharded, every range the shard ring assigns this replica held (not while its member Lease
//! lapsed, nor until it confirmed the assignment again afterwards: its part is reconciled by
//! no one meanwhile, and `not_ready_because` says so).

use crate::plugin::inflight::{CallView, Counts};
use crate::plugin::PluginEngine;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The supervisor beats every second; this long without a beat and `/healthz` fails.
pub const SUPERVISOR_STALL: Duration = Duration::from_secs(15);

/// One plugin as the host runs it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PluginStatus {
    /// Name from `info()`.
    pub name: String,
    /// Version from `info()`.
    pub version: String,
    /// sha256 of the active component.
    pub sha256: String,
    /// File it was loaded from.
    pub file: String,
    /// Primary kind.
    pub primary: String,
    /// The contract version it implements (`kwop:reconciler@0.1.0` or `@0.2.0`).
    pub world: String,
    /// Whether it finalizes (the finalizer `kwop.dev/<name>` is on its primaries).
    pub finalizes: bool,
    /// Caches listed and watches connected.
    pub synced: bool,
    /// Last load error for this file, if a newer version was rejected (the active one keeps running).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Its controller is stopping (within the shutdown grace).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stopping: bool,
}

/// A plugin's entry in `/plugins`: its status and its calls now.
#[derive(Debug, Serialize)]
struct PluginEntry {
    #[serde(flatten)]
    status: PluginStatus,
    calls_in_flight: usize,
    calls_stuck: usize,
}

/// One condition of a ReconcilerPlugin as the cluster has it (`kwop_reconcilerplugin_condition`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpCondition {
    /// The ReconcilerPlugin's name.
    pub reconcilerplugin: String,
    /// `Ready` or `Degraded`.
    pub condition: String,
    /// Whether its status is `True`.
    pub status: bool,
    /// Its reason.
    pub reason: String,
}

/// Leader election state.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Not elected yet (or lost the lease): watching nothing, ready to take over.
    Standby,
    /// Holds the lease (or election is off): reconciling.
    Leader,
}

#[derive(Debug, Serialize)]
struct Snapshot {
    ready: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    not_ready_because: Option<String>,
    live: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    not_live_because: Option<String>,
    role: Role,
    plugins_loaded: bool,
    plugins: Vec<PluginEntry>,
    rejected_files: BTreeMap<String, String>,
    /// Every plugin call running now (oldest first).
    calls: Vec<CallView>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unmatched_plugin_limits: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    plugin_memory_budget_bytes: Option<usize>,
    plugin_memory_reserved_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    shard: Option<serde_json::Value>,
}

/// Shared health state.
pub struct Health {
    inner: Mutex<Inner>,
    engine: OnceLock<Arc<PluginEngine>>,
    shard: OnceLock<Arc<crate::shard::Shard>>,
    webhook: OnceLock<Unready>,
}

/// Why a part of the host cannot serve yet, if it cannot.
pub type Unready = Arc<dyn Fn() -> Option<String> + Send + Sync>;

struct Inner {
    role: Role,
    loaded: bool,
    plugins: BTreeMap<String, PluginStatus>,
    rejected: BTreeMap<String, String>,
    beat: Option<Instant>,
    unmatched: Vec<String>,
    shard: Option<serde_json::Value>,
    conditions: Vec<RpCondition>,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            inner: Mutex::new(Inner {
                role: Role::Standby,
                loaded: false,
                plugins: BTreeMap::new(),
                rejected: BTreeMap::new(),
                beat: None,
                unmatched: Vec::new(),
                shard: None,
                conditions: Vec::new(),
            }),
            engine: OnceLock::new(),
            shard: OnceLock::new(),
            webhook: OnceLock::new(),
        }
    }
}

impl Health {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What `/plugins` says of this replica's shard (see `shard::Shard::status`).
    pub fn set_shard(&self, status: serde_json::Value) {
        self.lock().shard = Some(status);
    }

    /// The ReconcilerPlugins' conditions now (the ReconcilerPlugin source, every second).
    pub fn set_reconcilerplugin_conditions(&self, conditions: Vec<RpCondition>) {
        self.lock().conditions = conditions;
    }

    /// The ReconcilerPlugins' conditions last set.
    pub fn reconcilerplugin_conditions(&self) -> Vec<RpCondition> {
        self.lock().conditions.clone()
    }

    /// Lets probes and `/plugins` see the engine's calls and memory budget.
    pub fn attach_engine(&self, engine: Arc<PluginEngine>) {
        let _ = self.engine.set(engine);
    }

    /// Lets readiness see whether this replica holds what the shard ring assigns it.
    pub fn attach_shard(&self, shard: Arc<crate::shard::Shard>) {
        let _ = self.shard.set(shard);
    }

    /// Lets readiness see whether the webhook can answer (conversion has no failure policy: a
    /// replica that cannot answer must not get the API server's requests).
    pub fn attach_webhook(&self, unready: Unready) {
        let _ = self.webhook.set(unready);
    }

    /// The supervisor's loop is alive.
    pub fn supervisor_beat(&self) {
        self.lock().beat = Some(Instant::now());
    }

    /// A plugin's controller is stopping.
    pub fn set_stopping(&self, file: &str) {
        if let Some(p) = self.lock().plugins.get_mut(file) {
            p.stopping = true;
            p.synced = false;
        }
    }

    /// A plugin's controller stopped (the plugin stays loaded, e.g. on a standby).
    pub fn set_stopped(&self, file: &str) {
        if let Some(p) = self.lock().plugins.get_mut(file) {
            p.stopping = false;
            p.synced = false;
        }
    }

    /// `--plugin-limit` names that match no loaded plugin.
    pub fn set_unmatched_limits(&self, names: Vec<String>) {
        self.lock().unmatched = names;
    }

    /// `Ok` while the host can recover by itself; otherwise why not (see the module docs).
    pub fn live(&self) -> Result<(), String> {
        if let Some(e) = self.engine.get() {
            let stuck = e.calls.stuck();
            if let Some(c) = stuck.first() {
                return Err(format!(
                    "{} plugin call(s) stuck past deadline and grace, e.g. {} on {} for {} ms (deadline {} ms)",
                    stuck.len(),
                    c.plugin,
                    c.object,
                    c.age_ms,
                    c.deadline_ms
                ));
            }
        }
        match self.lock().beat {
            Some(b) if b.elapsed() > SUPERVISOR_STALL => {
                Err(format!("the plugin supervisor has made no progress for {} s", b.elapsed().as_secs()))
            }
            _ => Ok(()),
        }
    }

    /// In-flight and stuck calls by plugin name.
    pub fn call_counts(&self) -> BTreeMap<String, Counts> {
        self.engine.get().map(|e| e.calls.counts()).unwrap_or_default()
    }

    /// Bytes of the plugin memory budget, and how much of it running calls hold.
    pub fn memory(&self) -> (Option<usize>, usize) {
        self.engine.get().map(|e| (e.admission.budget_bytes(), e.admission.reserved_bytes())).unwrap_or((None, 0))
    }

    /// The first scan of the plugin folder finished.
    pub fn set_loaded(&self) {
        self.lock().loaded = true;
    }

    /// Leader or standby.
    pub fn set_role(&self, role: Role) {
        self.lock().role = role;
    }

    /// Current role.
    pub fn role(&self) -> Role {
        self.lock().role
    }

    /// Sets a plugin's status (keyed by file).
    pub fn set_plugin(&self, file: &str, status: PluginStatus) {
        let mut i = self.lock();
        i.rejected.remove(file);
        i.plugins.insert(file.to_string(), status);
    }

    /// Updates a plugin's synced flag.
    pub fn set_synced(&self, file: &str, synced: bool) {
        if let Some(p) = self.lock().plugins.get_mut(file) {
            p.synced = synced;
        }
    }

    /// Whether a plugin's controller runs with its caches synced.
    pub fn synced(&self, file: &str) -> bool {
        self.lock().plugins.get(file).is_some_and(|p| p.synced && !p.stopping)
    }

    /// Records that the newest content of a file was rejected.
    pub fn set_rejected(&self, file: &str, error: String) {
        let mut i = self.lock();
        if let Some(p) = i.plugins.get_mut(file) {
            p.last_error = Some(error.clone());
        }
        i.rejected.insert(file.to_string(), error);
    }

    /// A plugin file went away.
    pub fn remove(&self, file: &str) {
        let mut i = self.lock();
        i.plugins.remove(file);
        i.rejected.remove(file);
    }

    /// Ready: plugins loaded, and (when leader) every plugin's caches synced and connected. A
    /// standby is ready: it can take over. Sharded, also: holding every range assigned to it.
    pub fn ready(&self) -> bool {
        self.not_ready_because().is_none()
    }

    /// Why it is not ready, if it is not.
    pub fn not_ready_because(&self) -> Option<String> {
        if let Some(why) = self.shard.get().and_then(|s| s.unready()) {
            return Some(why);
        }
        if let Some(why) = self.webhook.get().and_then(|f| f()) {
            return Some(why);
        }
        let i = self.lock();
        if !i.loaded {
            return Some("the plugins are not loaded yet".into());
        }
        let unsynced: Vec<&str> = i.plugins.values().filter(|p| !p.synced).map(|p| p.name.as_str()).collect();
        (i.role == Role::Leader && !unsynced.is_empty())
            .then(|| format!("the caches of {} are not synced yet", unsynced.join(", ")))
    }

    /// JSON for `/readyz?verbose` and `/plugins`.
    pub fn snapshot_json(&self) -> serde_json::Value {
        let not_ready_because = self.not_ready_because();
        let live = self.live();
        let counts = self.call_counts();
        let calls = self.engine.get().map(|e| e.calls.calls()).unwrap_or_default();
        let (budget, reserved) = self.memory();
        let i = self.lock();
        let plugins = i
            .plugins
            .values()
            .map(|p| {
                let c = counts.get(&p.name).copied().unwrap_or_default();
                PluginEntry { status: p.clone(), calls_in_flight: c.in_flight, calls_stuck: c.stuck }
            })
            .collect();
        let s = Snapshot {
            ready: not_ready_because.is_none(),
            not_ready_because,
            live: live.is_ok(),
            not_live_because: live.err(),
            role: i.role,
            plugins_loaded: i.loaded,
            plugins,
            rejected_files: i.rejected.clone(),
            calls,
            unmatched_plugin_limits: i.unmatched.clone(),
            plugin_memory_budget_bytes: budget,
            plugin_memory_reserved_bytes: reserved,
            shard: i.shard.clone(),
        };
        serde_json::to_value(s).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::EngineConfig;

    #[test]
    fn a_stuck_call_or_a_silent_supervisor_fails_liveness() -> anyhow::Result<()> {
        let h = Health::default();
        let engine = PluginEngine::new(EngineConfig { pooling: false, cache_dir: None, ..EngineConfig::default() })?;
        h.attach_engine(engine.clone());
        h.supervisor_beat();
        assert_eq!(h.live(), Ok(()));
        let call = engine.calls.register("sleeper".into(), "ns/a".into(), Duration::ZERO);
        assert_eq!(h.live(), Ok(()), "within the grace");
        std::thread::sleep(crate::plugin::inflight::CALL_GRACE + Duration::from_millis(20));
        let why = h.live().expect_err("stuck");
        assert!(why.contains("sleeper on ns/a"), "{why}");
        assert_eq!(h.snapshot_json()["plugins"], serde_json::json!([]));
        assert_eq!(h.snapshot_json()["calls"][0]["stuck"], true);
        drop(call);
        assert_eq!(h.live(), Ok(()), "healthy again once the call ended");
        h.lock().beat = Instant::now().checked_sub(SUPERVISOR_STALL + Duration::from_secs(1));
        assert!(h.live().expect_err("stalled").contains("no progress"));
        Ok(())
    }
}
