//! One change of primaries the soak makes (a Foo created, scaled or deleted, a Fin created or
//! deleted, the ConfigSync's source changed), made again after a fault until it goes through: an
//! answer saying it is there already counts as done.

use super::common;
use super::world::fins_api;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::Client;
use kwop_tests::shards::FooKey;
use serde_json::json;

/// One change of primaries.
#[derive(Debug, Clone)]
pub enum Op {
    CreateFoo(FooKey),
    Scale(FooKey, i64),
    DeleteFoo(FooKey),
    CreateFin(FooKey, Vec<String>),
    DeleteFin(FooKey),
    Setting(u64),
}

/// An answer that means the change is there already (a retry of one that went through).
fn done_already(r: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match r {
        Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => Ok(()),
        r => r,
    }
}

impl Op {
    pub async fn run(&self, client: &Client, source_ns: &str) -> Result<(), kube::Error> {
        let pp = PostParams::default();
        let r = match self {
            Op::CreateFoo((ns, name)) => {
                let foo = common::foo(name, &format!("{name}-dep"), Some(1));
                common::foos(client, ns).create(&pp, &foo).await.map(drop)
            }
            Op::Scale((ns, name), n) => {
                let patch = json!({ "spec": { "replicas": n } });
                common::foos(client, ns).patch(name, &PatchParams::default(), &Patch::Merge(patch)).await.map(drop)
            }
            Op::DeleteFoo((ns, name)) => {
                common::foos(client, ns).delete(name, &DeleteParams::default()).await.map(drop)
            }
            Op::CreateFin((ns, name), elsewhere) => {
                let obj: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "test.kwop.dev/v1", "kind": "Fin", "metadata": { "name": name },
                    "spec": { "elsewhere": elsewhere }
                }))
                .map_err(kube::Error::SerdeError)?;
                fins_api(client, ns).create(&pp, &obj).await.map(drop)
            }
            Op::DeleteFin((ns, name)) => fins_api(client, ns).delete(name, &DeleteParams::default()).await.map(drop),
            Op::Setting(v) => {
                let patch = json!({ "data": { "setting": v.to_string() } });
                let api = Api::<ConfigMap>::namespaced(client.clone(), source_ns);
                api.patch("settings", &PatchParams::default(), &Patch::Merge(patch)).await.map(drop)
            }
        };
        done_already(r)
    }
}
