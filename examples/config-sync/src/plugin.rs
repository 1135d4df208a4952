//! The plugin: the kwop-guest SDK's `Reconciler` around [`crate::sync`], and (on `wasm32` only)
//! its export as the component's WIT world.

use crate::sync::{self, World};
use crate::types::{ConfigSync, CopyRef, Kind, Namespace, Source};
use kwop_guest::{log, Context, Failure, Finalize, Gvk, Info, Outcome, Reconciler};
use serde::de::IgnoredAny;

/// config-sync as a kwop plugin. Natively it runs under `kwop_guest::testing`.
pub struct ConfigSyncPlugin;

impl Reconciler for ConfigSyncPlugin {
    type Primary = ConfigSync;

    fn info() -> Info {
        Info::new("config-sync", env!("CARGO_PKG_VERSION"), Gvk::new("examples.kwop.dev", "v1alpha1", "ConfigSync"))
            .owns_across_namespaces(Kind::ConfigMap.gvk())
            .owns_across_namespaces(Kind::Secret.gvk())
            .reads(Gvk::new("", "v1", "Namespace"))
            .finalizes()
    }

    fn reconcile(cs: ConfigSync, ctx: &Context) -> Result<Outcome, Failure> {
        let owned = CopyRef::from_owned(&ctx.owned_json());
        let source = |kind: Kind, ns: &str, name: &str| ctx.get_as::<Source>(&kind.gvk(), Some(ns), name);
        let namespaces = |selector: &str| {
            // The empty selector selects every namespace: ask for all of them.
            let selector = Some(selector).filter(|s| !s.is_empty());
            ctx.query_as::<Namespace>(&Gvk::new("", "v1", "Namespace"), None, selector)
        };
        // Whether an object is there at all: its content is skipped, not parsed.
        let exists = |kind: Kind, ns: &str, name: &str| ctx.get_as::<IgnoredAny>(&kind.gvk(), Some(ns), name).is_some();
        let world = World { source: &source, namespaces: &namespaces, exists: &exists, owned: &owned };
        let d = sync::sync(&cs, &world, ctx.now());
        // Counts only: no data, not even a key, reaches the log.
        log::debug(&format!(
            "{} copies applied, {} deleted, {} conflicts",
            d.apply.len(),
            d.delete.len(),
            d.status.conflicts.len()
        ));
        let mut out = Outcome::new().status(&d.status)?;
        for intent in &d.apply {
            out = out.apply(intent)?;
        }
        for del in d.delete {
            out = out.delete(del);
        }
        for e in d.events {
            out = out.event(e);
        }
        Ok(out)
    }

    fn finalize(_cs: ConfigSync, ctx: &Context) -> Result<Finalize, Failure> {
        let (deletes, event) = sync::cleanup(&CopyRef::from_owned(&ctx.owned_json()));
        let mut f = Finalize::done().event(event);
        for del in deletes {
            f = f.delete(del);
        }
        Ok(f)
    }
}

#[cfg(target_arch = "wasm32")]
kwop_guest::export!(ConfigSyncPlugin);
