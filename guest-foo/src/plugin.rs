//! The plugin: info and reconcile through the kwop-guest SDK.

use crate::convert;
use crate::foo::{self, Foo};
use kwop_guest::{Admission, Context, Failure, Gvk, Info, Mutation, Outcome, Reconciler, Violation};

struct GuestFoo;

impl Reconciler for GuestFoo {
    type Primary = Foo;

    fn info() -> Info {
        let version = if cfg!(feature = "v2") { "0.1.0-v2" } else { env!("CARGO_PKG_VERSION") };
        // Benchmarks build copies of this plugin for other CRD groups (one host running many
        // plugins): `KWOP_FOO_GROUP=g` at build time sets the primary group and, since plugin
        // names must be unique, names the copy `guest-foo-<first label of g>`. Unset: as shipped.
        let (name, group) = match option_env!("KWOP_FOO_GROUP") {
            Some(g) => (format!("guest-foo-{}", g.split('.').next().unwrap_or(g)), g),
            None => ("guest-foo".to_string(), "samplecontroller.k8s.io"),
        };
        Info::new(&name, version, Gvk::new(group, "v1alpha1", "Foo"))
            .owns(Gvk::new("apps", "v1", "Deployment"))
            .validates()
            .mutates("spec.replicas")
            .converts(&convert::VERSIONS)
    }

    fn reconcile(foo: Foo, ctx: &Context) -> Result<Outcome, Failure> {
        let kind = Gvk::new("apps", "v1", "Deployment");
        let d = foo::sync(&foo, &|ns, name| ctx.get_as::<foo::Observed>(&kind, Some(ns), name), ctx.now())?;
        let mut out = Outcome::new().apply(&d.deployment)?.status(&d.status)?;
        for e in d.events {
            out = out.event(e);
        }
        Ok(out)
    }

    fn validate(req: Admission<Foo>, ctx: &Context) -> Result<Vec<String>, Vec<Violation>> {
        let kind = Gvk::new("apps", "v1", "Deployment");
        foo::admit(&req.object, req.old.as_ref(), &|ns, name| ctx.get_as::<foo::Observed>(&kind, Some(ns), name))
    }

    fn mutate(req: Admission<kwop_guest::serde_json::Value>, _: &Context) -> Result<Mutation, Vec<Violation>> {
        let object = req.object;
        Ok(Mutation::new(convert::default_replicas(object.clone()).unwrap_or(object)))
    }

    fn convert(
        object: kwop_guest::serde_json::Value,
        api_version: &str,
    ) -> Result<kwop_guest::serde_json::Value, String> {
        convert::convert(object, api_version)
    }
}

kwop_guest::export!(GuestFoo);
