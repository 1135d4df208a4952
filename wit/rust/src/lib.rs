//! kwop-guest: write a kwop reconcile plugin in Rust without touching the WIT bindings. Plugins
//! built with it implement `kwop:reconciler@0.3.0` (`wit/v0.3/reconciler.wit`); a kwop host older
//! than 0.3 does not load them (build with an older kwop-guest for such a host).
//!
//! ```ignore
//! use kwop_guest::{Context, Event, Failure, Gvk, Info, Outcome, Reconciler};
//! use k8s_openapi::api::apps::v1::Deployment;
//!
//! #[derive(serde::Deserialize)]
//! struct Foo { metadata: kwop_guest::Meta, spec: FooSpec }
//! #[derive(serde::Deserialize)]
//! struct FooSpec { replicas: Option<i32> }
//!
//! struct MyPlugin;
//! impl Reconciler for MyPlugin {
//!     type Primary = Foo;
//!     fn info() -> Info {
//!         Info::new("my-plugin", "0.1.0", Gvk::new("example.com", "v1", "Foo")).owns(Gvk::of::<Deployment>())
//!     }
//!     fn reconcile(foo: Foo, ctx: &Context) -> Result<Outcome, Failure> {
//!         let existing: Option<Deployment> = ctx.get(foo.metadata.namespace.as_deref(), "name");
//!         Ok(Outcome::new().apply(&Deployment::default())?.event(Event::normal("Synced", "done")))
//!     }
//! }
//! kwop_guest::export!(MyPlugin);
//! ```
//!
//! The primary type is any `serde::Deserialize` type (derive it for your CRD); typed reads of
//! built-in kinds use k8s-openapi types (feature `k8s-openapi`, on by default); untyped reads
//! return `serde_json::Value`. Everything that crosses to the host is JSON, as the WIT says.
//!
//! A plugin that must clean up when its primary is deleted declares [`Info::finalizes`] and
//! implements [`Reconciler::finalize`]; objects it keeps in other namespaces are declared with
//! [`Info::owns_across_namespaces`]. Status conditions: [`conditions`].
//!
//! Admission: [`Reconciler::validate`] refuses, [`Reconciler::mutate`] sets defaults (declare the
//! fields with [`Info::mutates`]), [`Reconciler::convert`] converts between versions of the
//! primary's CRD (declare them with [`Info::converts`]).

#[doc(hidden)]
#[allow(unsafe_code, missing_docs, clippy::too_many_arguments)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../v0.3/reconciler.wit",
        world: "reconciler",
        pub_export_macro: true,
        export_macro_name: "__export_reconciler",
        default_bindings_module: "kwop_guest::bindings",
    });
}

#[cfg_attr(not(target_arch = "wasm32"), allow(unused_imports))]
use bindings::kwop::reconciler::{cache, log as wit_log, types as wit};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

mod admission;
pub mod conditions;
mod context;
mod outcome;
pub mod testing;
mod time;

pub use admission::{Admission, Mutation, Operation, Violation};
pub use context::Context;
pub use outcome::{Failure, Finalize, Outcome};
pub use time::Time;

#[cfg(feature = "k8s-openapi")]
pub use k8s_openapi;
pub use serde_json;

/// A group/version/kind (`""` is the core group).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gvk {
    /// API group.
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind.
    pub kind: String,
}

impl Gvk {
    /// A GVK from its parts.
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        Gvk { group: group.into(), version: version.into(), kind: kind.into() }
    }

    /// The GVK of a k8s-openapi type, e.g. `Gvk::of::<Deployment>()`.
    #[cfg(feature = "k8s-openapi")]
    pub fn of<K: k8s_openapi::Resource>() -> Self {
        Gvk::new(K::GROUP, K::VERSION, K::KIND)
    }

    pub(crate) fn wit(&self) -> wit::Gvk {
        wit::Gvk { group: self.group.clone(), version: self.version.clone(), kind: self.kind.clone() }
    }
}

/// What the plugin is and what it may touch.
#[derive(Debug, Clone)]
pub struct Info {
    name: String,
    version: String,
    primary: Gvk,
    owns: Vec<(Gvk, bool)>,
    reads: Vec<Gvk>,
    finalizes: bool,
    validates: bool,
    mutates: Vec<String>,
    converts: Vec<String>,
}

