//! In-cluster install (issue 7): `kubectl apply -k deploy/`, the host running with its service
//! account's token only, least privilege, leader election, probes and metrics.

mod common;

use common::*;
use kwop_tests::{host::http_get, plugins, wait, ControlPlane, Host, Mode};
use std::time::Duration;

fn can_i(plane: &ControlPlane, verb: &str, resource: &str, ns: Option<&str>) -> bool {
    let mut args = vec!["auth", "can-i", verb, resource, "--as=system:serviceaccount:kwop-system:kwop"];
    let ns_arg;
    if let Some(ns) = ns {
        ns_arg = format!("--namespace={ns}");
        args.push(&ns_arg);
    } else {
        args.push("--all-namespaces");
    }
    // `kubectl auth can-i` exits 1 for "no".
    plane.kubectl_output(&args).map(|o| o.trim() == "yes").unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread")]
async fn deploy_applies_and_its_service_account_is_enough_and_no_more() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    install(plane)?;
    let objects = plane.kubectl_output(&[
        "get",
        "-n",
        "kwop-system",
        "deployment,serviceaccount,configmap,role,service",
        "-o",
        "name",
    ])?;
    for want in [
        "deployment.apps/kwop",
        "serviceaccount/kwop",
        "configmap/kwop-plugins",
        "role.rbac.authorization.k8s.io/kwop-leader-election",
    ] {
        assert!(objects.contains(want), "{want} in {objects}");
    }
    let d = plane.kubectl_output(&["get", "-n", "kwop-system", "deployment/kwop", "-o", "json"])?;
    let d: serde_json::Value = serde_json::from_str(&d)?;
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
    assert_eq!(d["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"], true);
    assert_eq!(d["spec"]["template"]["spec"]["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    assert!(c["args"].as_array().is_some_and(|a| a.iter().any(|x| x == "--leader-elect")));

    // What it may do, and what it may not.
    let ns = plane.namespace("deploy-rbac")?;
    for (verb, res) in
        [("watch", "foos.samplecontroller.k8s.io"), ("patch", "deployments.apps"), ("create", "events.events.k8s.io")]
    {
        assert!(can_i(plane, verb, res, Some(&ns)), "must be able to {verb} {res}");
    }
    let status = plane.kubectl_output(&[
        "auth",
        "can-i",
        "patch",
        "foos.samplecontroller.k8s.io",
        "--subresource=status",
        "--as=system:serviceaccount:kwop-system:kwop",
        &format!("--namespace={ns}"),
    ])?;
    assert_eq!(status.trim(), "yes", "must be able to patch foos/status");
    for (verb, res, scope) in [
        ("get", "secrets", Some(ns.as_str())),
        ("list", "secrets", None),
        ("delete", "namespaces", None),
        ("delete", "deployments.apps", Some(ns.as_str())),
        ("update", "foos.samplecontroller.k8s.io", Some(ns.as_str())),
        ("create", "pods", Some(ns.as_str())),
        ("create", "leases.coordination.k8s.io", Some("default")),
        ("*", "*", None),
    ] {
        assert!(!can_i(plane, verb, res, scope), "must NOT be able to {verb} {res} in {scope:?}");
    }
    assert!(can_i(plane, "update", "leases.coordination.k8s.io", Some("kwop-system")));
    // Admission: its Service, its one Secret and its one webhook configuration, nothing else.
    assert!(objects.contains("service/kwop-webhook"), "{objects}");
    assert!(c["args"].as_array().is_some_and(|a| a.iter().any(|x| x == "--webhook-bind-address=:9443")));
    for (verb, res, scope) in [
        ("create", "validatingwebhookconfigurations.admissionregistration.k8s.io", None),
        ("patch", "validatingwebhookconfigurations.admissionregistration.k8s.io/kwop", None),
        ("patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io/kwop", None),
        ("update", "secrets/kwop-webhook-tls", Some("kwop-system")),
        ("create", "secrets", Some("kwop-system")),
        // Scale requests and conversion: the Foo CRD, by name.
        ("get", "customresourcedefinitions.apiextensions.k8s.io/foos.samplecontroller.k8s.io", None),
        ("patch", "customresourcedefinitions.apiextensions.k8s.io/foos.samplecontroller.k8s.io", None),
    ] {
        assert!(can_i(plane, verb, res, scope), "must be able to {verb} {res} in {scope:?}");
    }
    for (verb, res, scope) in [
        ("patch", "validatingwebhookconfigurations.admissionregistration.k8s.io/someone-elses", None),
        ("delete", "validatingwebhookconfigurations.admissionregistration.k8s.io/kwop", None),
        ("patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io/someone-elses", None),
        ("update", "secrets/someone-elses", Some("kwop-system")),
        ("create", "secrets", Some(ns.as_str())),
        ("get", "customresourcedefinitions.apiextensions.k8s.io/reconcilerplugins.kwop.dev", None),
        ("list", "customresourcedefinitions.apiextensions.k8s.io", None),
        ("patch", "customresourcedefinitions.apiextensions.k8s.io/reconcilerplugins.kwop.dev", None),
        ("update", "customresourcedefinitions.apiextensions.k8s.io/foos.samplecontroller.k8s.io", None),
    ] {
        assert!(!can_i(plane, verb, res, scope), "must NOT be able to {verb} {res} in {scope:?}");
    }

    // The host with nothing but the service account's token runs the install's example
    // ReconcilerPlugin (guest-foo from the kwop-plugins ConfigMap), the JavaScript and Python Foo
    // plugins from a registry (each for its own group, with the RBAC an admin adds for it), and
    // reports a grant its RBAC lacks as Forbidden.
    assert!(can_i(plane, "watch", "reconcilerplugins.kwop.dev", None));
    assert!(
        can_i(plane, "get", "configmaps", Some("kwop-system")) && can_i(plane, "get", "secrets", Some("kwop-system"))
    );
    assert!(!can_i(plane, "list", "secrets", Some("kwop-system")), "pull Secrets are read one by one");
    let client = plane.client().await?;
    let reg = kwop_tests::registry::Registry::start()?;
    let hp = reg.host_port();
    let langs = [("js", "js.deploy.kwop.dev"), ("python", "py.deploy.kwop.dev")];
    let groups: Vec<String> = langs.iter().map(|(_, g)| g.to_string()).collect();
    kwop_tests::bench::variants::install_crds(plane, &groups)?;
    let mut rbac = String::from(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: kwop-test-groups}\nrules:\n",
    );
    for g in &groups {
        rbac += &format!("- {{apiGroups: [\"{g}\"], resources: [foos], verbs: [get, list, watch]}}\n- {{apiGroups: [\"{g}\"], resources: [foos/status], verbs: [get, patch]}}\n");
    }
    rbac += "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: kwop-test-groups}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kwop-test-groups}\nsubjects: [{kind: ServiceAccount, name: kwop, namespace: kwop-system}]\n";
    plane.kubectl_stdin(&["apply", "--server-side", "-f", "-"], &rbac)?;
    for (lang, group) in langs {
        let wasm =
            tokio::task::spawn_blocking(move || kwop_tests::foo_groups::guest_foo_for_group(lang, group)).await??;
        let reference = format!("{hp}/plugins/foo-{lang}:0.1.0");
        rp::push(&hp, &wasm, &reference)?;
        let spec = serde_json::json!({
            "source": { "oci": reference },
            "grants": rp::foo_grants(&format!("{group}/v1alpha1")),
            "limits": { "memory": "128Mi", "timeout": "5s" },
        });
        rp::apply_rp(&client, &format!("deploy-foo-{lang}"), "deploy", spec).await?;
    }
    // Chaos objects: granted by this ReconcilerPlugin, but not by the host's RBAC.
    let spec = serde_json::json!({
        "source": { "oci": format!("{hp}/plugins/chaos:1") },
        "grants": {
            "primary": { "apiVersion": "test.kwop.dev/v1", "kind": "Chaos" },
            "owns": [{ "apiVersion": "v1", "kind": "ConfigMap" }],
        },
    });
    rp::push(&hp, std::path::Path::new(plugins::CHAOS), &format!("{hp}/plugins/chaos:1"))?;
    rp::apply_rp(&client, "deploy-chaos", "deploy", spec).await?;

    let token = plane.kubectl_output(&["create", "token", "kwop", "-n", "kwop-system", "--duration=1h"])?;
    let kc = plane.kubeconfig_with_token(token.trim(), "kwop-sa.kubeconfig")?;
    let host = Host::start_reconciler_plugins(
        KWOP,
        plane,
        &kc,
        // Scoped to this test's namespace: other tests in this binary share the cluster and
        // count their own host's writes.
        &[
            "--leader-elect",
            "--leader-election-namespace=kwop-system",
            "--leader-election-id=kwop-sa-test",
            &format!("--namespace={ns}"),
            &format!("--insecure-registry={hp}"),
        ],
        &[],
        false,
    )?;
    create_foo(&client, &ns, "with-sa", "with-sa", Some(2)).await?;
    deployment_where(&client, &ns, "with-sa", "Deployment written with the SA token", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(2)
    })
    .await?;
    foo_status_where(&client, &ns, "with-sa", "status written with the SA token", |s| s["availableReplicas"] == 0)
        .await?;
    event_with_reason(&client, &ns, "with-sa", "Synced").await?;
    rp::status_where(&client, "guest-foo", "the example is Ready", Duration::from_secs(60), rp::ready).await?;
    for (lang, group) in langs {
        let foo: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": format!("{group}/v1alpha1"), "kind": "Foo",
            "metadata": { "name": format!("foo-{lang}") }, "spec": { "deploymentName": format!("dep-{lang}"), "replicas": 1 }
        }))?;
        let res = kube::core::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(group, "v1alpha1", "Foo"));
        kube::Api::<kube::api::DynamicObject>::namespaced_with(client.clone(), &ns, &res)
            .create(&Default::default(), &foo)
            .await?;
        deployment_where(&client, &ns, &format!("dep-{lang}"), "written by the plugin from the registry", |_| true)
            .await?;
        rp::status_where(&client, &format!("deploy-foo-{lang}"), "Ready", Duration::from_secs(90), rp::ready).await?;
    }
    let s = rp::status_where(&client, "deploy-chaos", "Forbidden by RBAC", Duration::from_secs(60), |s| {
        rp::degraded(s) == Some("Forbidden")
    })
    .await?;
    let msg = s.last_error.unwrap_or_default();
    assert!(msg.contains("may not list chaos"), "names the missing permission: {msg}");
    assert_eq!(http_get(host.port, "/healthz")?.0, 200, "a forbidden grant does not take the host down");
    assert_eq!(host.metric("kwop_write_errors_total", &[])?, 0.0, "no write was refused");
    Ok(())
}

