//! The Helm chart (charts/kwop, issue 40) with a real `helm`: lint and template checked offline
//! (kinds, the plugin RBAC equal to `kwop plugin rbac`'s, no wildcard), then install, upgrade to
//! three sharded replicas and uninstall on the test control plane, the host running locally as
//! the chart's service account (no container runtime here), with the Deployment's own arguments.

mod common;

use common::*;
use k8s_openapi::api::rbac::v1::PolicyRule;
use kwop_tests::shards::{self, Ring};
use kwop_tests::{plugins, ControlPlane, Mode};
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

const SA: &str = "--as=system:serviceaccount:kwop-system:kwop";

fn chart() -> PathBuf {
    kwop_tests::repo_root().join("charts/kwop")
}

/// `helm ARGS` (against the plane when given), its stdout; an error with its stderr.
fn helm(plane: Option<&ControlPlane>, args: &[&str]) -> anyhow::Result<String> {
    let home = std::env::temp_dir().join(format!("kwop-helm-{}", std::process::id()));
    let mut cmd = std::process::Command::new(kwop_tests::tools::path("helm")?);
    for (var, sub) in [("HELM_CACHE_HOME", "cache"), ("HELM_CONFIG_HOME", "config"), ("HELM_DATA_HOME", "data")] {
        cmd.env(var, home.join(sub));
    }
    cmd.args(args);
    if let Some(p) = plane {
        cmd.arg(format!("--kubeconfig={}", p.kubeconfig.display()));
    }
    let out = cmd.output()?;
    anyhow::ensure!(out.status.success(), "helm {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8(out.stdout)?)
}

/// Every YAML document of a text (empty ones left out).
fn docs(text: &str) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for d in serde_yaml::Deserializer::from_str(text) {
        let v = Value::deserialize(d)?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objects.iter().find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

fn rules(o: Option<&Value>) -> anyhow::Result<Vec<PolicyRule>> {
    let o = o.ok_or_else(|| anyhow::anyhow!("no such role"))?;
    Ok(serde_json::from_value(o["rules"].clone())?)
}

/// guest-foo as a ReconcilerPlugin's spec (deploy/plugins/guest-foo.yaml's grants).
fn guest_foo_spec(source: Value, namespaces: Option<&[&str]>) -> Value {
    let mut grants = rp::foo_grants("samplecontroller.k8s.io/v1alpha1");
    if let Some(n) = namespaces {
        grants["namespaces"] = json!(n);
    }
    json!({ "source": source, "grants": grants, "limits": { "memory": "64Mi", "timeout": "1s" } })
}

/// A fresh folder for this run's values files.
fn scratch(what: &str) -> anyhow::Result<PathBuf> {
    let d = std::env::temp_dir().join(format!("kwop-helm-{}-{what}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

fn write(dir: &Path, name: &str, v: &Value) -> anyhow::Result<String> {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string_pretty(v)?)?;
    Ok(p.display().to_string())
}

/// `kwop plugin rbac ARGS`, parsed.
fn kwop_rbac(args: &[&str], env: &[(&str, &Path)]) -> anyhow::Result<Vec<Value>> {
    let mut cmd = std::process::Command::new(KWOP);
    cmd.args(["plugin", "rbac"]).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output()?;
    anyhow::ensure!(out.status.success(), "kwop plugin rbac {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    docs(&String::from_utf8(out.stdout)?)
}

#[test]
fn chart_lints_and_renders_the_rbac_kwop_plugin_rbac_prints() -> anyhow::Result<()> {
    let chart = chart().display().to_string();
    let dir = scratch("template")?;
    // One source for the CRD: the chart's copy is crds/reconcilerplugin.yaml, byte for byte.
    let root = kwop_tests::repo_root();
    let copy = std::fs::read_to_string(root.join("charts/kwop/crds/reconcilerplugin.yaml"))?;
    assert!(
        copy == std::fs::read_to_string(root.join("crds/reconcilerplugin.yaml"))?,
        "charts/kwop/crds/reconcilerplugin.yaml differs from crds/reconcilerplugin.yaml: copy it over"
    );
    let foo_crd = root.join("crds/foo.yaml").display().to_string();
    for (case, namespaces, finalizes) in [("own", None, false), ("listed", Some(&["a", "b"][..]), true)] {
        let spec = guest_foo_spec(json!({ "oci": "registry.example/plugins/guest-foo:0.1.0" }), namespaces);
        let values = json!({
            "replicas": 3, "sharding": { "enabled": true },
            "plugins": [{ "name": "guest-foo", "spec": spec, "rbac": { "finalizes": finalizes, "validates": true } }],
        });
        let values = write(&dir, &format!("{case}.values.yaml"), &values)?;
        helm(None, &["lint", "--strict", &chart, "-f", &values])?;
        let out = docs(&helm(None, &["template", "kwop", &chart, "-n", "kwop-system", "-f", &values])?)?;
        for (kind, name) in [
            ("ServiceAccount", "kwop"),
            ("ClusterRole", "kwop"),
            ("Role", "kwop"),
            ("Deployment", "kwop"),
            ("Service", "kwop-webhook"),
            ("Service", "kwop-metrics"),
            ("PodDisruptionBudget", "kwop"),
            ("ReconcilerPlugin", "guest-foo"),
            ("ClusterRole", "kwop-shard-namespaces"),
            ("ClusterRoleBinding", "kwop-plugin-guest-foo"),
        ] {
            assert!(find(&out, kind, name).is_some(), "{case}: {kind} {name} rendered");
        }
        let rp = json!({ "apiVersion": "kwop.dev/v1alpha1", "kind": "ReconcilerPlugin",
            "metadata": { "name": "guest-foo" }, "spec": find(&out, "ReconcilerPlugin", "guest-foo").map(|o| &o["spec"]) });
        let rp = write(&dir, &format!("{case}.rp.yaml"), &rp)?;
        // guest-foo validates: its CRD is read by name (scale requests).
        let mut args = vec!["-f", rp.as_str(), "--crd", foo_crd.as_str(), "--validates"];
        if finalizes {
            args.push("--finalizes");
        }
        let printed = kwop_rbac(&args, &[])?;
        let name = "kwop-plugin-guest-foo";
        assert_eq!(rules(find(&out, "ClusterRole", name))?, rules(find(&printed, "ClusterRole", name))?, "{case}");
        let roles = |objs: &[Value]| -> Vec<Value> {
            objs.iter().filter(|o| o["kind"] == "Role" && o["metadata"]["name"] == name).cloned().collect()
        };
        let (chart_roles, printed_roles) = (roles(&out), roles(&printed));
        assert_eq!(chart_roles.len(), namespaces.map_or(0, |n| n.len()), "{case}: a Role per granted namespace");
        for (c, p) in chart_roles.iter().zip(&printed_roles) {
            assert_eq!(c["metadata"]["namespace"], p["metadata"]["namespace"]);
            assert_eq!(rules(Some(c))?, rules(Some(p))?, "{case}");
        }
        // Nothing cluster-admin-ish: no wildcard, no escalation verbs, Secrets in its namespace only.
        for o in out.iter().filter(|o| o["kind"] == "Role" || o["kind"] == "ClusterRole") {
            for r in rules(Some(o))? {
                let all: Vec<&String> =
                    r.verbs.iter().chain(r.resources.iter().flatten()).chain(r.api_groups.iter().flatten()).collect();
                assert!(!all.iter().any(|s| s.contains('*')), "wildcard in {}", o["metadata"]["name"]);
                assert!(!r.verbs.iter().any(|v| ["escalate", "bind", "impersonate"].contains(&v.as_str())));
                if o["kind"] == "ClusterRole" {
                    assert!(!r.resources.iter().flatten().any(|s| s == "secrets"), "{}", o["metadata"]["name"]);
                }
            }
        }
        let args =
            find(&out, "Deployment", "kwop").map(|d| d["spec"]["template"]["spec"]["containers"][0]["args"].clone());
        let args = args.unwrap_or_default().to_string();
        assert!(args.contains("--sharding=namespace") && args.contains("--leader-elect"), "{args}");
        assert!(!args.contains("--webhook-certs=external"), "self-signed by default: {args}");
    }
    // From the component itself: the same rules (guest-foo's info() asks for what it is granted,
    // and says it validates);
    // the skeleton grants exactly that; a file that is not a ReconcilerPlugin is named.
    let from_wasm = kwop_rbac(&[plugins::GUEST_FOO, "--crd", &foo_crd], &[])?;
    let from_rp = kwop_rbac(
        &["-f", &root.join("deploy/plugins/guest-foo.yaml").display().to_string(), "--crd", &foo_crd, "--validates"],
        &[],
    )?;
    assert_eq!(from_wasm, from_rp);
    let skeleton = kwop_rbac(&[plugins::GUEST_FOO, "--reconciler-plugin-skeleton", "--oci", "r.example/p:1"], &[])?;
    let example = docs(&std::fs::read_to_string(root.join("deploy/plugins/guest-foo.yaml"))?)?;
    assert_eq!(skeleton[0]["spec"]["grants"], example[0]["spec"]["grants"], "{skeleton:?}");
    assert_eq!(skeleton[0]["spec"]["source"]["oci"], "r.example/p:1");
    let (ok, _, err) = kwop(&["plugin", "rbac", "-f", &foo_crd]);
    assert!(!ok && err.contains("not a ReconcilerPlugin"), "{err}");
    let (ok, _, err) = kwop(&["plugin", "rbac"]);
    assert!(!ok && err.contains("give FILE.wasm, -f RECONCILERPLUGIN.yaml or --reconciler-plugin NAME"), "{err}");
    let (ok, _, err) = kwop(&["plugin", "rbac", plugins::GUEST_FOO, "--namespaces", "a,Not_A_Namespace"]);
    assert!(!ok && err.contains("\"Not_A_Namespace\" is not a namespace name"), "{err}");
    let (ok, out, err) = kwop(&["plugin", "rbac", plugins::GUEST_FOO]);
    assert!(ok && err.contains("assumed to be \"foos\"") && err.contains("--crd"), "a guessed resource is said: {err}");
    assert!(out.contains("foos"), "{out}");
    // Defaults: one leader and a standby, no sharding RBAC; one replica: no PodDisruptionBudget.
    let out = docs(&helm(None, &["template", "kwop", &chart, "-n", "kwop-system", "--set", "replicas=1"])?)?;
    assert!(
        find(&out, "PodDisruptionBudget", "kwop").is_none()
            && find(&out, "ClusterRole", "kwop-shard-namespaces").is_none()
    );
    // cert-manager: a Certificate for the Secret the host only reads.
    let out =
        docs(&helm(None, &["template", "kwop", &chart, "-n", "kwop-system", "--set", "webhook.certs=cert-manager"])?)?;
    let cert = find(&out, "Certificate", "kwop-webhook").ok_or_else(|| anyhow::anyhow!("no Certificate"))?;
    assert_eq!(cert["spec"]["secretName"], "kwop-webhook-tls");
    assert_eq!(cert["spec"]["dnsNames"][0], "kwop-webhook.kwop-system.svc");
    let d = find(&out, "Deployment", "kwop").map(|d| d.to_string()).unwrap_or_default();
    assert!(d.contains("--webhook-certs=external"), "{d}");
    let role = rules(find(&out, "Role", "kwop"))?;
    assert!(!role.iter().any(|r| r.verbs.iter().any(|v| v == "create" || v == "update")
        && r.resources.iter().flatten().any(|s| s == "secrets")));
    // Bad values: refused with the value named (values.schema.json).
    for (set, says) in [
        ("webhook.certs=letsencrypt", "/webhook/certs"),
        ("sharding.by=zone", "/sharding/by"),
        ("replicas=0", "/replicas"),
        ("plugins[0].name=Not_A_Name", "/plugins/0/name"),
    ] {
        let bad = helm(None, &["template", "kwop", &chart, "--set", set]).expect_err(set);
        assert!(bad.to_string().contains(says), "{set}: {bad}");
    }
    // `helm package` carries the CRD (a copy, not a link).
    let packaged = helm(None, &["package", &chart, "-d", &dir.display().to_string()])?;
    let tgz = packaged.trim().rsplit(' ').next().unwrap_or_default().to_string();
    let crds = helm(None, &["show", "crds", &tgz])?;
    assert!(crds.contains("name: reconcilerplugins.kwop.dev"), "{packaged}: {crds}");
    // namespace.create: the namespace under the restricted Pod Security Standard.
    let out = docs(&helm(None, &["template", "kwop", &chart, "-n", "ops", "--set", "namespace.create=true"])?)?;
    let ns = find(&out, "Namespace", "ops").ok_or_else(|| anyhow::anyhow!("no Namespace"))?;
    assert_eq!(ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn can_i(plane: &ControlPlane, verb: &str, res: &str, ns: Option<&str>) -> bool {
    let scope = ns.map(|n| format!("--namespace={n}")).unwrap_or_else(|| "--all-namespaces".into());
    plane.kubectl_output(&["auth", "can-i", verb, res, SA, &scope]).map(|o| o.trim() == "yes").unwrap_or(false)
}

/// The installed Deployment's `kwop run` arguments, for a host run here: bind addresses, cache and
/// log format are the harness's; the webhook listens on any free loopback port.
fn chart_args(plane: &ControlPlane, registry: &str) -> anyhow::Result<Vec<String>> {
    let d = plane.kubectl_output(&["get", "-n", "kwop-system", "deployment/kwop", "-o", "json"])?;
    let d: Value = serde_json::from_str(&d)?;
    let args: Vec<String> = serde_json::from_value(d["spec"]["template"]["spec"]["containers"][0]["args"].clone())?;
    let harness = [
        "run",
        "--reconciler-plugins",
        "--metrics-bind-address",
        "--health-probe-bind-address",
        "--cache-dir",
        "--log-format",
    ];
    let mut out: Vec<String> =
        args.into_iter().filter(|a| !harness.contains(&a.split('=').next().unwrap_or(a))).collect();
    // Each replica its own port (the API server calls the Service, which has no endpoints here).
    for a in out.iter_mut().filter(|a| a.starts_with("--webhook-bind-address=")) {
        *a = "--webhook-bind-address=127.0.0.1:0".into();
    }
    out.push(format!("--insecure-registry={registry}"));
    Ok(out)
}

#[tokio::test(flavor = "multi_thread")]
async fn helm_install_upgrade_to_three_shards_and_uninstall() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let chart = chart().display().to_string();
    let dir = scratch("install")?;
    let reg = kwop_tests::registry::Registry::start()?;
    let hp = reg.host_port();
    let reference = format!("{hp}/plugins/guest-foo:0.1.0");
    rp::push(&hp, Path::new(plugins::GUEST_FOO), &reference)?;
    // The hosts run here, not behind the webhook Service: the API server cannot call them (guest-foo
    // mutates), so admission fails open.
    let values = json!({
        "replicas": 1,
        "webhook": { "failurePolicy": "Ignore" },
        "plugins": [{
            "name": "guest-foo",
            "spec": guest_foo_spec(json!({ "oci": reference }), None),
            "rbac": { "validates": true },
        }],
    });
    let values = write(&dir, "values.yaml", &values)?;
    // The harness installed the ReconcilerPlugin CRD; the chart's crds/ installs it here.
    plane.kubectl_output(&["delete", "crd", "reconcilerplugins.kwop.dev", "--wait"])?;
    let ns_flags = ["-n", "kwop-system"];
    helm(Some(plane), &[&["install", "kwop", &chart, "--create-namespace", "-f", &values][..], &ns_flags].concat())?;
    plane.kubectl_output(&[
        "wait",
        "--for=condition=established",
        "--timeout=60s",
        "crd/reconcilerplugins.kwop.dev",
    ])?;

    // The plugin's RBAC as installed is what `kwop plugin rbac --reconciler-plugin` prints from
    // the cluster (kinds resolved by discovery).
    let printed =
        kwop_rbac(&["--reconciler-plugin", "guest-foo", "--validates"], &[("KUBECONFIG", plane.kubeconfig.as_path())])?;
    let installed = plane.kubectl_output(&["get", "clusterrole", "kwop-plugin-guest-foo", "-o", "json"])?;
    let installed: Value = serde_json::from_str(&installed)?;
    assert_eq!(rules(Some(&installed))?, rules(find(&printed, "ClusterRole", "kwop-plugin-guest-foo"))?);

    // Minimal: what it may not do.
    let ns = plane.namespace("helm")?;
    for (verb, res, scope) in [
        ("get", "secrets", Some(ns.as_str())),
        ("list", "secrets", None),
        ("list", "secrets", Some("kwop-system")),
        ("create", "secrets", Some(ns.as_str())),
        ("update", "secrets/someone-elses", Some("kwop-system")),
        ("delete", "validatingwebhookconfigurations.admissionregistration.k8s.io/kwop", None),
        ("patch", "validatingwebhookconfigurations.admissionregistration.k8s.io/someone-elses", None),
        ("update", "foos.samplecontroller.k8s.io", Some(ns.as_str())),
        ("create", "pods", Some(ns.as_str())),
        ("delete", "namespaces", None),
        ("list", "namespaces", None),
        ("delete", "leases.coordination.k8s.io", Some("kwop-system")),
        ("create", "leases.coordination.k8s.io", Some("default")),
        ("get", "customresourcedefinitions.apiextensions.k8s.io/reconcilerplugins.kwop.dev", None),
        ("list", "customresourcedefinitions.apiextensions.k8s.io", None),
        ("*", "*", None),
    ] {
        assert!(!can_i(plane, verb, res, scope), "must NOT be able to {verb} {res} in {scope:?}");
    }
    // guest-foo validates: its own CRD, by name (scale requests).
    assert!(can_i(plane, "get", "customresourcedefinitions.apiextensions.k8s.io/foos.samplecontroller.k8s.io", None));

    // Sufficient: a host with nothing but the service account's token and the Deployment's own
    // arguments runs guest-foo from values, reconciles a Foo, makes the webhook's Secret.
    let token = plane.kubectl_output(&["create", "token", "kwop", "-n", "kwop-system", "--duration=1h"])?;
    let kc = plane.kubeconfig_with_token(token.trim(), "helm-sa.kubeconfig")?;
    let mut ring = Ring::reconciler_plugins(plane, KWOP, &kc, chart_args(plane, &hp)?);
    ring.add("kwop-0")?;
    create_foo(&client, &ns, "one", "one", Some(2)).await?;
    deployment_where(&client, &ns, "one", "written with the chart's SA", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(2)
    })
    .await?;
    foo_status_where(&client, &ns, "one", "status written", |s| s["availableReplicas"] == 0).await?;
    rp::status_where(&client, "guest-foo", "Ready from values", Duration::from_secs(60), rp::ready).await?;
    for what in ["secret/kwop-webhook-tls", "mutatingwebhookconfiguration/kwop"] {
        kwop_tests::wait::until(what, Duration::from_secs(30), || async {
            Ok(plane.kubectl_output(&["get", "-n", "kwop-system", what, "-o", "name"]).ok())
        })
        .await?;
    }
    ring.stop("kwop-0", Duration::from_secs(10));

    // Upgrade: three replicas sharded, three hosts with the new arguments.
    helm(
        Some(plane),
        &[
            &["upgrade", "kwop", &chart, "-f", &values, "--set", "replicas=3", "--set", "sharding.enabled=true"][..],
            &ns_flags,
        ]
        .concat(),
    )?;
    assert!(
        can_i(plane, "list", "namespaces", None)
            && can_i(plane, "delete", "leases.coordination.k8s.io", Some("kwop-system"))
    );
    assert!(plane.kubectl_output(&["get", "pdb", "-n", "kwop-system", "kwop", "-o", "name"]).is_ok());
    let args = chart_args(plane, &hp)?;
    assert!(args.iter().any(|a| a == "--sharding=namespace"), "{args:?}");
    let mut ring = Ring::reconciler_plugins(plane, KWOP, &kc, args);
    for r in ["kwop-a", "kwop-b", "kwop-c"] {
        ring.add(r)?;
    }
    let spread = shards::namespaces(plane, &format!("{ns}-s"), 9)?;
    ring.settled(Duration::from_secs(60)).await?;
    let foos = shards::create_foos(&client, &spread, 2).await?;
    shards::converged(&client, &foos, Duration::from_secs(90)).await?;
    for r in ["kwop-a", "kwop-b", "kwop-c"] {
        assert!(ring.metric(r, "kwop_reconcile_total", &[]) > 0.0, "replica {r} reconciled nothing");
    }
    for r in ["kwop-a", "kwop-b", "kwop-c"] {
        ring.stop(r, Duration::from_secs(10));
    }

    // Uninstall: what stays is what docs/install-with-helm.md says stays.
    helm(Some(plane), &[&["uninstall", "kwop"][..], &ns_flags].concat())?;
    let left = |what: &str, ns: Option<&str>| -> anyhow::Result<Vec<String>> {
        let mut a = vec!["get", what, "-o", "name"];
        if let Some(n) = ns {
            a.extend(["-n", n]);
        }
        Ok(plane.kubectl_output(&a)?.lines().map(str::to_string).collect())
    };
    let kept = left(
        "secrets,configmaps,serviceaccounts,services,deployments,roles,rolebindings,poddisruptionbudgets,leases",
        Some("kwop-system"),
    )?;
    for o in &kept {
        let documented = o == "secret/kwop-webhook-tls"
            || o.starts_with("lease.coordination.k8s.io/kwop")
            || o == "configmap/kube-root-ca.crt"
            || o == "serviceaccount/default";
        assert!(documented, "left behind in kwop-system: {o} (all: {kept:?})");
    }
    eprintln!("after helm uninstall, in kwop-system: {kept:?}");
    let cluster = left("clusterroles,clusterrolebindings,reconcilerplugins,validatingwebhookconfigurations,mutatingwebhookconfigurations", None)?;
    for o in &cluster {
        assert!(
            !o.contains("/kwop") || o.ends_with("webhookconfiguration.admissionregistration.k8s.io/kwop"),
            "left behind: {o}"
        );
    }
    let ours: Vec<&String> = cluster.iter().filter(|o| o.contains("kwop")).collect();
    eprintln!("after helm uninstall, cluster-wide: {ours:?}");
    assert!(left("crd", None)?.iter().any(|c| c.ends_with("/reconcilerplugins.kwop.dev")), "the CRD stays");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
