//! A plugin's `info()`, as the component returned it, converted and validated into the host's
//! [`PluginInfo`].

use super::wit;
use crate::vocab::{Gvk, PluginInfo};

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
            mutates: vec![],
            converts: vec![],
        };
        info.validate()?;
        Ok(info)
    }
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
