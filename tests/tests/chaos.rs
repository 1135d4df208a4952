//! The host survives the cluster's faults (issue 6): kube-apiserver and etcd restarts in the
//! middle of a run of 100 Foos. Uses a plane of its own, since it restarts components.

mod common;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams};
use kwop_tests::proxy::Proxy;
use kwop_tests::{host::http_get, plugins, wait, ControlPlane, Host, Mode};
use std::time::Duration;

async fn create_with_retry(client: &kube::Client, ns: &str, i: usize) -> anyhow::Result<()> {
    let name = format!("foo-{i}");
    for _ in 0..300 {
        match create_foo(client, ns, &name, &format!("dep-{i}"), Some(1 + (i % 3) as i64)).await {
            Ok(_) => return Ok(()),
            Err(e) if e.to_string().contains("AlreadyExists") || e.to_string().contains("already exists") => {
                return Ok(())
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    anyhow::bail!("could not create {name}")
}

async fn readyz(port: u16, want: u16, what: &str) -> anyhow::Result<()> {
    wait::until(what, Duration::from_secs(60), || async {
        let code = http_get(port, "/readyz").map(|(c, _)| c).unwrap_or(0);
        Ok((code == want).then_some(())).map_err(|_: ()| format!("/readyz answered {code}"))
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn apiserver_and_etcd_restarts_lose_nothing_and_duplicate_nothing() -> anyhow::Result<()> {
    let plane = ControlPlane::start(Mode::Api)?;
    let ns = plane.namespace("chaos")?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    let host = host(&plane, &dir, &[])?;
    let client = plane.client().await?;

    for i in 0..40 {
        create_with_retry(&client, &ns, i).await?;
    }
    // kube-apiserver goes away mid-run: readiness must say so.
    plane.stop_component("kube-apiserver");
    readyz(host.port, 503, "/readyz to report the outage").await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    plane.start_component("kube-apiserver")?;
    let client = plane.client().await?;
    readyz(host.port, 200, "/readyz to recover").await?;
    for i in 40..70 {
        create_with_retry(&client, &ns, i).await?;
    }
    // Then etcd restarts under the API server.
    plane.stop_component("etcd");
    tokio::time::sleep(Duration::from_secs(2)).await;
    plane.start_component("etcd")?;
    for i in 70..100 {
        create_with_retry(&client, &ns, i).await?;
    }
    readyz(host.port, 200, "ready after the etcd restart").await?;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    wait::until("100 Deployments with the right replicas", Duration::from_secs(120), || async {
        let list = deployments.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items;
        let good = list
            .iter()
            .filter(|d| {
                let i: i32 = d
                    .metadata
                    .name
                    .as_deref()
                    .and_then(|n| n.strip_prefix("dep-"))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(-1);
                d.spec.as_ref().and_then(|s| s.replicas) == Some(1 + i % 3)
            })
            .count();
        Ok((good == 100).then_some(())).map_err(|_: ()| format!("{good}/100"))
    })
    .await?;
    wait::until("every Foo's status", Duration::from_secs(60), || async {
        let list = foos(&client, &ns).list(&ListParams::default()).await.map_err(|e| e.to_string())?.items;
        let done = list.iter().filter(|f| f.data["status"]["availableReplicas"] == 0).count();
        Ok((done == 100).then_some(())).map_err(|_: ()| format!("{done}/100"))
    })
    .await?;
    // No duplicate writes: no Deployment's spec was written twice (generation 1), and the host
    // applied each Deployment once (a write whose response was lost in the outage may be resent,
    // which the API server treats as a no-op; allow for a few of those).
    let list = deployments.list(&ListParams::default()).await?.items;
    assert!(list.iter().all(|d| d.metadata.generation == Some(1)), "a Deployment spec was rewritten");
    let applies = host.metric("kwop_writes_total", &[("kind", "Deployment"), ("op", "apply")])?;
    assert!((100.0..=105.0).contains(&applies), "Deployment applies: {applies}");
    let statuses = host.metric("kwop_writes_total", &[("op", "status")])?;
    assert!((100.0..=105.0).contains(&statuses), "status writes: {statuses}");
    Ok(())
}

/// Changes made while the host could not see the API server are reconciled from the relist, not
/// from the store before it, and without waiting for a resync (it is off): a Foo scaled while
/// the host was blind gets its Deployment scaled, and a Deployment deleted meanwhile comes back.
/// The API server restarts while the host is cut off, so its watches cannot resume and must
/// relist.
#[tokio::test(flavor = "multi_thread")]
async fn changes_made_while_the_host_was_blind_are_reconciled_from_the_relist() -> anyhow::Result<()> {
    let plane = ControlPlane::start(Mode::Api)?;
    let ns = plane.namespace("relist")?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    let proxy = Proxy::start(Proxy::upstream_of(&plane.kubeconfig)?)?;
    let kubeconfig = proxy.kubeconfig(&plane.kubeconfig, plane.dir.join("kubeconfig-proxy"))?;
    let flags = [format!("--namespace={ns}"), "--resync-period=0".into()];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let host = Host::start_with_kubeconfig(KWOP, &plane, &kubeconfig, &dir, &flags, true)?;
    let client = plane.client().await?;
    for n in ["a", "b"] {
        create_foo(&client, &ns, n, &format!("dep-{n}"), Some(1)).await?;
        deployment_where(&client, &ns, &format!("dep-{n}"), "reconciled", |d| {
            d.spec.as_ref().and_then(|s| s.replicas) == Some(1)
        })
        .await?;
    }

    proxy.cut();
    readyz(host.port, 503, "/readyz to report the outage").await?;
    set_replicas(&client, &ns, "a", 3).await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    deployments.delete("dep-b", &Default::default()).await?;
    deployment_gone(&client, &ns, "dep-b", "deleted by hand").await?;
    plane.stop_component("kube-apiserver");
    plane.start_component("kube-apiserver")?;
    proxy.restore();

    let client = plane.client().await?;
    deployment_where(&client, &ns, "dep-a", "the change made while blind", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(3)
    })
    .await?;
    deployment_where(&client, &ns, "dep-b", "the Deployment deleted while blind is back", |_| true).await?;
    readyz(host.port, 200, "ready again").await?;
    Ok(())
}
