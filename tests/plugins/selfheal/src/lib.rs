//! A test plugin for self-healing and reads that trigger. A `Heal` object gets:
//! - a Service `<name>` with one unnamed port (`spec.port`, default 80), so a port edited by hand
//!   is the keyed-list case server-side apply alone cannot undo;
//! - a ConfigMap `<name>` whose `data.availableReplicas` copies the `status.availableReplicas` of
//!   the Deployment `spec.deployment`, read through `cache.get` (a read, not an owned object);
//! - with `spec.mode: typed-error`, a ConfigMap whose data holds a number, which the API server
//!   refuses with a typing error.

use kwop_guest::serde_json::{json, Value};
use kwop_guest::{Context, Failure, Gvk, Info, Meta, Outcome, Reconciler};
use serde::Deserialize;

#[derive(Deserialize)]
struct Heal {
    metadata: Meta,
    #[serde(default)]
    spec: HealSpec,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct HealSpec {
    port: Option<u16>,
    deployment: Option<String>,
    mode: Option<String>,
}

struct SelfHeal;

impl Reconciler for SelfHeal {
    type Primary = Heal;

    fn info() -> Info {
        Info::new("selfheal", "1", Gvk::new("test.kwop.dev", "v1", "Heal"))
            .owns(Gvk::new("", "v1", "Service"))
            .owns(Gvk::new("", "v1", "ConfigMap"))
            .reads(Gvk::new("apps", "v1", "Deployment"))
    }

    fn reconcile(heal: Heal, ctx: &Context) -> Result<Outcome, Failure> {
        let name = &heal.metadata.name;
        let port = heal.spec.port.unwrap_or(80);
        let service = json!({
            "apiVersion": "v1", "kind": "Service", "metadata": { "name": name },
            "spec": { "selector": { "app": name }, "ports": [{ "port": port, "targetPort": 8080 }] }
        });
        let available = heal
            .spec
            .deployment
            .as_deref()
            .and_then(|d| ctx.get_as::<Value>(&Gvk::new("apps", "v1", "Deployment"), None, d))
            .and_then(|d| d.pointer("/status/availableReplicas").and_then(Value::as_i64))
            .map_or_else(|| "unknown".to_string(), |n| n.to_string());
        let data = if heal.spec.mode.as_deref() == Some("typed-error") {
            json!({ "replicas": 1 })
        } else {
            json!({ "availableReplicas": available })
        };
        let config = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name }, "data": data });
        Outcome::new().apply(&service)?.apply(&config)
    }
}

kwop_guest::export!(SelfHeal);
