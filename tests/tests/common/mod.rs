//! Helpers shared by the integration tests.
#![allow(dead_code)]

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use kwop_tests::{wait, ControlPlane, Host};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub mod rp;
pub mod webhook;

/// The kwop binary under test.
pub const KWOP: &str = env!("CARGO_BIN_EXE_kwop-host");

/// `kwop ARGS`: (succeeded, stdout, stderr).
pub fn kwop(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(KWOP).args(args).output().expect("kwop runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// A guest-foo port as `scripts/build-guests` built it (`file`: foo-js, foo-py, ...), in
/// `$KWOP_GUESTS_DIR`, else `$CARGO_TARGET_DIR/guests`.
pub fn built_guest(file: &str) -> PathBuf {
    let dir = std::env::var_os("KWOP_GUESTS_DIR").map(PathBuf::from).unwrap_or_else(|| {
        std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| kwop_tests::repo_root().join("target"))
            .join("guests")
    });
    let path = dir.join(format!("{file}.wasm"));
    assert!(path.is_file(), "{} is missing: run scripts/build-guests (scripts/test does)", path.display());
    path
}

/// The test plugin `chaos`'s objects (tests/crds/chaos.yaml).
pub fn chaos_api(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("test.kwop.dev", "v1", "Chaos"), "chaos"),
    )
}

/// Creates a Chaos object whose `spec` picks the misbehaviour.
pub async fn create_chaos(client: &Client, ns: &str, name: &str, spec: Value) -> anyhow::Result<()> {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "test.kwop.dev/v1", "kind": "Chaos", "metadata": { "name": name }, "spec": spec
    }))?;
    chaos_api(client, ns).create(&PostParams::default(), &obj).await?;
    Ok(())
}

pub fn foo_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("samplecontroller.k8s.io", "v1alpha1", "Foo"))
}

pub fn foos(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &foo_resource())
}

pub fn foo(name: &str, deployment: &str, replicas: Option<i64>) -> DynamicObject {
    let mut spec = json!({ "deploymentName": deployment });
    if let Some(r) = replicas {
        spec["replicas"] = json!(r);
    }
    serde_json::from_value(json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": { "name": name }, "spec": spec
    }))
    .expect("static object")
}

pub async fn create_foo(
    client: &Client,
    ns: &str,
    name: &str,
    deployment: &str,
    replicas: Option<i64>,
) -> anyhow::Result<DynamicObject> {
    Ok(foos(client, ns).create(&PostParams::default(), &foo(name, deployment, replicas)).await?)
}

pub async fn set_replicas(client: &Client, ns: &str, name: &str, replicas: i64) -> anyhow::Result<()> {
    let patch = json!({ "spec": { "replicas": replicas } });
    foos(client, ns).patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// Waits (60 s) for the ConfigMap `name` in `ns` matching `pred` (`what` says what for).
pub async fn configmap_where(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    pred: impl Fn(&k8s_openapi::api::core::v1::ConfigMap) -> bool,
) -> anyhow::Result<k8s_openapi::api::core::v1::ConfigMap> {
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), ns);
    let show = |c: &k8s_openapi::api::core::v1::ConfigMap| format!("labels {:?} data {:?}", c.metadata.labels, c.data);
    object_where(&api, name, &format!("{what} in {ns}"), pred, show).await
}

/// Waits (60 s) for the object `name` of `api` matching `pred`; `show` says what it looks like while
/// it does not.
pub async fn object_where<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    pred: impl Fn(&K) -> bool,
    show: impl Fn(&K) -> String,
) -> anyhow::Result<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    wait::until(what, Duration::from_secs(60), || async {
        match api.get_opt(name).await.map_err(|e| e.to_string())? {
            Some(o) if pred(&o) => Ok(Some(o)),
            Some(o) => Err(show(&o)),
            None => Err("not found".into()),
        }
    })
    .await
}

