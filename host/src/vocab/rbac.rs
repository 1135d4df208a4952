//! The RBAC the host's service account needs for one plugin's grants (`kwop plugin rbac`, and
//! what the Helm chart renders for each plugin of its values): get, list and watch on the primary
//! and on every owned and read kind — cluster-wide, because the host watches each kind in every
//! namespace and the grants filter —; patch on the primary's `/status` (and on the primary itself
//! when the plugin finalizes: its finalizer); create, patch and delete on the owned kinds; get on
//! the primary's CustomResourceDefinition, by name, when the plugin validates (admission of
//! `/scale` reads its `specReplicasPath`), get and patch when its conversion is granted (the host
//! keeps the CRD's `spec.conversion`). Writes
//! go where the grants allow them: a Role in each granted namespace, or the ClusterRole when the
//! grants list none (or the kind is cluster-scoped).
//!
//! Pure: kinds are turned into resources by a [`Resources`] table (the built-in kinds of
//! k8s-openapi, CRDs given to it, else kube-rs's plural of the kind, namespaced, marked guessed).

use super::grants::{Grants, Namespaces};
use super::Gvk;
use k8s_openapi::api::rbac::v1::PolicyRule;
use std::collections::{BTreeMap, BTreeSet};

/// A kind's API resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// Plural name (`deployments`).
    pub plural: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Not known (neither built in nor from a CRD): kube-rs's plural of the kind, namespaced.
    pub guessed: bool,
}

/// Kinds to resources: built-in kinds, then CRDs added, else a guess.
#[derive(Debug, Clone, Default)]
pub struct Resources {
    known: BTreeMap<(String, String), Resource>,
}

fn builtin<T: k8s_openapi::Resource>() -> ((String, String), Resource)
where
    T::Scope: 'static,
{
    let namespaced =
        std::any::TypeId::of::<T::Scope>() == std::any::TypeId::of::<k8s_openapi::NamespaceResourceScope>();
    let r = Resource { plural: T::URL_PATH_SEGMENT.to_string(), namespaced, guessed: false };
    ((T::GROUP.to_string(), T::KIND.to_string()), r)
}

impl Resources {
    /// The built-in kinds a plugin is likely to own or read (others are guessed as namespaced
    /// with kube-rs's plural, which is right for every namespaced built-in kind).
    pub fn builtin() -> Self {
        use k8s_openapi::api::{apps, autoscaling, batch, core, networking, policy, rbac, storage};
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
        let known = [
            builtin::<core::v1::ConfigMap>(),
            builtin::<core::v1::Secret>(),
            builtin::<core::v1::Service>(),
            builtin::<core::v1::ServiceAccount>(),
            builtin::<core::v1::Pod>(),
            builtin::<core::v1::PersistentVolumeClaim>(),
            builtin::<core::v1::PersistentVolume>(),
            builtin::<core::v1::Namespace>(),
            builtin::<core::v1::Node>(),
            builtin::<core::v1::Endpoints>(),
            builtin::<core::v1::LimitRange>(),
            builtin::<core::v1::ResourceQuota>(),
            builtin::<apps::v1::Deployment>(),
            builtin::<apps::v1::StatefulSet>(),
            builtin::<apps::v1::DaemonSet>(),
            builtin::<apps::v1::ReplicaSet>(),
            builtin::<batch::v1::Job>(),
            builtin::<batch::v1::CronJob>(),
            builtin::<networking::v1::Ingress>(),
            builtin::<networking::v1::IngressClass>(),
            builtin::<networking::v1::NetworkPolicy>(),
            builtin::<policy::v1::PodDisruptionBudget>(),
            builtin::<autoscaling::v2::HorizontalPodAutoscaler>(),
            builtin::<rbac::v1::Role>(),
            builtin::<rbac::v1::RoleBinding>(),
            builtin::<rbac::v1::ClusterRole>(),
            builtin::<rbac::v1::ClusterRoleBinding>(),
            builtin::<storage::v1::StorageClass>(),
            builtin::<ext::CustomResourceDefinition>(),
        ];
        Resources { known: known.into_iter().collect() }
    }

    /// Adds (or replaces) a kind's resource, e.g. from a CRD's `spec.names` and `spec.scope`.
    pub fn add(&mut self, group: &str, kind: &str, plural: &str, namespaced: bool) {
        let r = Resource { plural: plural.to_string(), namespaced, guessed: false };
        self.known.insert((group.to_string(), kind.to_string()), r);
    }

    /// Adds the kinds defined by CustomResourceDefinition objects (others are skipped).
    pub fn add_crds(&mut self, objects: &[serde_json::Value]) {
        for o in objects.iter().filter(|o| o["kind"] == "CustomResourceDefinition") {
            let s = &o["spec"];
            if let (Some(g), Some(k), Some(p)) =
                (s["group"].as_str(), s["names"]["kind"].as_str(), s["names"]["plural"].as_str())
            {
                self.add(g, k, p, s["scope"] != "Cluster");
            }
        }
    }

    /// A kind's resource.
    pub fn get(&self, gvk: &Gvk) -> Resource {
        match self.known.get(&(gvk.group.clone(), gvk.kind.clone())) {
            Some(r) => r.clone(),
            None => {
                let plural = kube::core::ApiResource::from_gvk(&gvk.to_kube()).plural;
                Resource { plural, namespaced: true, guessed: true }
            }
        }
    }
}

/// The rules one plugin needs, by where they apply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PluginRbac {
    /// Cluster-wide (a ClusterRole).
    pub cluster: Vec<PolicyRule>,
    /// In each granted namespace (a Role per namespace); empty when the grants list none.
    pub namespaced: BTreeMap<String, Vec<PolicyRule>>,
    /// Kinds whose resource was guessed (not built in, no CRD given).
    pub guessed: Vec<Gvk>,
}

