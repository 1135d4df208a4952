//! Admission of `/scale` on a real control plane: `kubectl scale` (and kube-rs `patch_scale`,
//! what it sends) reaches the plugin as the whole Foo as it would be, so the quorum plugin
//! (tests/plugins/quorum) refuses an even replica count with its own message and lets an odd one
//! be stored; a status write never reaches it; a plugin that traps on a scale, and a host that
//! cannot read the CRD to compose the Foo (its RBAC lacks it), are refused under Fail and allowed
//! with a warning under Ignore.

mod common;

use common::webhook::*;
use common::*;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kwop_tests::{plugins, ControlPlane, Mode};
use serde_json::json;
use std::process::Command;

/// A Foo with `replicas`.
fn foo_with(name: &str, replicas: i64) -> String {
    format!("apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata:\n  name: {name}\nspec:\n  deploymentName: {name}\n  replicas: {replicas}\n")
}

/// `kubectl scale foo/NAME --replicas=N`: (succeeded, stdout and stderr).
fn kubectl_scale(plane: &ControlPlane, ns: &str, name: &str, replicas: i64) -> anyhow::Result<(bool, String)> {
    let out = Command::new(plane.bin.join("kubectl"))
        .arg(format!("--kubeconfig={}", plane.kubeconfig.display()))
        // The version named: kubectl prefers v1beta1, which converts only where guest-foo is
        // granted the conversion (tests/tests/conversion.rs scales through it).
        .args([
            "scale",
            "-n",
            ns,
            &format!("foos.v1alpha1.samplecontroller.k8s.io/{name}"),
            &format!("--replicas={replicas}"),
        ])
        .output()?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success(), text))
}

async fn stored_replicas(api: &Api<DynamicObject>, name: &str) -> anyhow::Result<Option<i64>> {
    Ok(api.get(name).await?.data["spec"]["replicas"].as_i64())
}

fn admission_requests(a: &Admitting) -> anyhow::Result<f64> {
    a.host.metric("kwop_admission_requests_total", &[("plugin", "quorum")])
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_scale_to_an_even_count_is_refused_an_odd_one_stored_and_status_writes_are_not_asked(
) -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("scale")?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("quorum.wasm", plugins::QUORUM)])?;
    let a = admitting(plane, &dir, &ns, &[])?;
    let c = configured(&client, &a.configuration, "quorum").await?;
    let hook = c.webhooks.iter().flatten().next().cloned().unwrap_or_default();
    let resources: Vec<String> =
        hook.rules.iter().flatten().flat_map(|r| r.resources.clone().unwrap_or_default()).collect();
    assert!(resources.contains(&"foos/scale".to_string()), "{resources:?}");

    apply_answered(plane, &ns, &foo_with("q", 3)).await.map_err(anyhow::Error::msg)?;
    let api = foos(&client, &ns);
    // kube-rs, as kubectl scale does: a merge patch of the Scale.
    let four =
        api.patch_scale("q", &PatchParams::default(), &Patch::Merge(&json!({ "spec": { "replicas": 4 } }))).await;
    let e = four.expect_err("4 is even").to_string();
    assert!(e.contains("admission webhook \"quorum.kwop.dev\" denied the request"), "{e}");
    // The plugin saw the Foo as it would be (4) and as it is stored (3).
    assert!(e.contains("spec.replicas: a quorum needs an odd number of replicas (4 asked, 3 now)"), "{e}");
    // kubectl scale itself.
    let (ok, out) = kubectl_scale(plane, &ns, "q", 6)?;
    assert!(!ok && out.contains("a quorum needs an odd number of replicas (6 asked, 3 now)"), "{out}");
    assert_eq!(stored_replicas(&api, "q").await?, Some(3), "nothing refused was stored");

    let five =
        api.patch_scale("q", &PatchParams::default(), &Patch::Merge(&json!({ "spec": { "replicas": 5 } }))).await?;
    assert_eq!(five.spec.and_then(|s| s.replicas), Some(5));
    assert_eq!(stored_replicas(&api, "q").await?, Some(5));
    let (ok, out) = kubectl_scale(plane, &ns, "q", 7)?;
    assert!(ok && out.contains("scaled"), "{out}");
    assert_eq!(stored_replicas(&api, "q").await?, Some(7));
    assert!(a.host.metric("kwop_admission_requests_total", &[("plugin", "quorum"), ("result", "denied")])? >= 2.0);

    // A status write is the host's business: not sent (quorum would refuse an even status).
    let before = admission_requests(&a)?;
    let status = json!({ "status": { "availableReplicas": 2 } });
    api.patch_status("q", &PatchParams::default(), &Patch::Merge(&status)).await?;
    assert_eq!(api.get("q").await?.data["status"]["availableReplicas"], 2);
    assert_eq!(admission_requests(&a)?, before, "a status write reached the webhook:\n{}", a.host.log());
    remove_configuration(&client, &a.configuration).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_that_traps_on_a_scale_is_refused_under_fail_and_allowed_with_a_warning_under_ignore(
) -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("quorum.wasm", plugins::QUORUM)])?;
    for (policy, allowed) in [("Fail", false), ("Ignore", true)] {
        let ns = plane.namespace(&format!("scale-{}", policy.to_lowercase()))?;
        let a = admitting(plane, &dir, &ns, &[&format!("--webhook-failure-policy={policy}")])?;
        configured(&client, &a.configuration, "quorum").await?;
        apply_answered(plane, &ns, &foo_with("t", 3)).await.map_err(anyhow::Error::msg)?;
        // quorum panics on 9.
        let (ok, out) = kubectl_scale(plane, &ns, "t", 9)?;
        assert_eq!(ok, allowed, "{policy}: {out}");
        assert!(
            out.contains("quorum could not validate the object: plugin trapped"),
            "{policy}: {out}\n{}",
            a.host.log()
        );
        assert!(out.contains("quorum cannot count to nine"), "the plugin's own words: {out}");
        if allowed {
            assert!(out.contains("Warning:") && out.contains("failure policy Ignore"), "{out}\n{}", a.host.log());
        }
        let want = if allowed { 9 } else { 3 };
        assert_eq!(stored_replicas(&foos(&client, &ns), "t").await?, Some(want), "{policy}");
        let label = if allowed { "error_ignored" } else { "error" };
        assert!(a.host.metric("kwop_admission_requests_total", &[("result", label)])? >= 1.0, "{}", a.host.log());
        remove_configuration(&client, &a.configuration).await;
    }
    Ok(())
}