impl Info {
    /// Name (a DNS label), version, primary kind.
    pub fn new(name: &str, version: &str, primary: Gvk) -> Self {
        Info {
            name: name.into(),
            version: version.into(),
            primary,
            owns: vec![],
            reads: vec![],
            finalizes: false,
            validates: false,
            mutates: vec![],
            converts: vec![],
        }
    }
    /// Adds a kind the plugin creates and controls, in its primary's namespace (for a
    /// cluster-scoped primary: anywhere), with a controller owner reference the host sets: the
    /// garbage collector deletes them with the primary.
    pub fn owns(mut self, gvk: Gvk) -> Self {
        self.owns.push((gvk, false));
        self
    }
    /// Adds a kind the plugin creates in any namespace it is granted (or cluster-scoped),
    /// tracked by the host's labels instead of owner references. Nothing deletes these objects
    /// but the plugin's own [`Reconciler::finalize`], so this needs [`Info::finalizes`].
    pub fn owns_across_namespaces(mut self, gvk: Gvk) -> Self {
        self.owns.push((gvk, true));
        self
    }
    /// Adds a kind the plugin only reads.
    pub fn reads(mut self, gvk: Gvk) -> Self {
        self.reads.push(gvk);
        self
    }
    /// The plugin cleans up when a primary is deleted: the host keeps the finalizer
    /// `kwop.dev/<name>` on every primary and calls [`Reconciler::finalize`] when one is being
    /// deleted, until it says done.
    pub fn finalizes(mut self) -> Self {
        self.finalizes = true;
        self
    }
    /// The plugin checks its primaries before the API server stores them: a host serving
    /// admission calls [`Reconciler::validate`] for every CREATE and UPDATE of one.
    pub fn validates(mut self) -> Self {
        self.validates = true;
        self
    }
    /// The plugin sets defaults before the API server stores a primary: a host serving admission
    /// calls [`Reconciler::mutate`] for every CREATE and UPDATE, and refuses a mutation that
    /// changes anything but these dotted paths (`spec.replicas`; a path covers what is under it).
    pub fn mutates(mut self, path: &str) -> Self {
        self.mutates.push(path.into());
        self
    }
    /// The plugin converts its primary between these versions of the CRD (the primary's version
    /// among them): where an admin grants it the CRD's conversion, the API server calls
    /// [`Reconciler::convert`] whenever it reads or writes one version as another.
    pub fn converts(mut self, versions: &[&str]) -> Self {
        self.converts = versions.iter().map(|v| v.to_string()).collect();
        self
    }
    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The kinds it owns, and whether each is owned across namespaces.
    pub fn owned_kinds(&self) -> &[(Gvk, bool)] {
        &self.owns
    }
}

/// The metadata fields most plugins need from their primary.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Namespace (absent for cluster-scoped objects).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// UID.
    #[serde(default)]
    pub uid: String,
    /// Generation: what `status.observedGeneration` and a condition's `observedGeneration` say
    /// the status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Set while the object is being deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
}

/// Event severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// As expected.
    Normal,
    /// Needs attention.
    Warning,
}

/// An event recorded on the primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Normal or Warning.
    pub severity: Severity,
    /// PascalCase reason.
    pub reason: String,
    /// Message.
    pub message: String,
}

impl Event {
    /// A Normal event.
    pub fn normal(reason: &str, message: impl Into<String>) -> Self {
        Event { severity: Severity::Normal, reason: reason.into(), message: message.into() }
    }
    /// A Warning event.
    pub fn warning(reason: &str, message: impl Into<String>) -> Self {
        Event { severity: Severity::Warning, reason: reason.into(), message: message.into() }
    }
    pub(crate) fn wit(self) -> wit::Event {
        wit::Event {
            severity: match self.severity {
                Severity::Normal => wit::EventType::Normal,
                Severity::Warning => wit::EventType::Warning,
            },
            reason: self.reason,
            message: self.message,
            regarding: None,
        }
    }
}

/// An object to delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delete {
    /// Kind.
    pub gvk: Gvk,
    /// Namespace (`None`: the primary's, or cluster-scoped).
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

/// Logging into the host's log (tagged with plugin and object, rate-limited by the host). In
/// native code (unit tests) the lines are kept instead: read them with [`testing::logs`].
pub mod log {
    #[cfg(target_arch = "wasm32")]
    fn log(level: super::testing::Level, m: &str) {
        use super::testing::Level as L;
        use super::wit_log::Level;
        let level = match level {
            L::Debug => Level::Debug,
            L::Info => Level::Info,
            L::Warn => Level::Warn,
            L::Error => Level::Error,
        };
        super::wit_log::log(level, m)
    }
    #[cfg(not(target_arch = "wasm32"))]
    fn log(level: super::testing::Level, m: &str) {
        super::testing::record_log(level, m)
    }
    /// Debug line.
    pub fn debug(m: &str) {
        log(super::testing::Level::Debug, m)
    }
    /// Info line.
    pub fn info(m: &str) {
        log(super::testing::Level::Info, m)
    }
    /// Warning line.
    pub fn warn(m: &str) {
        log(super::testing::Level::Warn, m)
    }
    /// Error line.
    pub fn error(m: &str) {
        log(super::testing::Level::Error, m)
    }
}

