//! Unit tests of `vocab::rbac` (the rules a plugin's grants need).

use super::*;

fn grants(namespaces: Namespaces) -> Grants {
    Grants {
        primary: Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo"),
        owns: vec![Gvk::new("apps", "v1", "Deployment"), Gvk::new("", "v1", "Namespace")],
        across: vec![],
        reads: vec![Gvk::new("", "v1", "ConfigMap"), Gvk::new("apps", "v1", "Deployment")],
        namespaces,
        conversion: false,
    }
}

fn set(rules: &[PolicyRule]) -> Vec<String> {
    triples(rules).into_iter().map(|(g, r, v)| format!("{v} {r}.{g}")).collect()
}

#[test]
fn reads_are_cluster_wide_and_writes_where_granted() {
    let listed = Namespaces::Listed(["a".to_string(), "b".to_string()].into());
    let r = plugin_rbac(&grants(listed), Declares::default(), &Resources::builtin());
    let cluster = set(&r.cluster);
    for want in ["watch foos.samplecontroller.k8s.io", "list deployments.apps", "get configmaps."] {
        assert!(cluster.contains(&want.to_string()), "{want} in {cluster:?}");
    }
    // Namespace is cluster-scoped: its writes cannot be in a Role.
    assert!(cluster.contains(&"delete namespaces.".to_string()), "{cluster:?}");
    assert!(!cluster.iter().any(|p| p.contains("deployments") && p.starts_with("create")), "{cluster:?}");
    assert_eq!(r.namespaced.keys().collect::<Vec<_>>(), ["a", "b"]);
    let a = set(&r.namespaced["a"]);
    assert_eq!(
        a,
        [
            "create deployments.apps",
            "delete deployments.apps",
            "patch deployments.apps",
            "patch foos/status.samplecontroller.k8s.io"
        ]
    );
    assert_eq!(r.guessed, vec![Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo")]);
    // No write on what is only read, no wildcard, the primary itself only when finalizing.
    let all: Vec<String> = cluster.iter().chain(&a).cloned().collect();
    assert!(!all.iter().any(|p| p.contains('*')), "{all:?}");
    let configmaps: Vec<&String> = all.iter().filter(|p| p.ends_with(" configmaps.")).collect();
    assert_eq!(configmaps, ["get configmaps.", "list configmaps.", "watch configmaps."]);
    assert!(!all.contains(&"patch foos.samplecontroller.k8s.io".to_string()));
}

#[test]
fn without_listed_namespaces_everything_is_one_cluster_role() {
    let mut res = Resources::builtin();
    res.add_crds(&[serde_json::json!({"kind": "CustomResourceDefinition", "spec": {
        "group": "samplecontroller.k8s.io", "scope": "Namespaced", "names": {"kind": "Foo", "plural": "foozes"}}})]);
    let r = plugin_rbac(&grants(Namespaces::Own), Declares { finalizes: true, validates: true }, &res);
    assert!(r.namespaced.is_empty() && r.guessed.is_empty());
    let c = set(&r.cluster);
    for want in ["patch foozes.samplecontroller.k8s.io", "patch foozes/status.samplecontroller.k8s.io"] {
        assert!(c.contains(&want.to_string()), "{want} (the finalizer) in {c:?}");
    }
    // One rule per resource, its verbs merged (Deployment owned and read).
    let dep: Vec<&PolicyRule> =
        r.cluster.iter().filter(|x| x.resources.as_deref() == Some(&["deployments".to_string()])).collect();
    assert_eq!(dep.len(), 1);
    assert_eq!(dep[0].verbs, ["get", "list", "watch", "create", "patch", "delete"]);
    // Validating: its CRD read by name, nothing else of CRDs.
    let crd: Vec<&PolicyRule> =
        r.cluster.iter().filter(|x| x.api_groups.as_deref() == Some(&["apiextensions.k8s.io".to_string()])).collect();
    assert_eq!(crd.len(), 1);
    assert_eq!(crd[0].resource_names.as_deref(), Some(&["foozes.samplecontroller.k8s.io".to_string()][..]));
    assert_eq!(crd[0].verbs, ["get"]);
    let mut builtin = grants(Namespaces::Own);
    builtin.primary = Gvk::new("apps", "v1", "Deployment");
    let d = plugin_rbac(&builtin, Declares { finalizes: false, validates: true }, &res);
    assert!(!set(&d.cluster).iter().any(|p| p.contains("customresourcedefinitions")), "a built-in primary has no CRD");
    let o = objects(&r, "kwop-plugin-p", "p", "kwop", "kwop-system");
    assert_eq!(o.len(), 2);
    assert_eq!(o[1]["subjects"][0]["namespace"], "kwop-system");
    assert_eq!(o[1]["roleRef"]["name"], "kwop-plugin-p");
}

#[test]
fn builtin_kinds_have_their_real_resources() {
    let res = Resources::builtin();
    let ing = res.get(&Gvk::new("networking.k8s.io", "v1", "Ingress"));
    assert_eq!((ing.plural.as_str(), ing.namespaced, ing.guessed), ("ingresses", true, false));
    let pv = res.get(&Gvk::new("", "v1", "PersistentVolume"));
    assert!(!pv.namespaced && !pv.guessed);
    let policy = res.get(&Gvk::new("example.com", "v1", "Policy"));
    assert_eq!((policy.plural.as_str(), policy.guessed), ("policies", true));
}

#[test]
fn a_granted_conversion_may_get_and_patch_the_primarys_crd_only() {
    let res = Resources::default();
    let g = Grants { conversion: true, ..grants(Namespaces::Own) };
    let r = plugin_rbac(&g, Declares { finalizes: false, validates: false }, &res);
    let crd: Vec<&PolicyRule> = r
        .cluster
        .iter()
        .filter(|p| p.resources.as_ref().is_some_and(|r| r[0] == "customresourcedefinitions"))
        .collect();
    assert_eq!(crd.len(), 1);
    assert_eq!(crd[0].verbs, vec!["get", "patch"]);
    assert_eq!(crd[0].resource_names.as_deref(), Some(&["foos.samplecontroller.k8s.io".to_string()][..]));
}
