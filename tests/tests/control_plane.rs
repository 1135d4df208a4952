//! The control plane itself: the smoke test of issue 2.

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kwop_tests::{wait, ControlPlane, Mode};
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn foo_crd_is_served_and_a_foo_round_trips() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("smoke-foo")?;
    let client = plane.client().await?;
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("samplecontroller.k8s.io", "v1alpha1", "Foo"));
    let foos: Api<DynamicObject> = Api::namespaced_with(client, &ns, &ar);
    let foo: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": { "name": "example-foo" },
        "spec": { "deploymentName": "example-foo", "replicas": 1 }
    }))?;
    foos.create(&PostParams::default(), &foo).await?;
    let back = foos.get("example-foo").await?;
    assert_eq!(back.data["spec"]["deploymentName"], "example-foo");
    // The CRD validates like sample-controller's: replicas is 1..=10.
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": { "name": "too-many" }, "spec": { "deploymentName": "x", "replicas": 11 }
    }))?;
    let err = foos.create(&PostParams::default(), &bad).await.expect_err("replicas 11 must be refused");
    assert!(err.to_string().contains("replicas"), "{err}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn full_mode_makes_deployments_available_and_deletes_them() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Full)?;
    let ns = plane.namespace("smoke-deploy")?;
    let client = plane.client().await?;
    let deployments: Api<Deployment> = Api::namespaced(client, &ns);
    let d: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": "web" } },
            "template": { "metadata": { "labels": { "app": "web" } },
                "spec": { "containers": [ { "name": "nginx", "image": "nginx:latest" } ] } }
        }
    }))?;
    deployments.create(&PostParams::default(), &d).await?;
    wait::until("2 available replicas", Duration::from_secs(90), || async {
        let d = deployments.get("web").await.map_err(|e| e.to_string())?;
        let avail = d.status.and_then(|s| s.available_replicas).unwrap_or(0);
        Ok((avail == 2).then_some(())).map_err(|_: ()| format!("available={avail}"))
    })
    .await?;
    deployments.delete("web", &DeleteParams::default()).await?;
    wait::until("the Deployment to be gone", Duration::from_secs(60), || async {
        Ok(deployments.get_opt("web").await.map_err(|e| e.to_string())?.is_none().then_some(()))
    })
    .await?;
    Ok(())
}