const READ: [&str; 3] = ["get", "list", "watch"];
const WRITE: [&str; 3] = ["create", "patch", "delete"];

/// Rules keyed by (group, resource), verbs in first-added order.
#[derive(Default)]
struct Rules(Vec<((String, String), Vec<String>)>);

impl Rules {
    fn add(&mut self, group: &str, resource: &str, verbs: &[&str]) {
        let key = (group.to_string(), resource.to_string());
        let i = match self.0.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                self.0.push((key, Vec::new()));
                self.0.len() - 1
            }
        };
        for v in verbs {
            if !self.0[i].1.iter().any(|x| x == v) {
                self.0[i].1.push(v.to_string());
            }
        }
    }

    fn into_rules(self) -> Vec<PolicyRule> {
        self.0
            .into_iter()
            .map(|((group, resource), verbs)| PolicyRule {
                api_groups: Some(vec![group]),
                resources: Some(vec![resource]),
                verbs,
                ..Default::default()
            })
            .collect()
    }
}

/// What a plugin declares beyond its kinds that needs more of the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Declares {
    /// It finalizes: the host patches its primary's finalizer.
    pub finalizes: bool,
    /// It validates: admission of `/scale` reads the primary's CRD.
    pub validates: bool,
}

/// The API groups Kubernetes serves itself (kinds in any other group come from a CRD).
pub const BUILTIN_GROUPS: [&str; 23] = [
    "",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "internal.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "storagemigration.k8s.io",
];

/// What the host needs for a plugin with these grants and declarations.
pub fn plugin_rbac(grants: &Grants, declares: Declares, resources: &Resources) -> PluginRbac {
    let finalizes = declares.finalizes;
    let mut kinds: Vec<&Gvk> = Vec::new();
    for g in std::iter::once(&grants.primary).chain(&grants.owns).chain(&grants.reads) {
        if !kinds.iter().any(|k| k.same_group_kind(g)) {
            kinds.push(g);
        }
    }
    let mut cluster = Rules::default();
    let mut local = Rules::default();
    let mut guessed = Vec::new();
    for g in &kinds {
        let r = resources.get(g);
        if r.guessed {
            guessed.push((*g).clone());
        }
        cluster.add(&g.group, &r.plural, &READ);
    }
    let listed = matches!(grants.namespaces, Namespaces::Listed(_));
    let mut write = |g: &Gvk, sub: &str, verbs: &[&str]| {
        let r = resources.get(g);
        let into = if listed && r.namespaced { &mut local } else { &mut cluster };
        into.add(&g.group, &format!("{}{sub}", r.plural), verbs);
    };
    write(&grants.primary, "/status", &["patch"]);
    if finalizes {
        write(&grants.primary, "", &["patch"]);
    }
    for g in &grants.owns {
        write(g, "", &WRITE);
    }
    let mut cluster = cluster.into_rules();
    let p = &grants.primary;
    // The primary's CRD: read for `/scale` admission, read and patched (its `spec.conversion`)
    // when the conversion is granted.
    let mut crd_verbs = Vec::new();
    if declares.validates || grants.conversion {
        crd_verbs.push("get".to_string());
    }
    if grants.conversion {
        crd_verbs.push("patch".to_string());
    }
    if !crd_verbs.is_empty() && !BUILTIN_GROUPS.contains(&p.group.as_str()) {
        cluster.push(PolicyRule {
            api_groups: Some(vec!["apiextensions.k8s.io".into()]),
            resources: Some(vec!["customresourcedefinitions".into()]),
            resource_names: Some(vec![format!("{}.{}", resources.get(p).plural, p.group)]),
            verbs: crd_verbs,
            ..Default::default()
        });
    }
    let local = local.into_rules();
    let namespaced = match &grants.namespaces {
        Namespaces::Listed(l) if !local.is_empty() => l.iter().map(|n| (n.clone(), local.clone())).collect(),
        _ => BTreeMap::new(),
    };
    PluginRbac { cluster, namespaced, guessed }
}

/// The objects to apply: a ClusterRole and its ClusterRoleBinding named `name`, and a Role and
/// RoleBinding `name` in each granted namespace, bound to the service account
/// `sa_namespace/sa_name`.
pub fn objects(
    rbac: &PluginRbac,
    name: &str,
    plugin: &str,
    sa_name: &str,
    sa_namespace: &str,
) -> Vec<serde_json::Value> {
    use serde_json::json;
    let labels = json!({ "app.kubernetes.io/name": "kwop", "kwop.dev/plugin": plugin });
    let subjects = json!([{ "kind": "ServiceAccount", "name": sa_name, "namespace": sa_namespace }]);
    let mut out = vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": { "name": name, "labels": labels }, "rules": rbac.cluster,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": { "name": name, "labels": labels },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
            "subjects": subjects,
        }),
    ];
    for (ns, rules) in &rbac.namespaced {
        out.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": { "name": name, "namespace": ns, "labels": labels }, "rules": rules,
        }));
        out.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": { "name": name, "namespace": ns, "labels": labels },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name },
            "subjects": subjects,
        }));
    }
    out
}

/// The (group, resource, verb) triples of some rules, for comparing rule sets in any order.
pub fn triples(rules: &[PolicyRule]) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for r in rules {
        for g in r.api_groups.iter().flatten() {
            for res in r.resources.iter().flatten() {
                for v in &r.verbs {
                    out.insert((g.clone(), res.clone(), v.clone()));
                }
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "rbac_tests.rs"]
mod tests;
