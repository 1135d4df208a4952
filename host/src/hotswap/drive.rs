//! Bringing each plugin's controller to what it should be, with one rule above all: one active
//! plugin per primary kind, so no object ever has two writers.

use super::supervisor::{Event, Supervisor};
use crate::controller::Controller;
use crate::source::report::{Identity, Report, State};
use crate::vocab::Gvk;
use std::sync::Arc;
use tokio::time::Instant;

/// Why a plugin waits for another's primary kind.
pub(super) fn conflict_message(holder: &str, primary: &Gvk) -> String {
    format!(
        "{holder} already reconciles {}/{}; one plugin per primary kind (remove or suspend one of them)",
        primary.group, primary.kind
    )
}

impl Supervisor {
    /// Brings one plugin's controller to what it should be: running the good version while this
    /// replica is active (and it is not suspended, nor waiting for another plugin's primary
    /// kind), stopped otherwise. At most one start or stop per plugin runs at a time (in the
    /// background); its completion drives the plugin again. Admission follows (on every replica,
    /// active or not: see [`Supervisor::publish_admission`]).
    pub(super) fn drive(&mut self, file: &str) {
        self.drive_controller(file);
        self.publish_admission();
    }

    /// The plugins that validate, mutate or convert, to the admission registry: each good version that is not
    /// removed, suspended, or waiting for another plugin's primary kind — on standbys too, since
    /// every replica answers the webhook.
    pub(super) fn publish_admission(&self) {
        let Some(registry) = &self.shared.admission else { return };
        let offers = self
            .slots
            .iter()
            .filter(|(_, s)| !s.removed && !s.entry.as_ref().is_some_and(|e| e.suspend))
            .filter_map(|(file, s)| {
                let p = s.good.clone()?;
                if !(p.info.validates || p.info.mutates() || p.info.converts())
                    || self.claim_holder(file, &p.info.primary).is_some()
                {
                    return None;
                }
                let failure_policy = s.entry.as_ref().and_then(|e| e.failure_policy);
                Some(crate::admission::Offer { key: file.clone(), plugin: p, failure_policy })
            })
            .collect();
        registry.offer(offers);
    }

    fn drive_controller(&mut self, file: &str) {
        let grace = self.shared.config.shutdown_grace;
        let active = self.active && self.shutdown.is_none();
        let holder = match self.slots.get(file).and_then(|s| s.good.clone()) {
            Some(g) => self.claim_holder(file, &g.info.primary),
            None => None,
        };
        let Some(slot) = self.slots.get_mut(file) else {
            return;
        };
        let suspended = slot.entry.as_ref().is_some_and(|e| e.suspend);
        let want = if active && !slot.removed && !suspended { slot.good.clone() } else { None };
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
                    self.shared.candidates.set(file, None);
                    self.publish_unmatched();
                    tracing::info!(file, "plugin removed");
                    self.report(file, State::Removed);
                }
            }
            (None, Some(p)) => {
                if let Some(h) = holder {
                    let message = conflict_message(&h, &p.info.primary);
                    let first = slot.waiting.as_deref() != Some(message.as_str());
                    if first {
                        tracing::error!(file, "plugin not started: {message}");
                        slot.waiting = Some(message.clone());
                        // Not among the plugins readiness waits for: it is not meant to run.
                        self.shared.health.remove(file);
                        self.shared.health.set_rejected(file, message.clone());
                        self.report(file, State::Conflict { message });
                    }
                    return;
                }
                slot.waiting = None;
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
            (Some(c), Some(p))
                if c.plugin().info.same_kinds(&p.info) && c.plugin().limits.concurrency == p.limits.concurrency =>
            {
                c.swap(p);
                slot.controller = Some(c);
            }
            (Some(c), want) => {
                match &want {
                    Some(p) if !c.plugin().info.same_kinds(&p.info) => {
                        tracing::info!(file, "plugin's kinds changed; rebuilding its watches")
                    }
                    Some(_) => tracing::info!(file, "plugin's concurrency changed; restarting its controller"),
                    None => {}
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

    /// Another plugin that runs (or is starting or stopping) with this primary kind.
    pub(super) fn running_holder(&self, file: &str, primary: &Gvk) -> Option<String> {
        self.slots
            .iter()
            .filter(|(f, _)| f.as_str() != file)
            .find(|(_, s)| {
                (s.controller.is_some() || s.busy)
                    && s.good.as_ref().is_some_and(|g| g.info.primary.same_group_kind(primary))
            })
            .map(|(f, _)| f.clone())
    }

    /// The plugin `file` must leave its primary kind to: one that runs, or else one that ranks
    /// before it and could start.
    fn claim_holder(&self, file: &str, primary: &Gvk) -> Option<String> {
        if let Some(h) = self.running_holder(file, primary) {
            return Some(h);
        }
        let me = self.slots.get(file)?;
        let rank = |s: &super::slot::Slot| s.entry.as_ref().map(|e| e.rank.clone()).unwrap_or_default();
        let my_rank = rank(me);
        self.slots
            .iter()
            .filter(|(f, _)| f.as_str() != file)
            .find(|(_, s)| {
                !s.removed
                    && s.start_error.is_none()
                    && !s.entry.as_ref().is_some_and(|e| e.suspend)
                    && s.good.as_ref().is_some_and(|g| g.info.primary.same_group_kind(primary))
                    && rank(s) < my_rank
            })
            .map(|(f, _)| f.clone())
    }

    /// Tells the source where a plugin stands (no-op in folder mode).
    pub(super) fn report(&self, file: &str, state: State) {
        let Some(tx) = &self.reports else { return };
        let good = self.slots.get(file).and_then(|s| s.good.as_ref()).map(|g| Identity {
            name: g.info.name.clone(),
            version: g.info.version.clone(),
            primary: g.info.primary.to_string(),
            sha256: g.sha256.clone(),
            world: g.world().to_string(),
            finalizes: g.info.finalizes,
        });
        let _ = tx.send(Report { key: file.to_string(), good, state, active: self.active });
    }

    /// After a suspend or resume.
    pub(super) fn report_idle_or_running(&self, file: &str) {
        let Some(s) = self.slots.get(file) else { return };
        let suspended = s.entry.as_ref().is_some_and(|e| e.suspend);
        if suspended || !self.active {
            self.report(file, State::Idle);
        }
    }
}
