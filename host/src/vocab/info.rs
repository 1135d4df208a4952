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
    /// Dotted paths `mutate` may change (0.3; empty: the plugin does not mutate).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mutates: Vec<String>,
    /// Versions of the primary's CRD `convert` converts between (0.3; empty: it does not convert).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub converts: Vec<String>,
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
        for path in &self.mutates {
            check_mutable_path(path)?;
        }
        if !self.converts.is_empty() {
            if self.converts.len() < 2 || !self.converts.contains(&self.primary.version) {
                return Err(format!(
                    "converts {:?} must list at least two versions, the primary's {} among them",
                    self.converts, self.primary.version
                ));
            }
            if let Some(v) = self.converts.iter().find(|v| !is_dns_label(v)) {
                return Err(format!("converts: {v:?} is not a version name"));
            }
        }
        Ok(())
    }

    /// Whether the plugin serves `mutate`.
    pub fn mutates(&self) -> bool {
        !self.mutates.is_empty()
    }

    /// Whether the plugin serves `convert`.
    pub fn converts(&self) -> bool {
        !self.converts.is_empty()
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

/// A path `mutate` may declare: dotted field names (`spec.replicas`, `metadata.labels`), never the
/// object's identity or its status (the host owns status; identity must not change at admission).
fn check_mutable_path(path: &str) -> Result<(), String> {
    if path.is_empty() || path.len() > 256 || path.split('.').any(str::is_empty) {
        return Err(format!("mutates: {path:?} is not a dotted field path such as spec.replicas"));
    }
    // The whole object or metadata would cover what the host and the API server own; the
    // paths under them that no mutation may change are the admission webhook's `FIXED` list.
    let fixed = [
        "apiVersion",
        "kind",
        "metadata.name",
        "metadata.generateName",
        "metadata.namespace",
        "metadata.uid",
        "metadata.resourceVersion",
        "metadata.generation",
        "metadata.creationTimestamp",
        "metadata.deletionTimestamp",
        "metadata.deletionGracePeriodSeconds",
        "metadata.finalizers",
        "metadata.ownerReferences",
        "metadata.managedFields",
        "status",
    ];
    let under = |p: &str| path == p || path.starts_with(&format!("{p}."));
    if path == "metadata" || fixed.iter().any(|p| under(p)) {
        return Err(format!(
            "mutates: {path:?} may not be changed at admission (identity, finalizers, owner references, metadata as a whole, status)"
        ));
    }
    Ok(())
}

/// RFC 1123 label.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}