/// Waits for a Deployment matching `pred`.
pub async fn deployment_where(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    pred: impl Fn(&Deployment) -> bool,
) -> anyhow::Result<Deployment> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    wait::until(what, Duration::from_secs(60), || async {
        match api.get_opt(name).await.map_err(|e| e.to_string())? {
            Some(d) if pred(&d) => Ok(Some(d)),
            Some(d) => Err(format!("replicas={:?} status={:?}", d.spec.as_ref().and_then(|s| s.replicas), d.status)),
            None => Err("not found".into()),
        }
    })
    .await
}

/// Waits for a Foo whose status satisfies `pred`.
pub async fn foo_status_where(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> anyhow::Result<DynamicObject> {
    let api = foos(client, ns);
    wait::until(what, Duration::from_secs(60), || async {
        let f = api.get(name).await.map_err(|e| e.to_string())?;
        let st = f.data.get("status").cloned().unwrap_or(Value::Null);
        if pred(&st) {
            Ok(Some(f))
        } else {
            Err(format!("status={st}"))
        }
    })
    .await
}

/// Events about `object` (events.k8s.io/v1).
pub async fn events_for(client: &Client, ns: &str, object: &str) -> anyhow::Result<Vec<Event>> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(object))
        .collect())
}

/// Waits for an event with `reason` on `object`; returns it.
pub async fn event_with_reason(client: &Client, ns: &str, object: &str, reason: &str) -> anyhow::Result<Event> {
    wait::until(&format!("event {reason} on {object}"), Duration::from_secs(60), || async {
        let evs = events_for(client, ns, object).await.map_err(|e| e.to_string())?;
        let reasons: Vec<String> = evs.iter().filter_map(|e| e.reason.clone()).collect();
        match evs.into_iter().find(|e| e.reason.as_deref() == Some(reason)) {
            Some(e) => Ok(Some(e)),
            None => Err(format!("reasons so far: {reasons:?}")),
        }
    })
    .await
}

/// The host's `/plugins` answer.
pub fn plugins_json(port: u16) -> anyhow::Result<Value> {
    Ok(serde_json::from_str(&kwop_tests::host::http_get(port, "/plugins")?.1)?)
}

/// Starts kwop with the given plugins folder.
pub fn host(plane: &ControlPlane, plugins: &Path, extra: &[&str]) -> anyhow::Result<Host> {
    Host::start(KWOP, plane, plugins, extra, true)
}

/// Write requests the API server served for a resource (from its own metrics).
pub fn apiserver_writes(plane: &ControlPlane, resources: &[&str]) -> anyhow::Result<f64> {
    let text = plane.kubectl_output(&["get", "--raw=/metrics"])?;
    let mut total = 0.0;
    for r in resources {
        for verb in ["POST", "PUT", "PATCH", "APPLY", "DELETE"] {
            total += kwop_tests::host::sum_metric(&text, "apiserver_request_total", &[("resource", r), ("verb", verb)]);
        }
    }
    Ok(total)
}

/// The usual setup: the shared plane in `mode`, a fresh namespace, a folder holding guest-foo, a
/// host watching only that namespace, and an admin client.
pub struct Env {
    pub plane: &'static ControlPlane,
    pub ns: String,
    pub dir: std::path::PathBuf,
    pub host: Host,
    pub client: Client,
}

pub async fn guest_foo_env(test: &str, mode: kwop_tests::Mode) -> anyhow::Result<Env> {
    let plane = ControlPlane::shared(mode)?;
    let ns = plane.namespace(test)?;
    let dir = kwop_tests::plugins::folder(&[("guest-foo.wasm", kwop_tests::plugins::GUEST_FOO)])?;
    let host = host(plane, &dir, &[&format!("--namespace={ns}")])?;
    let client = plane.client().await?;
    Ok(Env { plane, ns, dir, host, client })
}

