//! What a cluster admin grants a plugin, checked against what the plugin's `info()` asks for:
//! the authority a plugin runs with is `info()` ∩ grants, and a plugin asking for more is refused.

use super::crd;
use super::{Gvk, PluginInfo};
use std::collections::BTreeSet;

/// Where a plugin may act and read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Namespaces {
    /// Every namespace (folder mode: the developer's own machine).
    All,
    /// Primaries anywhere; each reconcile reads only in its primary's own namespace.
    Own,
    /// Only primaries in these namespaces; reads anywhere among them.
    Listed(BTreeSet<String>),
}

impl Namespaces {
    /// Whether a primary in `ns` (`None`: cluster-scoped) is reconciled at all.
    pub fn acts_on(&self, ns: Option<&str>) -> bool {
        match (self, ns) {
            (Namespaces::Listed(l), Some(n)) => l.contains(n),
            // A cluster-scoped primary has no namespace to be outside of.
            _ => true,
        }
    }

    /// Whether anything may be written in namespace `ns` at all (where it may be relative to its
    /// primary is the write fence's business).
    pub fn writes_in(&self, ns: &str) -> bool {
        match self {
            Namespaces::Listed(l) => l.contains(ns),
            _ => true,
        }
    }

    /// Whether a reconcile of a primary in `primary_ns` may read objects in `ns` (`None`: a
    /// cluster-scoped object).
    pub fn reads_in(&self, primary_ns: Option<&str>, ns: Option<&str>) -> bool {
        match (self, ns) {
            (_, None) | (Namespaces::All, _) => true,
            (Namespaces::Own, Some(n)) => primary_ns.is_none_or(|p| p == n),
            (Namespaces::Listed(l), Some(n)) => l.contains(n),
        }
    }
}

/// A plugin's authority.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Grants {
    /// The kind reconciled.
    pub primary: Gvk,
    /// Kinds it may write.
    pub owns: Vec<Gvk>,
    /// Of `owns`, the kinds it may write outside its primaries' namespaces (tracked by labels).
    pub across: Vec<Gvk>,
    /// Kinds it may only read.
    pub reads: Vec<Gvk>,
    /// Where.
    pub namespaces: Namespaces,
    /// Whether it may convert its primary's CRD between versions (`spec.grants.conversion`;
    /// never in folder mode, which has no admin to grant it).
    pub conversion: bool,
}

fn kind(k: &crd::KindRef, what: &str) -> Result<Gvk, String> {
    let g = Gvk::from_api_version(k.api_version.trim(), k.kind.trim());
    if g.version.is_empty() || g.kind.is_empty() || g.group.contains('/') || g.version.contains('/') {
        return Err(format!("grants.{what}: {:?} {:?} is not an apiVersion and a kind", k.api_version, k.kind));
    }
    Ok(g)
}

impl Grants {
    /// From a ReconcilerPlugin's `spec.grants`.
    pub fn from_spec(g: &crd::Grants) -> Result<Self, String> {
        let primary = kind(&g.primary, "primary")?;
        let owns = g.owns.iter().map(|k| kind(&k.kind, "owns")).collect::<Result<Vec<_>, _>>()?;
        let across = g.owns.iter().zip(&owns).filter(|(k, _)| k.across_namespaces).map(|(_, g)| g.clone()).collect();
        let reads = g.reads.iter().map(|k| kind(k, "reads")).collect::<Result<Vec<_>, _>>()?;
        let namespaces = match &g.namespaces {
            None => Namespaces::Own,
            Some(list) => {
                for n in list {
                    if !super::is_dns_label(n) {
                        return Err(format!("grants.namespaces: {n:?} is not a namespace name"));
                    }
                }
                Namespaces::Listed(list.iter().cloned().collect())
            }
        };
        Ok(Grants { primary, owns, across, reads, namespaces, conversion: g.conversion })
    }

    /// What folder mode grants: everything the plugin declares, in every namespace.
    pub fn from_info(info: &PluginInfo) -> Self {
        Grants {
            primary: info.primary.clone(),
            owns: info.owns.clone(),
            across: info.across.clone(),
            reads: info.reads.clone(),
            namespaces: Namespaces::All,
            conversion: false,
        }
    }

