//! Before a controller starts: may the host's own identity do what the plugin needs? Asked with
//! SelfSubjectAccessReviews, so a grant that the host's RBAC lacks shows up as Forbidden, naming
//! the verb and the resource, instead of a watch failing forever or writes being refused later.

use super::Role;
use crate::vocab::grants::Namespaces;
use crate::watch::discovery::Resolved;
use crate::watch::pool::Reach;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::api::{Api, PostParams};
use kube::Client;

/// Where a reconcile may need a watched kind's objects, beyond its primary's own namespace or
/// not: kinds owned across namespaces, all namespaced kinds of a cluster-scoped primary, and
/// kinds read where the grants reach further (`Namespaces::All` or `Listed`). On a
/// namespace-sharded host these are cached whole, not as the replica's slice.
pub fn reach(role: Role, primary_namespaced: bool, owned_across: bool, namespaces: &Namespaces) -> Reach {
    let beyond = match role {
        Role::Primary => false,
        _ if !primary_namespaced => true,
        Role::Owned => owned_across,
        Role::Read => !matches!(namespaces, Namespaces::Own),
    };
    if beyond {
        Reach::Everywhere
    } else {
        Reach::PrimaryNamespaces
    }
}

/// One permission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permission {
    /// API group.
    pub group: String,
    /// Plural resource name.
    pub resource: String,
    /// e.g. `status`.
    pub subresource: Option<String>,
    /// e.g. `watch`.
    pub verb: &'static str,
    /// `None`: all namespaces (or a cluster-scoped resource).
    pub namespace: Option<String>,
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() { "core" } else { &self.group };
        let sub = self.subresource.as_deref().map(|s| format!("/{s}")).unwrap_or_default();
        let ns = match &self.namespace {
            Some(n) => format!("in namespace {n}"),
            None => "in all namespaces".into(),
        };
        write!(f, "{} {}{sub} ({group}) {ns}", self.verb, self.resource)
    }
}

/// What a controller for these kinds needs: list and watch everything it caches (in `watch_ns`,
/// or all namespaces), patch its primary's status (and, when the plugin `finalizes`, the primary
/// itself: its finalizer), create and patch what it owns (in each granted namespace, else where
/// it watches), create events.
pub fn needed(
    kinds: &[(Resolved, Role)],
    watch_ns: Option<&str>,
    grants: &Namespaces,
    finalizes: bool,
) -> Vec<Permission> {
    let write_ns: Vec<Option<String>> = match (watch_ns, grants) {
        (Some(n), _) => vec![Some(n.to_string())],
        (None, Namespaces::Listed(l)) => l.iter().cloned().map(Some).collect(),
        (None, _) => vec![None],
    };
    let mut out = Vec::new();
    let mut push = |r: &Resolved, sub: Option<&str>, verb: &'static str, ns: Option<String>| {
        out.push(Permission {
            group: r.resource.group.clone(),
            resource: r.resource.plural.clone(),
            subresource: sub.map(str::to_string),
            verb,
            namespace: if r.namespaced { ns } else { None },
        })
    };
    for (r, role) in kinds {
        for verb in ["list", "watch"] {
            push(r, None, verb, watch_ns.map(str::to_string));
        }
        match role {
            Role::Primary => {
                for n in &write_ns {
                    push(r, Some("status"), "patch", n.clone());
                    if finalizes {
                        push(r, None, "patch", n.clone());
                    }
                }
            }
            Role::Owned => {
                for n in &write_ns {
                    push(r, None, "create", n.clone());
                    push(r, None, "patch", n.clone());
                }
            }
            Role::Read => {}
        }
    }
    out
}

