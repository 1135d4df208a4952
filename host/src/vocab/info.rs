//! A plugin's self-description, validated: the host derives watches and the write fence from it.
//! (Read from the component's `info()` by `plugin::info`.)

use super::Gvk;
use serde::Serialize;

/// What a plugin reconciles, owns and reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginInfo {
    /// DNS label naming the plugin (and its field manager `kwop-<name>`).
    pub name: String,
    /// The plugin's own version string.
    pub version: String,
    /// The kind reconciled.
    pub primary: Gvk,
    /// Kinds created and controlled.
    pub owns: Vec<Gvk>,
    /// Of `owns`, the kinds whose objects may live outside the primary's namespace (tracked by
    /// labels, not owner references; see `wit/v0.2/reconciler.wit`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub across: Vec<Gvk>,
    /// Kinds only read.
    pub reads: Vec<Gvk>,
    /// The host adds the finalizer `kwop.dev/<name>` and calls `finalize` on deletion.
    pub finalizes: bool,
    /// The host serves admission for the primary kind and calls `validate`.
    pub validates: bool,
}

/// Every plugin's field manager starts so (the cache keeps these managers' status entries).
pub const FIELD_MANAGER_PREFIX: &str = "kwop-";

impl PluginInfo {
    /// Checks a declaration: a DNS-label name, every kind once with a version, at most 32 kinds,
    /// kinds owned across namespaces only by a plugin that finalizes.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if !is_dns_label(&self.name) {
            return Err(format!(
                "plugin name {:?} is not a DNS label (lowercase letters, digits and '-', at most 63 characters)",
                self.name
            ));
        }
        if self.version.len() > 128 {
            return Err("plugin version is longer than 128 bytes".into());
        }
        let all = std::iter::once(&self.primary).chain(&self.owns).chain(&self.reads);
        let mut seen = std::collections::HashSet::new();
        for g in all {
            if g.version.is_empty() || g.kind.is_empty() {
                return Err(format!("kind {g} needs a version and a kind"));
            }
            if !seen.insert((&g.group, &g.kind)) {
                return Err(format!("kind {}/{} is declared twice", g.group, g.kind));
            }
        }
        if self.owns.len() + self.reads.len() > 32 {
            return Err("more than 32 owned and read kinds".into());
        }
        if let Some(g) = self.across.first().filter(|_| !self.finalizes) {
            return Err(format!(
                "kind {g} is owned across namespaces but the plugin does not finalize: nothing would delete its \
                 objects when a primary goes (set finalizes and delete them in finalize)"
            ));
        }
        Ok(())
    }

    /// Field manager used for every write of this plugin.
    pub fn field_manager(&self) -> String {
        format!("{FIELD_MANAGER_PREFIX}{}", self.name)
    }

    /// Every kind the plugin may read.
    pub fn readable(&self) -> impl Iterator<Item = &Gvk> {
        std::iter::once(&self.primary).chain(&self.owns).chain(&self.reads)
    }

    /// Whether watches must be rebuilt to go from `self` to `next`.
    pub fn same_kinds(&self, next: &PluginInfo) -> bool {
        self.primary == next.primary && self.owns == next.owns && self.reads == next.reads && self.across == next.across
    }

    /// Whether objects of `gvk` are tracked by labels (owned across namespaces).
    pub fn owns_across(&self, gvk: &Gvk) -> bool {
        self.across.contains(gvk)
    }

    /// The finalizer the host puts on this plugin's primaries when it finalizes.
    pub fn finalizer(&self) -> String {
        format!("{}{}", super::finalize::FINALIZER_PREFIX, self.name)
    }
}

/// RFC 1123 label.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}