    /// Refuses a plugin whose declaration goes beyond these grants, naming the first kind that
    /// does. Kinds match by group and kind (any version: the authority is over the resource).
    pub fn check(&self, info: &PluginInfo) -> Result<(), String> {
        let has = |list: &[Gvk], g: &Gvk| list.iter().any(|x| x.same_group_kind(g));
        let names = |list: &[Gvk]| {
            if list.is_empty() {
                "none".to_string()
            } else {
                list.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            }
        };
        if !self.primary.same_group_kind(&info.primary) {
            return Err(format!(
                "plugin {} reconciles {} but is granted the primary {}",
                info.name, info.primary, self.primary
            ));
        }
        if let Some(g) = info.owns.iter().find(|g| !has(&self.owns, g)) {
            return Err(format!(
                "plugin {} declares owns {g}, which is not granted (owns granted: {})",
                info.name,
                names(&self.owns)
            ));
        }
        if let Some(g) = info.across.iter().find(|g| !has(&self.across, g)) {
            return Err(format!(
                "plugin {} owns {g} across namespaces, which is not granted (grant it with acrossNamespaces: true \
                 in grants.owns)",
                info.name
            ));
        }
        if let Some(g) = info.reads.iter().find(|g| !has(&self.reads, g) && !has(&self.owns, g)) {
            return Err(format!(
                "plugin {} declares reads {g}, which is not granted (reads granted: {})",
                info.name,
                names(&self.reads)
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(api_version: &str, kind: &str) -> crd::KindRef {
        crd::KindRef { api_version: api_version.into(), kind: kind.into() }
    }

    fn info(owns: Vec<Gvk>, reads: Vec<Gvk>) -> PluginInfo {
        PluginInfo {
            name: "p".into(),
            version: "1".into(),
            primary: Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo"),
            owns,
            across: vec![],
            reads,
            finalizes: false,
            validates: false,
            mutates: vec![],
            converts: vec![],
        }
    }

    fn owned(api_version: &str, kind: &str, across_namespaces: bool) -> crd::OwnedKindRef {
        crd::OwnedKindRef { kind: k(api_version, kind), across_namespaces }
    }

    fn grants(namespaces: Option<Vec<String>>) -> Grants {
        Grants::from_spec(&crd::Grants {
            primary: k("samplecontroller.k8s.io/v1alpha1", "Foo"),
            owns: vec![owned("apps/v1", "Deployment", false), owned("v1", "ServiceAccount", true)],
            reads: vec![k("v1", "ConfigMap")],
            namespaces,
            conversion: false,
        })
        .expect("valid")
    }

    #[test]
    fn a_plugin_within_its_grants_passes_and_one_asking_more_is_named() {
        let g = grants(None);
        let dep = Gvk::new("apps", "v1", "Deployment");
        assert!(g.check(&info(vec![dep.clone()], vec![])).is_ok());
        // Less than granted, another version of a granted kind, an owned kind read: fine.
        assert!(g.check(&info(vec![], vec![Gvk::new("", "v1", "ConfigMap")])).is_ok());
        assert!(g.check(&info(vec![Gvk::new("apps", "v1beta2", "Deployment")], vec![dep.clone()])).is_ok());
        let e = g.check(&info(vec![dep.clone(), Gvk::new("apps", "v1", "ReplicaSet")], vec![])).expect_err("more");
        assert!(e.contains("owns apps/v1/ReplicaSet"), "{e}");
        let e = g.check(&info(vec![], vec![Gvk::new("", "v1", "Secret")])).expect_err("reads more");
        assert!(e.contains("reads v1/Secret"), "{e}");
        // A read grant does not allow writing.
        let e = g.check(&info(vec![Gvk::new("", "v1", "ConfigMap")], vec![])).expect_err("owns a read kind");
        assert!(e.contains("owns v1/ConfigMap"), "{e}");
        let mut other = info(vec![], vec![]);
        other.primary = Gvk::new("apps", "v1", "Deployment");
        assert!(g.check(&other).expect_err("primary").contains("granted the primary"));
    }

    #[test]
    fn namespaces_default_to_the_primarys_own() {
        let own = grants(None).namespaces;
        assert!(own.acts_on(Some("a")) && own.reads_in(Some("a"), Some("a")));
        assert!(!own.reads_in(Some("a"), Some("b")));
        assert!(own.reads_in(Some("a"), None), "cluster-scoped objects of a granted kind");
        let listed = grants(Some(vec!["a".into(), "c".into()])).namespaces;
        assert!(listed.acts_on(Some("a")) && !listed.acts_on(Some("b")));
        assert!(listed.reads_in(Some("a"), Some("c")) && !listed.reads_in(Some("a"), Some("b")));
        assert!(Namespaces::All.reads_in(Some("a"), Some("b")));
        assert!(listed.writes_in("c") && !listed.writes_in("b") && own.writes_in("b"));
    }

    #[test]
    fn owning_across_namespaces_must_be_granted_as_such() {
        let g = grants(None);
        let sa = Gvk::new("", "v1", "ServiceAccount");
        let dep = Gvk::new("apps", "v1", "Deployment");
        let mut i = info(vec![sa.clone(), dep.clone()], vec![]);
        i.across = vec![sa];
        i.finalizes = true;
        assert!(g.check(&i).is_ok());
        i.across = vec![dep];
        let e = g.check(&i).expect_err("Deployment is granted in its primary's namespace only");
        assert!(e.contains("apps/v1/Deployment across namespaces"), "{e}");
    }

    #[test]
    fn bad_grants_are_refused() {
        let bad =
            crd::Grants { primary: k("", "Foo"), owns: vec![], reads: vec![], namespaces: None, conversion: false };
        let mut across = bad.clone();
        across.primary = k("v1", "ConfigMap");
        across.owns = vec![owned("v1", "Secret", true)];
        assert_eq!(Grants::from_spec(&across).map(|g| g.across), Ok(vec![Gvk::new("", "v1", "Secret")]));
        assert!(Grants::from_spec(&bad).is_err());
        let mut g = bad.clone();
        g.primary = k("a/b/c", "Foo");
        assert!(Grants::from_spec(&g).is_err());
        g.primary = k("v1", "ConfigMap");
        g.namespaces = Some(vec!["Not_A_Namespace".into()]);
        assert!(Grants::from_spec(&g).is_err());
    }
}
