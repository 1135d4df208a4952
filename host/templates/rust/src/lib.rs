//! {{name}}: a kwop plugin. A Foo (samplecontroller.k8s.io/v1alpha1) gets a ConfigMap
//! `<name>-info` that describes it.

use kwop_guest::k8s_openapi::api::core::v1::ConfigMap;
use kwop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kwop_guest::{log, Context, Event, Failure, Gvk, Info, Meta, Outcome, Reconciler};
use serde::Deserialize;

/// The primary object: only the fields this plugin reads (unknown fields are ignored).
#[derive(Deserialize)]
pub struct Foo {
    pub metadata: Meta,
    #[serde(default)]
    pub spec: FooSpec,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct FooSpec {
    pub deployment_name: Option<String>,
    pub replicas: Option<i64>,
}

pub struct Plugin;

impl Reconciler for Plugin {
    type Primary = Foo;

    fn info() -> Info {
        // The host watches these kinds and lets the plugin write only what it `owns`.
        Info::new("{{name}}", env!("CARGO_PKG_VERSION"), Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo"))
            .owns(Gvk::of::<ConfigMap>())
    }

    fn reconcile(foo: Foo, ctx: &Context) -> Result<Outcome, Failure> {
        let name = format!("{}-info", foo.metadata.name);
        let Some(deployment) = foo.spec.deployment_name.filter(|d| !d.is_empty()) else {
            // A failure: nothing is written; `permanent` waits until the Foo changes.
            let message = "spec.deploymentName is required";
            return Err(Failure::permanent(message).event(Event::warning("InvalidSpec", message)));
        };
        // `None`: the primary's namespace.
        let existing: Option<ConfigMap> = ctx.get(None, &name);
        log::debug(&format!("{} ConfigMap {name}", if existing.is_some() { "updating" } else { "creating" }));
        let config_map = ConfigMap {
            // The namespace defaults to the Foo's; the host sets the owner reference.
            metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
            data: Some(
                [
                    ("foo".to_string(), foo.metadata.name.clone()),
                    ("deploymentName".to_string(), deployment),
                    ("replicas".to_string(), foo.spec.replicas.unwrap_or(1).to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        };
        Ok(Outcome::new()
            .apply(&config_map)?
            .event(Event::normal("Synced", format!("ConfigMap {name} is up to date"))))
    }
}

kwop_guest::export!(Plugin);