/// Waits until a Deployment is gone.
pub async fn deployment_gone(client: &Client, ns: &str, name: &str, what: &str) -> anyhow::Result<()> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    wait::until(what, Duration::from_secs(90), || async {
        Ok(api.get_opt(name).await.map_err(|e| e.to_string())?.is_none().then_some(()))
    })
    .await
}

/// A copy of deploy/ (with its sharded overlay) and crds/ with the guest-foo component in place, as `scripts/build-plugins`
/// would leave it.
pub fn deploy_tree() -> anyhow::Result<PathBuf> {
    let root = std::env::temp_dir().join("kwop-test").join(format!("{}-deploy", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    fn copy(from: &Path, to: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(to)?;
        for e in std::fs::read_dir(from)? {
            let p = e?.path();
            let dest = to.join(p.file_name().unwrap_or_default());
            if p.is_dir() {
                copy(&p, &dest)?;
            } else if p.extension().is_none_or(|x| x != "wasm") {
                std::fs::copy(&p, dest)?;
            }
        }
        Ok(())
    }
    for sub in ["deploy", "crds"] {
        copy(&kwop_tests::repo_root().join(sub), &root.join(sub))?;
    }
    std::fs::copy(kwop_tests::plugins::GUEST_FOO, root.join("deploy/plugins/guest-foo.wasm"))?;
    Ok(root.join("deploy"))
}

/// `kubectl apply --server-side -k deploy/` (a copy with guest-foo in place), then the example
/// ReconcilerPlugin `deploy/plugins/guest-foo.yaml`, as docs/operate.md says.
pub fn install(plane: &ControlPlane) -> anyhow::Result<()> {
    let dir = deploy_tree()?;
    plane.kubectl_output(&["apply", "--server-side", "--force-conflicts", "-k", &dir.display().to_string()])?;
    plane.kubectl_output(&[
        "wait",
        "--for=condition=established",
        "--timeout=60s",
        "crd/reconcilerplugins.kwop.dev",
    ])?;
    let example = kwop_tests::repo_root().join("deploy/plugins/guest-foo.yaml");
    plane.kubectl_output(&["apply", "--server-side", "--force-conflicts", "-f", &example.display().to_string()])?;
    Ok(())
}

/// The "under load" of the swap tests: 200 Foos created in `ns` (`foo-<i>`, Deployment
/// `dep-<i>`, 1 replica), each scaled to 2 ten creations later, paced so that it lasts seconds.
pub struct FooLoad {
    /// Writes done so far (400 in all).
    pub writes: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl FooLoad {
    /// All its writes.
    pub const TOTAL: usize = 400;

    /// Starts writing.
    pub fn start(client: &Client, ns: &str) -> FooLoad {
        let writes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (client, ns, w) = (client.clone(), ns.to_string(), writes.clone());
        let done = move || {
            w.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        };
        let task = tokio::spawn(async move {
            let pace = || tokio::time::sleep(Duration::from_millis(10));
            for i in 0..200 {
                create_foo(&client, &ns, &format!("foo-{i}"), &format!("dep-{i}"), Some(1)).await?;
                done();
                if i >= 10 {
                    set_replicas(&client, &ns, &format!("foo-{}", i - 10), 2).await?;
                    done();
                }
                pace().await;
            }
            for i in 190..200 {
                set_replicas(&client, &ns, &format!("foo-{i}"), 2).await?;
                done();
                pace().await;
            }
            anyhow::Ok(())
        });
        FooLoad { writes, task }
    }

    /// Writes done so far.
    pub fn done(&self) -> usize {
        self.writes.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits until `n` writes are done.
    pub async fn reached(&self, n: usize) -> anyhow::Result<()> {
        wait::until(&format!("{n} writes of the load"), Duration::from_secs(60), || async {
            Ok((self.done() >= n).then_some(()))
        })
        .await
    }

    /// Waits for the rest of the load.
    pub async fn finish(self) -> anyhow::Result<()> {
        self.task.await?
    }
}
