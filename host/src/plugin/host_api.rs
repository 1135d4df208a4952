//! Host side of the plugin's imports: cache reads (declared kinds only) and logging.

use super::bindings::kwop::reconciler::{cache, log, types};
use super::guest_error::TARGET;
use super::sandbox::HostState;
use crate::kinds::Gvk;
use crate::watch::selector::Selector;

impl types::Host for HostState {}

fn gvk(k: &types::Gvk) -> Gvk {
    Gvk::new(&k.group, &k.version, &k.kind)
}

impl HostState {
    fn charge_read(&mut self, found: Vec<String>) -> wasmtime::Result<Vec<String>> {
        self.read_budget = self.read_budget.saturating_sub(found.iter().map(String::len).sum());
        Ok(found)
    }

    fn over_read(&self, e: crate::plugin::QueryTooLarge) -> wasmtime::Error {
        if self.read_budget < self.query_bytes {
            wasmtime::format_err!("{e} (this call has {} bytes of cache reads left)", self.read_budget)
        } else {
            wasmtime::format_err!("{e}")
        }
    }

    fn may_read(&self, kind: &Gvk) -> bool {
        let ok = self.readable.contains(kind);
        if !ok {
            tracing::warn!(plugin = %self.plugin, object = %self.object, %kind, "plugin read a kind it did not declare; returning nothing");
        }
        ok
    }
}

impl cache::Host for HostState {
    fn get(&mut self, kind: types::Gvk, namespace: Option<String>, name: String) -> Option<String> {
        let kind = gvk(&kind);
        if !self.may_read(&kind) {
            return None;
        }
        let found = self.cache.get(&kind, namespace.as_deref().filter(|n| !n.is_empty()), &name);
        // Single objects are bounded by the API server (1.5 MiB); they count against the call's
        // read budget, which makes the next query fail once it is spent.
        self.read_budget = self.read_budget.saturating_sub(found.as_ref().map_or(0, String::len));
        found
    }

    fn query(
        &mut self,
        kind: types::Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> wasmtime::Result<Vec<String>> {
        let kind = gvk(&kind);
        if !self.may_read(&kind) {
            return Ok(Vec::new());
        }
        let selector = match label_selector.as_deref().map(Selector::parse).transpose() {
            Ok(s) => s.unwrap_or_default(),
            Err(e) => {
                tracing::warn!(plugin = %self.plugin, object = %self.object, "{e}; returning nothing");
                return Ok(Vec::new());
            }
        };
        // Bounded per query and per call (a query loop cannot make the host serialise its cache
        // again and again): past either bound the call fails with a clear message.
        let max = self.query_bytes.min(self.read_budget);
        let found = self.cache.query(&kind, namespace.as_deref().filter(|n| !n.is_empty()), &selector, max);
        self.charge_read(found.map_err(|e| self.over_read(e))?)
    }
}

impl log::Host for HostState {
    fn log(&mut self, level: log::Level, message: String) {
        if self.log_budget == 0 {
            self.logs_dropped += 1;
            return;
        }
        self.log_budget -= 1;
        let (p, o) = (&*self.plugin, &self.object);
        // Plugin text is data, not a format string; cap it so one call cannot flood the log.
        let m: String = message.chars().take(4096).collect();
        match level {
            log::Level::Trace => tracing::trace!(target: TARGET, plugin = p, object = %o, "{m}"),
            log::Level::Debug => tracing::debug!(target: TARGET, plugin = p, object = %o, "{m}"),
            log::Level::Info => tracing::info!(target: TARGET, plugin = p, object = %o, "{m}"),
            log::Level::Warn => tracing::warn!(target: TARGET, plugin = p, object = %o, "{m}"),
            log::Level::Error => tracing::error!(target: TARGET, plugin = p, object = %o, "{m}"),
        }
    }
}
