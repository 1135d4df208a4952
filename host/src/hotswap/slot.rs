//! One plugin as the supervisor tracks it: the last good version, the load in progress, the
//! controller, and whether a start or stop of that controller is under way.

use crate::controller::Controller;
use crate::plugin::LoadedPlugin;
use crate::telemetry::health::PluginStatus;
use std::sync::Arc;
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// A plugin file.
#[derive(Default)]
pub(super) struct Slot {
    /// Last version that loaded and validated (runs while active).
    pub good: Option<Arc<LoadedPlugin>>,
    /// Hash of the last content examined (good or not), so a bad file is not retried in a loop.
    pub seen: String,
    /// The load of `seen` under way.
    pub loading: Option<AbortHandle>,
    /// The running controller (none while starting or stopping).
    pub controller: Option<Controller>,
    /// A start or a stop of this file's controller runs in the background.
    pub busy: bool,
    /// The start under way (aborted if the file goes away or leadership is lost meanwhile).
    pub starting: Option<AbortHandle>,
    /// The file is gone: stop the controller, then forget the slot.
    pub removed: bool,
    /// Why the controller could not start, and when to try again.
    pub start_error: Option<(String, Instant)>,
    /// What the source offers now (grants, limits, suspend, rank).
    pub entry: Option<crate::source::Entry>,
    /// Why it waits for another plugin's primary kind (reported once per reason).
    pub waiting: Option<String>,
}

impl Slot {
    /// Nothing runs or is under way for this slot.
    pub fn idle(&self) -> bool {
        !self.busy && self.controller.is_none() && self.loading.is_none()
    }
}

/// How `/plugins` shows a loaded plugin that has no running controller (yet).
pub(super) fn status_of(file: &str, p: &LoadedPlugin) -> PluginStatus {
    PluginStatus {
        name: p.info.name.clone(),
        version: p.info.version.clone(),
        sha256: p.sha256.clone(),
        file: file.to_string(),
        primary: p.info.primary.to_string(),
        world: p.world().to_string(),
        finalizes: p.info.finalizes,
        synced: false,
        last_error: None,
        stopping: false,
    }
}
