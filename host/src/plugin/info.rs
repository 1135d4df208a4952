//! A plugin's self-description, validated: the host derives watches and the write fence from it.

use super::wit;
use crate::kinds::Gvk;
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
    /// Converts and validates what `info()` returned.
    pub fn from_wit(w: wit::PluginInfo) -> Result<Self, String> {
        let conv = |g: wit::Gvk| Gvk { group: g.group, version: g.version, kind: g.kind };
        let across = w.owns.iter().filter(|o| o.across_namespaces).map(|o| conv(o.kind.clone())).collect();
        let info = PluginInfo {
            name: w.name,
            version: w.version,
            primary: conv(w.primary),
            owns: w.owns.into_iter().map(|o| conv(o.kind)).collect(),
            across,
            reads: w.reads.into_iter().map(conv).collect(),
            finalizes: w.finalizes,
            validates: w.validates,
        };
        info.validate()?;
        Ok(info)
    }

    fn validate(&self) -> Result<(), String> {
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
        format!("{}{}", crate::finalize::FINALIZER_PREFIX, self.name)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn wgvk(g: &str, v: &str, k: &str) -> wit::Gvk {
        wit::Gvk { group: g.into(), version: v.into(), kind: k.into() }
    }

    fn info(name: &str, owns: Vec<wit::Gvk>) -> wit::PluginInfo {
        wit::PluginInfo {
            name: name.into(),
            version: "1".into(),
            primary: wgvk("example.com", "v1", "Foo"),
            owns: owns.into_iter().map(|kind| wit::OwnedKind { kind, across_namespaces: false }).collect(),
            reads: vec![],
            finalizes: false,
            validates: false,
        }
    }

    #[test]
    fn a_sound_info_is_accepted() {
        let i = PluginInfo::from_wit(info("foo", vec![wgvk("apps", "v1", "Deployment")])).expect("valid");
        assert_eq!(i.field_manager(), "kwop-foo");
    }

    #[test]
    fn bad_names_and_kinds_are_refused() {
        assert!(PluginInfo::from_wit(info("Foo_Bar", vec![])).is_err());
        assert!(PluginInfo::from_wit(info("", vec![])).is_err());
        assert!(PluginInfo::from_wit(info("foo", vec![wgvk("apps", "", "Deployment")])).is_err());
        // The primary cannot also be owned, and no kind twice.
        assert!(PluginInfo::from_wit(info("foo", vec![wgvk("example.com", "v1", "Foo")])).is_err());
        let twice = vec![wgvk("apps", "v1", "Deployment"), wgvk("apps", "v1beta1", "Deployment")];
        assert!(PluginInfo::from_wit(info("foo", twice)).is_err());
    }

    #[test]
    fn a_kind_owned_across_namespaces_needs_a_finalizer() {
        let mut w = info("sync", vec![wgvk("", "v1", "ConfigMap")]);
        w.owns[0].across_namespaces = true;
        let e = PluginInfo::from_wit(w.clone()).expect_err("no finalize");
        assert!(e.contains("v1/ConfigMap is owned across namespaces"), "{e}");
        w.finalizes = true;
        let i = PluginInfo::from_wit(w).expect("finalizes");
        assert!(i.owns_across(&Gvk::new("", "v1", "ConfigMap")));
        assert_eq!(i.finalizer(), "kwop.dev/sync");
    }
}
