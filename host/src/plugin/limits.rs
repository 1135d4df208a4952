//! Sandbox limits: what one call into a plugin may use, by default and per plugin.

use std::collections::HashMap;
use std::time::Duration;

/// Per-plugin sandbox limits. Every call (`info()` and `reconcile`) runs under them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of one call, instantiation and time inside host imports included.
    pub deadline: Duration,
    /// Bytes one instance may hold across all its linear memories and tables (table elements
    /// count [`TABLE_ELEMENT_BYTES`] each).
    pub memory_bytes: usize,
    /// Bytes of stdout/stderr kept per call (the rest is dropped and counted).
    pub output_bytes: usize,
    /// Log lines a plugin may emit per call through the `log` import.
    pub log_lines: u32,
    /// Largest `wasi:random` request (`get-random-bytes`, `get-insecure-random-bytes`).
    pub random_bytes: u64,
    /// Largest result of one `cache.query` (JSON bytes); beyond it the call fails.
    pub query_bytes: usize,
    /// JSON bytes all `cache.get` and `cache.query` results of one call may add up to.
    pub read_bytes: usize,
    /// Concurrent reconciles of this plugin (`None`: the host's `--workers`).
    pub concurrency: Option<usize>,
}

/// What a table element is counted as against [`Limits::memory_bytes`] (a pointer-sized slot,
/// as wasmtime stores `funcref` tables on 64-bit hosts).
pub const TABLE_ELEMENT_BYTES: usize = 8;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_secs(1),
            memory_bytes: 64 << 20,
            output_bytes: 16 << 10,
            log_lines: 64,
            random_bytes: 1 << 20,
            query_bytes: 8 << 20,
            read_bytes: 32 << 20,
            concurrency: None,
        }
    }
}

/// The default limits plus overrides by plugin name (`--plugin-limit`).
///
/// A plugin's name is known only once its `info()` returned, so `info()` runs under the
/// [`ceiling`](LimitSet::ceiling) of every configured limit; the loader then checks what it used
/// against the plugin's own limits and refuses the plugin if it went over them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitSet {
    /// Limits of plugins without an override.
    pub default: Limits,
    /// Overrides by plugin name.
    pub by_name: HashMap<String, Limits>,
}

impl From<Limits> for LimitSet {
    fn from(default: Limits) -> Self {
        LimitSet { default, by_name: HashMap::new() }
    }
}

impl LimitSet {
    /// The limits of the plugin named `name`.
    pub fn for_plugin(&self, name: &str) -> &Limits {
        self.by_name.get(name).unwrap_or(&self.default)
    }

    /// The largest deadline and memory of all configured limits (what `info()` runs under).
    pub fn ceiling(&self) -> Limits {
        let mut c = self.default.clone();
        for l in self.by_name.values() {
            c.deadline = c.deadline.max(l.deadline);
            c.memory_bytes = c.memory_bytes.max(l.memory_bytes);
        }
        c
    }

    /// Names with an override that are not in `loaded` (likely a typo in `--plugin-limit`).
    pub fn unmatched<'a>(&'a self, loaded: &[&str]) -> Vec<&'a str> {
        let mut v: Vec<&str> = self.by_name.keys().map(String::as_str).filter(|n| !loaded.contains(n)).collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ceiling_covers_every_override_and_lookups_fall_back_to_the_default() {
        let mut s = LimitSet::from(Limits::default());
        let big = Limits { memory_bytes: 256 << 20, ..Limits::default() };
        let slow = Limits { deadline: Duration::from_secs(5), ..Limits::default() };
        s.by_name.insert("big".into(), big.clone());
        s.by_name.insert("slow".into(), slow);
        let c = s.ceiling();
        assert_eq!((c.memory_bytes, c.deadline), (256 << 20, Duration::from_secs(5)));
        assert_eq!(s.for_plugin("big"), &big);
        assert_eq!(s.for_plugin("other"), &Limits::default());
        assert_eq!(s.unmatched(&["big"]), ["slow"]);
    }
}
