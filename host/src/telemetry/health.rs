//! What `/readyz` and `kwop plugin list --url` report.

use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Mutex;

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
    /// Caches listed and watches connected.
    pub synced: bool,
    /// Last load error for this file, if a newer version was rejected (the active one keeps running).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
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
    role: Role,
    plugins_loaded: bool,
    plugins: Vec<PluginStatus>,
    rejected_files: BTreeMap<String, String>,
}

/// Shared health state.
pub struct Health {
    inner: Mutex<Inner>,
}

struct Inner {
    role: Role,
    loaded: bool,
    plugins: BTreeMap<String, PluginStatus>,
    rejected: BTreeMap<String, String>,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            inner: Mutex::new(Inner {
                role: Role::Standby,
                loaded: false,
                plugins: BTreeMap::new(),
                rejected: BTreeMap::new(),
            }),
        }
    }
}

impl Health {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
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
    /// standby is ready: it can take over.
    pub fn ready(&self) -> bool {
        let i = self.lock();
        i.loaded && (i.role == Role::Standby || i.plugins.values().all(|p| p.synced))
    }

    /// JSON for `/readyz?verbose` and `/plugins`.
    pub fn snapshot_json(&self) -> serde_json::Value {
        let ready = self.ready();
        let i = self.lock();
        let s = Snapshot {
            ready,
            role: i.role,
            plugins_loaded: i.loaded,
            plugins: i.plugins.values().cloned().collect(),
            rejected_files: i.rejected.clone(),
        };
        serde_json::to_value(s).unwrap_or_default()
    }
}
