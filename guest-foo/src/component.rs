//! The WASM shell: WIT types in, [`crate::sync`] in the middle, WIT types out.

use serde_json::Value;

wit_bindgen::generate!({ path: "../wit", world: "reconciler" });

use kwop::reconciler::cache;
use kwop::reconciler::log::{log, Level};
use kwop::reconciler::types::{Event as WitEvent, EventType, Gvk};

struct GuestFoo;

fn deployment_gvk() -> Gvk {
    Gvk { group: "apps".into(), version: "v1".into(), kind: "Deployment".into() }
}

fn to_wit(events: Vec<crate::Event>) -> Vec<WitEvent> {
    events
        .into_iter()
        .map(|e| WitEvent {
            severity: match e.severity {
                crate::Severity::Normal => EventType::Normal,
                crate::Severity::Warning => EventType::Warning,
            },
            reason: e.reason,
            message: e.message,
        })
        .collect()
}

impl Guest for GuestFoo {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "guest-foo".into(),
            version: if cfg!(feature = "v2") { "0.1.0-v2".into() } else { env!("CARGO_PKG_VERSION").into() },
            primary: Gvk { group: "samplecontroller.k8s.io".into(), version: "v1alpha1".into(), kind: "Foo".into() },
            owns: vec![deployment_gvk()],
            reads: vec![],
        }
    }

    fn reconcile(req: Request) -> Result<Outcome, Failure> {
        let foo: Value = serde_json::from_str(&req.primary).map_err(|e| Failure {
            message: format!("primary is not JSON: {e}"),
            events: vec![],
            retry: false,
        })?;
        let lookup = |ns: &str, name: &str| {
            let json = cache::get(&deployment_gvk(), Some(ns), name)?;
            match serde_json::from_str(&json) {
                Ok(v) => Some(v),
                Err(e) => {
                    log(Level::Error, &format!("cached Deployment {ns}/{name} is not JSON: {e}"));
                    None
                }
            }
        };
        match crate::sync(&foo, &lookup) {
            Ok(d) => Ok(Outcome {
                apply: d.apply.iter().map(Value::to_string).collect(),
                delete: vec![],
                status: Some(d.status.to_string()),
                events: to_wit(d.events),
                requeue_after_ms: None,
            }),
            Err(f) => Err(Failure { message: f.message, events: to_wit(f.events), retry: f.retry }),
        }
    }
}

export!(GuestFoo);
