//! A sharded replica reconciles a part it holds again after a lapse of its member Lease only
//! from caches listed since — the caches kept whole (kinds owned across namespaces) included.
//! Found by the soak: a replica cut off while it wrote a Fin's copy (the API server applied it,
//! the answer was lost) finalized the Fin from a ConfigMap cache whose watch had not caught up,
//! saw no copy, and the copy leaked.

mod common;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kwop_tests::proxy::Proxy;
use kwop_tests::shards::Ring;
use kwop_tests::{host::http_get, plugins, wait, ControlPlane, Mode};
use serde_json::json;
use std::time::Duration;

fn fins(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("test.kwop.dev", "v1", "Fin")),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_copy_written_unseen_before_a_lapse_is_finalized_once_the_part_is_held_again() -> anyhow::Result<()> {
    let plane = ControlPlane::start(Mode::Api)?;
    let client = plane.client().await?;
    let leases = plane.namespace("kwop-system")?;
    let (ns, y, z) = (plane.namespace("whole")?, plane.namespace("whole-y")?, plane.namespace("whole-z")?);
    let dir = plugins::folder(&[("finalizer.wasm", plugins::FINALIZER)])?;
    let flags = vec![
        "--sharding=namespace".to_string(),
        format!("--leader-election-namespace={leases}"),
        "--leader-lease-duration=8s".into(),
        "--leader-renew-deadline=4s".into(),
        "--leader-retry-period=1s".into(),
        "--resync-period=10m".into(),
    ];
    let proxy = Proxy::start(Proxy::upstream_of(&plane.kubeconfig)?)?;
    let via_proxy = proxy.kubeconfig(&plane.kubeconfig, plane.dir.join("kubeconfig-b"))?;
    let mut ring = Ring::new(&plane, KWOP, &dir, flags);
    ring.add_with_kubeconfig("b", &via_proxy)?;
    ring.settled(Duration::from_secs(30)).await?;
    let fin: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "test.kwop.dev/v1", "kind": "Fin", "metadata": { "name": "f1" }, "spec": { "elsewhere": [y] }
    }))?;
    let uid = fins(&client, &ns).create(&PostParams::default(), &fin).await?.metadata.uid.unwrap_or_default();
    configmap_where(&client, &y, "f1", "the copy", |_| true).await?;

    // Cut off past its renew deadline: it holds nothing and says so.
    proxy.cut();
    let port = ring.hosts["b"].port;
    wait::until("b unready while cut off", Duration::from_secs(30), || async {
        let code = http_get(port, "/readyz").map(|(c, _)| c).unwrap_or(0);
        Ok((code == 503).then_some(()))
    })
    .await?;
    // A copy it wrote whose answer it never got, and the Fin's deletion, both unseen.
    let copy: ConfigMap = serde_json::from_value(json!({
        "metadata": {
            "name": "f1",
            "labels": { "kwop.dev/owner-uid": uid, "kwop.dev/plugin": "finalizer" },
            "annotations": { "kwop.dev/owner": format!("{ns}/f1") },
        },
        "data": { "from": "f1" },
    }))?;
    Api::<ConfigMap>::namespaced(client.clone(), &z).create(&PostParams::default(), &copy).await?;
    fins(&client, &ns).delete("f1", &DeleteParams::default()).await?;
    // Long enough for the watches' reconnection backoff to grow past the lapse's recovery: the
    // ConfigMap watch (kept whole) comes back seconds after the relisted Fins.
    tokio::time::sleep(Duration::from_secs(20)).await;
    proxy.restore();

    wait::until("the Fin finalized", Duration::from_secs(60), || async {
        Ok(fins(&client, &ns).get_opt("f1").await.map_err(|e| e.to_string())?.is_none().then_some(()))
    })
    .await?;
    for n in [&y, &z] {
        let left = Api::<ConfigMap>::namespaced(client.clone(), n).get_opt("f1").await?;
        assert!(left.is_none(), "finalize left the copy in {n}: it ran from a ConfigMap cache not relisted");
    }
    Ok(())
}