/// RBAC for a host that may do everything the admission tests need but read CRDs: its Secret in
/// `ns` and, cluster-wide, Foos, events and its webhook configuration.
fn without_crd_reads(plane: &ControlPlane, ns: &str) -> anyhow::Result<std::path::PathBuf> {
    let sa = "no-crd-reads";
    let rbac = format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {sa}, namespace: {ns}}}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: {sa}, namespace: {ns}}}\nrules:\n\
         - {{apiGroups: [\"\"], resources: [secrets], verbs: [create, get, update, patch]}}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {sa}, namespace: {ns}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {sa}}}\n\
         subjects: [{{kind: ServiceAccount, name: {sa}, namespace: {ns}}}]\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {ns}-{sa}}}\nrules:\n\
         - {{apiGroups: [samplecontroller.k8s.io], resources: [foos], verbs: [get, list, watch]}}\n\
         - {{apiGroups: [samplecontroller.k8s.io], resources: [foos/status], verbs: [get, patch]}}\n\
         - {{apiGroups: [events.k8s.io], resources: [events], verbs: [create, patch]}}\n\
         - {{apiGroups: [admissionregistration.k8s.io], resources: [validatingwebhookconfigurations], verbs: [create, get, patch]}}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {ns}-{sa}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {ns}-{sa}}}\n\
         subjects: [{{kind: ServiceAccount, name: {sa}, namespace: {ns}}}]\n"
    );
    plane.kubectl_stdin(&["apply", "--server-side", "-f", "-"], &rbac)?;
    let token = plane.kubectl_output(&["create", "token", sa, "-n", ns, "--duration=1h"])?;
    plane.kubeconfig_with_token(token.trim(), &format!("{ns}-{sa}.kubeconfig"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_that_cannot_read_the_crd_refuses_a_scale_under_fail_and_allows_it_with_a_warning_under_ignore(
) -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let dir = plugins::folder(&[("quorum.wasm", plugins::QUORUM)])?;
    for (policy, allowed) in [("Fail", false), ("Ignore", true)] {
        let ns = plane.namespace(&format!("scale-rbac-{}", policy.to_lowercase()))?;
        let kubeconfig = without_crd_reads(plane, &ns)?;
        let a = admitting_as(plane, &kubeconfig, &dir, &ns, &[&format!("--webhook-failure-policy={policy}")])?;
        if let Err(e) = configured(&client, &a.configuration, "quorum").await {
            anyhow::bail!("{e}\n{}", a.host.log());
        }
        apply_answered(plane, &ns, &foo_with("r", 3)).await.map_err(anyhow::Error::msg)?;
        // 5 is odd: only the host's failure to compose the Foo stands in the way.
        let (ok, out) = kubectl_scale(plane, &ns, "r", 5)?;
        assert_eq!(ok, allowed, "{policy}: {out}\n{}", a.host.log());
        let why = format!("quorum could not validate the scale of {ns}/r: cannot read the CustomResourceDefinition foos.samplecontroller.k8s.io");
        assert!(out.contains(&why) && out.contains("forbidden"), "{policy}: {out}");
        if allowed {
            assert!(out.contains("Warning:") && out.contains("failure policy Ignore"), "{out}");
        }
        assert_eq!(stored_replicas(&foos(&client, &ns), "r").await?, Some(if allowed { 5 } else { 3 }), "{policy}");
        remove_configuration(&client, &a.configuration).await;
        let _ = plane.kubectl_output(&["delete", "clusterrole,clusterrolebinding", &format!("{ns}-no-crd-reads")]);
    }
    Ok(())
}
