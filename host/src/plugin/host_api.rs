//! Host side of the plugin's imports: cache reads (declared kinds only) and logging, for every
//! contract version the host serves (0.1 and 0.2 import the same functions; 0.3's reads say why
//! they answer nothing).

use super::bindings::{v01, v02};
use super::guest_error::TARGET;
use super::sandbox::HostState;
use crate::vocab::selector::Selector;
use crate::vocab::Gvk;

/// Log levels, whichever version's enum they came as.
#[derive(Clone, Copy)]
enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// The imports of both versions, each a thin call of [`HostState`]'s own.
macro_rules! imports_of {
    ($v:ident) => {
        impl $v::kwop::reconciler::types::Host for HostState {}

        impl $v::kwop::reconciler::cache::Host for HostState {
            fn get(
                &mut self,
                kind: $v::kwop::reconciler::types::Gvk,
                namespace: Option<String>,
                name: String,
            ) -> Option<String> {
                self.cache_get(Gvk::new(&kind.group, &kind.version, &kind.kind), namespace, name)
            }

            fn query(
                &mut self,
                kind: $v::kwop::reconciler::types::Gvk,
                namespace: Option<String>,
                label_selector: Option<String>,
            ) -> wasmtime::Result<Vec<String>> {
                self.cache_query(Gvk::new(&kind.group, &kind.version, &kind.kind), namespace, label_selector)
            }
        }

        impl $v::kwop::reconciler::log::Host for HostState {
            fn log(&mut self, level: $v::kwop::reconciler::log::Level, message: String) {
                use $v::kwop::reconciler::log::Level as L;
                let level = match level {
                    L::Trace => Level::Trace,
                    L::Debug => Level::Debug,
                    L::Info => Level::Info,
                    L::Warn => Level::Warn,
                    L::Error => Level::Error,
                };
                self.log_line(level, message)
            }
        }
    };
}

imports_of!(v01);
imports_of!(v02);

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

impl HostState {
    fn cache_get(&mut self, kind: Gvk, namespace: Option<String>, name: String) -> Option<String> {
        if !self.may_read(&kind) {
            return None;
        }
        let found = self.cache.get(&kind, namespace.as_deref().filter(|n| !n.is_empty()), &name);
        // Single objects are bounded by the API server (1.5 MiB); they count against the call's
        // read budget, which makes the next query fail once it is spent.
        self.read_budget = self.read_budget.saturating_sub(found.as_ref().map_or(0, String::len));
        found
    }

    fn cache_query(
        &mut self,
        kind: Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> wasmtime::Result<Vec<String>> {
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
        self.cache_select(kind, namespace, &selector)
    }

    /// A query of a readable kind, bounded per query and per call (a query loop cannot make the
    /// host serialise its cache again and again): past either bound, an error saying which.
    fn cache_select(
        &mut self,
        kind: Gvk,
        namespace: Option<String>,
        selector: &Selector,
    ) -> wasmtime::Result<Vec<String>> {
        let max = self.query_bytes.min(self.read_budget);
        let found = self.cache.query(&kind, namespace.as_deref().filter(|n| !n.is_empty()), selector, max);
        self.charge_read(found.map_err(|e| self.over_read(e))?)
    }

    fn log_line(&mut self, level: Level, message: String) {
        if self.log_budget == 0 {
            self.logs_dropped += 1;
            return;
        }
        self.log_budget -= 1;
        let (p, o) = (&*self.plugin, &self.object);
        // Plugin text is data, not a format string; cap it so one call cannot flood the log.
        let m: String = message.chars().take(4096).collect();
        match level {
            Level::Trace => tracing::trace!(target: TARGET, plugin = p, object = %o, "{m}"),
            Level::Debug => tracing::debug!(target: TARGET, plugin = p, object = %o, "{m}"),
            Level::Info => tracing::info!(target: TARGET, plugin = p, object = %o, "{m}"),
            Level::Warn => tracing::warn!(target: TARGET, plugin = p, object = %o, "{m}"),
            Level::Error => tracing::error!(target: TARGET, plugin = p, object = %o, "{m}"),
        }
    }
}

/// 0.3's imports: reads that say why they answer nothing (`read-error`), a cluster parameter (only
/// the host's own cluster until links exist) and the list of linked clusters (none yet).
mod v03_imports {
    use super::super::bindings::v03::kwop::reconciler::{cache, log, types};
    use super::{HostState, Level};
    use crate::vocab::Gvk;

    impl types::Host for HostState {}

    fn gvk(k: &types::Gvk) -> Gvk {
        Gvk::new(&k.group, &k.version, &k.kind)
    }

    impl HostState {
        fn may_read_v03(&self, kind: &Gvk, cluster: &Option<String>) -> Result<(), cache::ReadError> {
            if let Some(c) = cluster {
                return Err(cache::ReadError::Forbidden(format!("cluster {c:?} is not linked to this host")));
            }
            if !self.readable.contains(kind) {
                return Err(cache::ReadError::Forbidden(format!(
                    "kind {kind} is not declared in info() (owns or reads): the plugin may not read it"
                )));
            }
            Ok(())
        }
    }

    impl cache::Host for HostState {
        fn get(
            &mut self,
            kind: types::Gvk,
            cluster: Option<String>,
            namespace: Option<String>,
            name: String,
        ) -> Result<Option<String>, cache::ReadError> {
            let kind = gvk(&kind);
            self.may_read_v03(&kind, &cluster)?;
            Ok(self.cache_get(kind, namespace, name))
        }

        fn query(
            &mut self,
            kind: types::Gvk,
            cluster: Option<String>,
            namespace: Option<String>,
            label_selector: Option<String>,
        ) -> Result<Vec<String>, cache::ReadError> {
            let kind = gvk(&kind);
            self.may_read_v03(&kind, &cluster)?;
            let selector = match label_selector.as_deref().map(crate::vocab::selector::Selector::parse).transpose() {
                Ok(s) => s.unwrap_or_default(),
                Err(e) => return Err(cache::ReadError::Invalid(e.to_string())),
            };
            // Past the query's or the call's read bound the read fails (0.1/0.2 fail the call).
            self.cache_select(kind, namespace, &selector).map_err(|e| cache::ReadError::Invalid(e.to_string()))
        }

        fn clusters(&mut self) -> Vec<cache::LinkedCluster> {
            Vec::new()
        }
    }

    impl log::Host for HostState {
        fn log(&mut self, level: log::Level, message: String) {
            let level = match level {
                log::Level::Trace => Level::Trace,
                log::Level::Debug => Level::Debug,
                log::Level::Info => Level::Info,
                log::Level::Warn => Level::Warn,
                log::Level::Error => Level::Error,
            };
            self.log_line(level, message)
        }
    }
}