/// A reconcile plugin.
pub trait Reconciler {
    /// The primary object's type (derive `Deserialize` for it).
    type Primary: DeserializeOwned;
    /// What the plugin reconciles, owns and reads.
    fn info() -> Info;
    /// One reconcile of a primary that is not being deleted.
    fn reconcile(primary: Self::Primary, ctx: &Context) -> Result<Outcome, Failure>;
    /// Cleans up for a primary being deleted; called only if [`Info::finalizes`]. Return
    /// [`Finalize::done`] with the deletions that finish the cleanup (the host makes them, then
    /// removes its finalizer), or [`Finalize::not_yet`] to be called again. The default is done
    /// at once, deleting nothing.
    fn finalize(primary: Self::Primary, ctx: &Context) -> Result<Finalize, Failure> {
        let _ = (primary, ctx);
        Ok(Finalize::done())
    }
    /// Checks a primary the API server is about to store; called only if [`Info::validates`].
    /// `Ok(warnings)` allows it (kubectl prints each warning), `Err(violations)` refuses it (at
    /// least one; kubectl prints them). Reads through `ctx` as `reconcile` does; nothing it
    /// decides is written. The default allows everything.
    fn validate(req: Admission<Self::Primary>, ctx: &Context) -> Result<Vec<String>, Vec<Violation>> {
        let _ = (req, ctx);
        Ok(Vec::new())
    }
    /// Sets defaults on a primary the API server is about to store; called only if the plugin
    /// declared [`Info::mutates`]. Return the whole object as it should be stored
    /// ([`Mutation::new`]; the host computes the patch and refuses changes outside the declared
    /// paths) or violations to refuse it. The object is untyped so that fields your primary
    /// type does not know are kept. The default changes nothing.
    fn mutate(req: Admission<serde_json::Value>, ctx: &Context) -> Result<Mutation, Vec<Violation>> {
        let _ = ctx;
        Ok(Mutation::new(req.object))
    }
    /// Converts one object of the primary's CRD to `api_version` (`group/version`); called only
    /// if the plugin declared [`Info::converts`]. Return the converted object (its `metadata`
    /// untouched, `apiVersion` set to the one asked), or why it cannot be converted. A
    /// conversion must round-trip: A → B → A gives A back (the host checks). The default refuses.
    fn convert(object: serde_json::Value, api_version: &str) -> Result<serde_json::Value, String> {
        let _ = object;
        Err(format!("this plugin does not convert (asked for {api_version})"))
    }
}

fn to_failure(f: Failure) -> bindings::Failure {
    bindings::Failure { message: f.message, events: f.events.into_iter().map(Event::wit).collect(), retry: f.retry }
}

fn parse_primary<R: Reconciler>(req: &bindings::Request) -> Result<R::Primary, bindings::Failure> {
    serde_json::from_str(&req.primary)
        .map_err(|e| to_failure(Failure::permanent(format!("the primary object does not parse: {e}"))))
}

fn deletes(list: Vec<Delete>) -> Vec<wit::ObjectRef> {
    list.into_iter()
        .map(|d| wit::ObjectRef { gvk: d.gvk.wit(), cluster: None, namespace: d.namespace, name: d.name })
        .collect()
}

#[doc(hidden)]
pub fn __info<R: Reconciler>() -> bindings::PluginInfo {
    let i = R::info();
    bindings::PluginInfo {
        name: i.name,
        version: i.version,
        primary: i.primary.wit(),
        owns: i
            .owns
            .iter()
            .map(|(g, across)| wit::OwnedKind { kind: g.wit(), across_namespaces: *across, across_clusters: false })
            .collect(),
        reads: i.reads.iter().map(|g| wit::ReadKind { kind: g.wit(), across_clusters: false }).collect(),
        descendants: vec![],
        connects: vec![],
        finalizes: i.finalizes,
        validates: i.validates,
        mutates: i.mutates,
        converts: i.converts,
    }
}