fn leader_of(hosts: &[&Host]) -> Vec<usize> {
    hosts
        .iter()
        .enumerate()
        .filter(|(_, h)| h.metric("kwop_leader", &[]).unwrap_or(0.0) == 1.0)
        .map(|(i, _)| i)
        .collect()
}

async fn wait_single_leader(hosts: &[&Host], within: Duration) -> anyhow::Result<usize> {
    wait::until("exactly one leader", within, || async {
        let l = leader_of(hosts);
        Ok((l.len() == 1).then(|| l[0])).map_err(|_: ()| format!("leaders: {l:?}"))
    })
    .await
}

fn lease_holder(plane: &ControlPlane, name: &str) -> String {
    plane
        .kubectl_output(&["get", "lease", name, "-n", "kwop-system", "-o", "jsonpath={.spec.holderIdentity}"])
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_leader_writes_and_the_standby_takes_over() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    plane.kubectl_stdin(
        &["apply", "--server-side", "-f", "-"],
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: kwop-system}\n",
    )?;
    let ns = plane.namespace("leader")?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    let lease = "kwop-leader-test";
    let args = [
        "--leader-elect",
        "--leader-election-namespace=kwop-system",
        "--leader-election-id=kwop-leader-test",
        "--leader-lease-duration=4s",
    ];
    let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    args.push(format!("--namespace={ns}"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut a = host(plane, &dir, &args)?;
    let mut b = host(plane, &dir, &args)?;
    let client = plane.client().await?;

    let first = wait_single_leader(&[&a, &b], Duration::from_secs(20)).await?;
    for i in 0..5 {
        create_foo(&client, &ns, &format!("f{i}"), &format!("d{i}"), Some(1)).await?;
    }
    for i in 0..5 {
        deployment_where(&client, &ns, &format!("d{i}"), "reconciled by the leader", |_| true).await?;
    }
    let (leader, standby) = if first == 0 { (&mut a, &mut b) } else { (&mut b, &mut a) };
    assert!(leader.metric("kwop_writes_total", &[])? > 0.0);
    assert_eq!(standby.metric("kwop_writes_total", &[])?, 0.0, "the standby wrote");
    assert_eq!(standby.metric("kwop_reconcile_total", &[])?, 0.0, "the standby reconciled");
    assert_eq!(http_get(standby.port, "/readyz")?.0, 200, "a standby is ready (it can take over)");

    // SIGKILL the leader: the standby takes over once the lease expires.
    let killed_at = std::time::Instant::now();
    leader.proc.kill();
    wait::until("the standby to lead", Duration::from_secs(20), || async {
        Ok((standby.metric("kwop_leader", &[]).unwrap_or(0.0) == 1.0).then_some(()))
    })
    .await?;
    let takeover = killed_at.elapsed();
    assert!(takeover < Duration::from_secs(12), "takeover took {takeover:?} with a 4 s lease");
    create_foo(&client, &ns, "after-failover", "after-failover", Some(1)).await?;
    deployment_where(&client, &ns, "after-failover", "reconciled by the new leader", |_| true).await?;

    // SIGTERM: the lease is released at once (no waiting for expiry).
    let holder = lease_holder(plane, lease);
    assert!(!holder.is_empty());
    standby.proc.stop(Duration::from_secs(10));
    let released = lease_holder(plane, lease);
    assert!(released.is_empty() || released != holder, "lease still held by {holder} after a graceful stop");
    assert!(std::fs::read_to_string(&standby.log)?.contains("leader lease released"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_and_probes_answer_as_documented() -> anyhow::Result<()> {
    let Env { ns, host, client, .. } = guest_foo_env("metrics", Mode::Api).await?;
    create_foo(&client, &ns, "m", "m", Some(1)).await?;
    foo_status_where(&client, &ns, "m", "status", |s| s["availableReplicas"] == 0).await?;

    assert_eq!(http_get(host.port, "/healthz")?, (200, "ok".to_string()));
    let (code, body) = http_get(host.port, "/readyz")?;
    assert_eq!(code, 200);
    let r: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(r["ready"], true);
    assert_eq!(r["role"], "leader");
    assert_eq!(r["plugins"][0]["name"], "guest-foo");
    assert_eq!(r["plugins"][0]["synced"], true);
    assert_eq!(r["plugins"][0]["sha256"].as_str().map(str::len), Some(64));

    let m = host.metrics()?;
    for family in [
        "kwop_reconcile_total{plugin=\"guest-foo\",result=\"success\"}",
        "kwop_reconcile_duration_seconds_bucket{",
        "kwop_plugin_call_duration_seconds_count{plugin=\"guest-foo\"}",
        "kwop_queue_depth{plugin=\"guest-foo\"}",
        "kwop_plugin_info{plugin=\"guest-foo\",version=\"0.1.0\",sha256=\"",
        "kwop_writes_total{plugin=\"guest-foo\",kind=\"Deployment\",op=\"apply\"}",
        "kwop_writes_total{plugin=\"guest-foo\",kind=\"Foo\",op=\"status\"}",
        "kwop_leader 1",
    ] {
        assert!(m.contains(family), "missing {family} in:\n{m}");
    }
    // A second reconcile of the same object (triggered by our own status write) is skipped.
    assert!(host.metric("kwop_writes_skipped_total", &[("plugin", "guest-foo")])? >= 1.0);
    Ok(())
}
