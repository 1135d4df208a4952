//! Group/version/kind: the one vocabulary the host, the plugins and the API server share.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A group/version/kind. The core group is `""`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Gvk {
    /// API group (`""` for core).
    pub group: String,
    /// Version within the group.
    pub version: String,
    /// Kind.
    pub kind: String,
}

impl Gvk {
    /// Builds a GVK.
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        Gvk { group: group.into(), version: version.into(), kind: kind.into() }
    }

    /// `apps/v1`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Splits an object's `apiVersion` + `kind`.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        match api_version.split_once('/') {
            Some((g, v)) => Gvk::new(g, v, kind),
            None => Gvk::new("", api_version, kind),
        }
    }

    /// Same group and kind (any version): how owner references are matched.
    pub fn same_group_kind(&self, other: &Gvk) -> bool {
        self.group == other.group && self.kind == other.kind
    }

    /// The kube-rs form.
    pub fn to_kube(&self) -> kube::core::GroupVersionKind {
        kube::core::GroupVersionKind::gvk(&self.group, &self.version, &self.kind)
    }
}

impl fmt::Display for Gvk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.api_version(), self.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_group_has_no_slash() {
        let g = Gvk::from_api_version("v1", "ConfigMap");
        assert_eq!(g, Gvk::new("", "v1", "ConfigMap"));
        assert_eq!(g.api_version(), "v1");
        assert_eq!(Gvk::from_api_version("apps/v1", "Deployment").to_string(), "apps/v1/Deployment");
    }
}