/// The first permission the API server denies, with its reason. A review that cannot be made
/// (the API server is unreachable) is not a denial: the start goes on and its watches retry.
pub async fn first_denied(client: &Client, needs: &[Permission]) -> Option<String> {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    for p in needs {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    group: Some(p.group.clone()),
                    resource: Some(p.resource.clone()),
                    subresource: p.subresource.clone(),
                    verb: Some(p.verb.to_string()),
                    namespace: p.namespace.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        match api.create(&PostParams::default(), &review).await {
            Ok(r) => {
                let status = r.status.unwrap_or_default();
                if !status.allowed {
                    let why = status.reason.filter(|r| !r.is_empty()).map(|r| format!(": {r}")).unwrap_or_default();
                    return Some(format!("the host's service account may not {p}{why}; grant it in the host's RBAC"));
                }
            }
            Err(e) => {
                tracing::warn!("cannot review the host's permissions ({p}): {e}; starting anyway");
                return None;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Gvk;
    use kube::core::ApiResource;

    fn resolved(group: &str, kind: &str, plural: &str, namespaced: bool) -> Resolved {
        let gvk = Gvk::new(group, "v1", kind);
        let mut resource = ApiResource::from_gvk_with_plural(&gvk.to_kube(), plural);
        resource.plural = plural.into();
        Resolved { gvk, resource, namespaced }
    }

    #[test]
    fn a_controller_needs_watches_status_and_owned_writes_where_it_acts() {
        let kinds = vec![
            (resolved("example.com", "Foo", "foos", true), Role::Primary),
            (resolved("apps", "Deployment", "deployments", true), Role::Owned),
            (resolved("", "Namespace", "namespaces", false), Role::Read),
        ];
        let listed = Namespaces::Listed(["a".to_string(), "b".to_string()].into());
        let n = needed(&kinds, None, &listed, false);
        let s: Vec<String> = n.iter().map(ToString::to_string).collect();
        assert!(!s.contains(&"patch foos (example.com) in namespace a".to_string()), "{s:?}");
        let f: Vec<String> = needed(&kinds, None, &listed, true).iter().map(ToString::to_string).collect();
        assert!(f.contains(&"patch foos (example.com) in namespace a".to_string()), "its finalizer: {f:?}");
        assert!(s.contains(&"watch foos (example.com) in all namespaces".to_string()), "{s:?}");
        assert!(s.contains(&"patch foos/status (example.com) in namespace a".to_string()), "{s:?}");
        assert!(s.contains(&"create deployments (apps) in namespace b".to_string()), "{s:?}");
        assert!(s.contains(&"list namespaces (core) in all namespaces".to_string()), "{s:?}");
        assert!(!s.iter().any(|p| p.starts_with("create namespaces")), "{s:?}");
        let n = needed(&kinds, Some("x"), &Namespaces::Own, false);
        assert!(n.iter().filter(|p| p.resource != "namespaces").all(|p| p.namespace.as_deref() == Some("x")));
    }

    #[test]
    fn only_what_a_reconcile_needs_beyond_its_primarys_namespace_is_cached_whole_when_sharded() {
        let (own, all) = (Namespaces::Own, Namespaces::All);
        let listed = Namespaces::Listed(["a".to_string()].into());
        let w = Reach::Everywhere;
        let p = Reach::PrimaryNamespaces;
        // A namespaced primary: its own kind, what it owns in its namespace, what it reads there.
        assert_eq!(reach(Role::Primary, true, false, &all), p);
        assert_eq!(reach(Role::Owned, true, false, &all), p);
        assert_eq!(reach(Role::Read, true, false, &own), p);
        // ...but what it owns across namespaces, or reads in other namespaces, is anywhere.
        assert_eq!(reach(Role::Owned, true, true, &own), w);
        assert_eq!(reach(Role::Read, true, false, &all), w);
        assert_eq!(reach(Role::Read, true, false, &listed), w);
        // A cluster-scoped primary's children and reads live in any namespace.
        assert_eq!(reach(Role::Primary, false, false, &own), p);
        assert_eq!(reach(Role::Owned, false, false, &own), w);
        assert_eq!(reach(Role::Read, false, false, &own), w);
    }
}
