//! kwop + guest-foo on a real control plane: the walking skeleton (issue 3).

mod common;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, PostParams};
use kwop_tests::{plugins, ControlPlane, Mode};
use serde_json::json;
use std::time::Duration;

fn owner_is(d: &Deployment, foo_uid: &str) -> bool {
    d.metadata.owner_references.iter().flatten().any(|r| {
        r.controller == Some(true) && r.uid == foo_uid && r.kind == "Foo" && r.block_owner_deletion == Some(true)
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_foo_gets_its_deployment_scales_reports_status_and_is_garbage_collected() -> anyhow::Result<()> {
    let Env { ns, host, client, .. } = guest_foo_env("foo-lifecycle", Mode::Full).await?;

    let foo = create_foo(&client, &ns, "example-foo", "example-foo", Some(1)).await?;
    let uid = foo.metadata.uid.clone().unwrap_or_default();
    let d = deployment_where(&client, &ns, "example-foo", "the Deployment", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(1)
    })
    .await?;
    assert!(owner_is(&d, &uid), "controller owner reference to the Foo: {:?}", d.metadata.owner_references);
    let spec = d.spec.clone().unwrap_or_default();
    let labels = json!({"app": "nginx", "controller": "example-foo"});
    assert_eq!(serde_json::to_value(&spec.selector.match_labels)?, labels);
    let tmpl = spec.template;
    assert_eq!(serde_json::to_value(&tmpl.metadata.unwrap_or_default().labels)?, labels);
    let c = &tmpl.spec.unwrap_or_default().containers;
    assert_eq!((c.len(), c[0].name.as_str(), c[0].image.as_deref()), (1, "nginx", Some("nginx:latest")));

    // Status follows the real available replicas (kwok makes the Pods ready).
    foo_status_where(&client, &ns, "example-foo", "availableReplicas=1", |s| s["availableReplicas"] == 1).await?;
    event_with_reason(&client, &ns, "example-foo", "Synced").await?;

    set_replicas(&client, &ns, "example-foo", 3).await?;
    deployment_where(&client, &ns, "example-foo", "3 replicas", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(3)
    })
    .await?;
    foo_status_where(&client, &ns, "example-foo", "availableReplicas=3", |s| s["availableReplicas"] == 3).await?;
    // Conditions say so too, for the generation scaled to (what `kubectl wait --for=condition=Ready` reads).
    let generation = foos(&client, &ns).get("example-foo").await?.metadata.generation;
    let foo = foo_status_where(&client, &ns, "example-foo", "Ready=True for the new generation", |s| {
        let ready = s["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == "Ready").cloned());
        ready.is_some_and(|r| r["status"] == "True" && r["observedGeneration"].as_i64() == generation)
    })
    .await?;
    let status = &foo.data["status"];
    assert_eq!(status["observedGeneration"].as_i64(), generation);
    let progressing =
        status["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == "Progressing").cloned());
    assert_eq!(progressing.map(|p| p["reason"].clone()), Some(json!("Complete")), "{status}");
    let out = kwop_tests::ControlPlane::shared(Mode::Full)?.kubectl_output(&[
        "wait",
        "--for=condition=Ready",
        "--timeout=10s",
        "-n",
        &ns,
        "foo/example-foo",
    ])?;
    assert!(out.contains("condition met"), "{out}");

    // Deleting the Foo lets the garbage collector delete the Deployment.
    foos(&client, &ns).delete("example-foo", &DeleteParams::foreground()).await?;
    deployment_gone(&client, &ns, "example-foo", "the Deployment to be garbage-collected").await?;
    assert_eq!(host.metric("kwop_plugin_errors_total", &[])?, 0.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unowned_deployment_with_the_same_name_is_left_alone() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("foo-collision")?;
    let client = plane.client().await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let theirs: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "taken", "labels": { "owner": "someone-else" } },
        "spec": { "replicas": 5, "selector": { "matchLabels": { "app": "theirs" } },
            "template": { "metadata": { "labels": { "app": "theirs" } }, "spec": { "containers": [ { "name": "c", "image": "busybox" } ] } } }
    }))?;
    let before = deployments.create(&PostParams::default(), &theirs).await?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    let host = host(plane, &dir, &[&format!("--namespace={ns}")])?;

    create_foo(&client, &ns, "foo", "taken", Some(1)).await?;
    let ev = event_with_reason(&client, &ns, "foo", "ErrResourceExists").await?;
    assert_eq!(ev.note.as_deref(), Some("Resource \"taken\" already exists and is not managed by Foo"));
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    // Give the host time to retry a few times with backoff; the Deployment must stay as it was.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = deployments.get("taken").await?;
    // (The status may change under a controller-manager; spec and metadata must not.)
    assert_eq!(after.metadata.generation, before.metadata.generation, "the unowned Deployment's spec was modified");
    assert_eq!(after.metadata.labels, before.metadata.labels);
    assert!(after.metadata.owner_references.is_none());
    let managers: Vec<_> = after.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect();
    assert!(!managers.iter().any(|m| m.starts_with("kwop")), "kwop wrote to it: {managers:?}");
    assert_eq!(host.metric("kwop_writes_total", &[("kind", "Deployment")])?, 0.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resync_of_an_in_sync_world_writes_nothing_calls_no_plugin_and_drift_is_still_corrected() -> anyhow::Result<()>
{
    // A plane of its own: the API server's write counters then only see this test.
    let plane = ControlPlane::start(Mode::Api)?;
    let ns = plane.namespace("resync")?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    let host = host(&plane, &dir, &["--resync-period=1s"])?;
    let client = plane.client().await?;
    for i in 0..20 {
        create_foo(&client, &ns, &format!("foo-{i}"), &format!("dep-{i}"), Some(1 + i % 3)).await?;
    }
    for i in 0..20 {
        foo_status_where(&client, &ns, &format!("foo-{i}"), "status written", |s| s["availableReplicas"] == 0).await?;
        deployment_where(&client, &ns, &format!("dep-{i}"), "deployment", |_| true).await?;
    }
    // Let in-flight reconciles (triggered by our own writes) settle.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let resources = ["deployments", "foos", "events"];
    let calls = "kwop_plugin_call_duration_seconds_count";
    let writes_before = apiserver_writes(&plane, &resources)?;
    let reconciles_before = host.metric("kwop_reconcile_total", &[])?;
    let calls_before = host.metric(calls, &[])?;
    let queued = "kwop_reconcile_duration_seconds_count";
    let queued_before = host.metric(queued, &[])?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let writes_after = apiserver_writes(&plane, &resources)?;
    let reconciles_after = host.metric("kwop_reconcile_total", &[])?;
    let unchanged = host.metric("kwop_reconcile_total", &[("result", "unchanged")])?;
    assert!(
        reconciles_after - reconciles_before >= 60.0,
        "expected >= 3 resyncs of 20 Foos, saw {} reconciles",
        reconciles_after - reconciles_before
    );
    assert_eq!(writes_after - writes_before, 0.0, "writes during resyncs of an in-sync world");
    assert!(host.metric("kwop_writes_skipped_total", &[])? > 0.0);
    // Memoized: nothing the reconciles depend on changed, so the plugin was not called at all.
    assert_eq!(host.metric(calls, &[])? - calls_before, 0.0, "plugin calls during resyncs of an in-sync world");
    assert!(unchanged >= 60.0, "reconciles answered from the memo: {unchanged}");
    // ...and checked where they stand: no in-sync primary went through the queue and a worker.
    assert_eq!(host.metric(queued, &[])? - queued_before, 0.0, "in-sync primaries queued by the resync");

    // Drift changes a resourceVersion, so it is still corrected: a hand-edited Deployment...
    let deps: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let patch = json!({ "spec": { "replicas": 9 } });
    deps.patch("dep-4", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await?;
    deployment_where(&client, &ns, "dep-4", "replicas restored", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(2)
    })
    .await?;
    // ...and a hand-edited status.
    let status = json!({ "status": { "availableReplicas": 7 } });
    foos(&client, &ns)
        .patch_status("foo-5", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&status))
        .await?;
    foo_status_where(&client, &ns, "foo-5", "status restored", |s| s["availableReplicas"] == 0).await?;
    assert!(host.metric(calls, &[])? - calls_before >= 2.0, "the plugin was called for the drift");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_foo_gets_a_clear_warning_and_nothing_is_created() -> anyhow::Result<()> {
    let Env { ns, host, client, .. } = guest_foo_env("foo-invalid", Mode::Api).await?;
    create_foo(&client, &ns, "no-name", "", Some(1)).await?;
    create_foo(&client, &ns, "bad-name", "Not_A_DNS_Name", Some(1)).await?;
    let ev = event_with_reason(&client, &ns, "no-name", "InvalidSpec").await?;
    assert!(ev.note.unwrap_or_default().contains("spec.deploymentName is missing or empty"));
    let ev = event_with_reason(&client, &ns, "bad-name", "InvalidSpec").await?;
    assert!(ev.note.unwrap_or_default().contains("is not a valid Deployment name"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    assert!(deployments.list(&Default::default()).await?.items.is_empty());
    // No retry: the user has to fix the Foo.
    assert_eq!(host.metric("kwop_reconcile_total", &[("result", "plugin_failure")])?, 2.0);
    Ok(())
}