#[doc(hidden)]
pub fn __reconcile<R: Reconciler>(req: bindings::Request) -> Result<bindings::Outcome, bindings::Failure> {
    let primary = parse_primary::<R>(&req)?;
    let ctx = Context::host(req.owned.into_iter().map(|o| o.object).collect(), Time::from_wit(&req.now));
    let o = R::reconcile(primary, &ctx).map_err(to_failure)?;
    Ok(bindings::Outcome {
        apply: o.apply.into_iter().map(|object| wit::Intent { object, cluster: None }).collect(),
        delete: deletes(o.delete),
        label: vec![],
        generate: vec![],
        status: o.status,
        events: o.events.into_iter().map(Event::wit).collect(),
        requeue_after_ms: o.requeue_after_ms,
    })
}

#[doc(hidden)]
pub fn __finalize<R: Reconciler>(req: bindings::Request) -> Result<bindings::FinalizeOutcome, bindings::Failure> {
    let primary = parse_primary::<R>(&req)?;
    let ctx = Context::host(req.owned.into_iter().map(|o| o.object).collect(), Time::from_wit(&req.now));
    let f = R::finalize(primary, &ctx).map_err(to_failure)?;
    Ok(bindings::FinalizeOutcome {
        delete: deletes(f.delete),
        label: vec![],
        status: f.status,
        events: f.events.into_iter().map(Event::wit).collect(),
        done: f.done,
        requeue_after_ms: f.requeue_after_ms,
    })
}

#[doc(hidden)]
pub fn __validate<R: Reconciler>(req: bindings::AdmissionRequest) -> Result<Vec<String>, Vec<bindings::Violation>> {
    let now = Time::from_wit(&req.now);
    let req = admission::from_wit::<R::Primary>(req).map_err(|v| vec![v.wit()])?;
    let ctx = Context::host(Vec::new(), now);
    R::validate(req, &ctx).map_err(|vs| vs.into_iter().map(Violation::wit).collect())
}

#[doc(hidden)]
pub fn __mutate<R: Reconciler>(
    req: bindings::AdmissionRequest,
) -> Result<bindings::Mutation, Vec<bindings::Violation>> {
    let now = Time::from_wit(&req.now);
    let req = admission::from_wit::<serde_json::Value>(req).map_err(|v| vec![v.wit()])?;
    let ctx = Context::host(Vec::new(), now);
    let m = R::mutate(req, &ctx).map_err(|vs| vs.into_iter().map(Violation::wit).collect::<Vec<_>>())?;
    let object = serde_json::to_string(&m.object).map_err(|e| vec![Violation::object(e.to_string()).wit()])?;
    Ok(bindings::Mutation { object, warnings: m.warnings })
}

#[doc(hidden)]
pub fn __convert<R: Reconciler>(req: bindings::ConversionRequest) -> Result<String, String> {
    let object: serde_json::Value =
        serde_json::from_str(&req.object).map_err(|e| format!("the object does not parse: {e}"))?;
    let out = R::convert(object, &req.desired_api_version)?;
    serde_json::to_string(&out).map_err(|e| e.to_string())
}

/// Exports a [`Reconciler`] as the plugin's WIT world.
#[macro_export]
macro_rules! export {
    ($t:ty) => {
        #[doc(hidden)]
        pub struct __KwopGuest;
        impl $crate::bindings::Guest for __KwopGuest {
            fn info() -> $crate::bindings::PluginInfo {
                $crate::__info::<$t>()
            }
            fn reconcile(req: $crate::bindings::Request) -> Result<$crate::bindings::Outcome, $crate::bindings::Failure> {
                $crate::__reconcile::<$t>(req)
            }
            fn finalize(
                req: $crate::bindings::Request,
            ) -> Result<$crate::bindings::FinalizeOutcome, $crate::bindings::Failure> {
                $crate::__finalize::<$t>(req)
            }
            fn validate(
                req: $crate::bindings::AdmissionRequest,
            ) -> Result<Vec<String>, Vec<$crate::bindings::Violation>> {
                $crate::__validate::<$t>(req)
            }
            fn mutate(
                req: $crate::bindings::AdmissionRequest,
            ) -> Result<$crate::bindings::Mutation, Vec<$crate::bindings::Violation>> {
                $crate::__mutate::<$t>(req)
            }
            fn convert(req: $crate::bindings::ConversionRequest) -> Result<String, String> {
                $crate::__convert::<$t>(req)
            }
        }
        $crate::bindings::__export_reconciler!(__KwopGuest with_types_in $crate::bindings);
    };
}
