//! kwop-guest: write a kwop reconcile plugin in Rust without touching the WIT bindings.
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

#[doc(hidden)]
#[allow(unsafe_code, missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../reconciler.wit",
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
use serde_json::Value;

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

    fn wit(&self) -> wit::Gvk {
        wit::Gvk { group: self.group.clone(), version: self.version.clone(), kind: self.kind.clone() }
    }
}

/// What the plugin is and what it may touch.
#[derive(Debug, Clone)]
pub struct Info {
    name: String,
    version: String,
    primary: Gvk,
    owns: Vec<Gvk>,
    reads: Vec<Gvk>,
}

impl Info {
    /// Name (a DNS label), version, primary kind.
    pub fn new(name: &str, version: &str, primary: Gvk) -> Self {
        Info { name: name.into(), version: version.into(), primary, owns: vec![], reads: vec![] }
    }
    /// Adds a kind the plugin creates and controls.
    pub fn owns(mut self, gvk: Gvk) -> Self {
        self.owns.push(gvk);
        self
    }
    /// Adds a kind the plugin only reads.
    pub fn reads(mut self, gvk: Gvk) -> Self {
        self.reads.push(gvk);
        self
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
    /// Generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
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
    fn wit(self) -> wit::Event {
        wit::Event {
            severity: match self.severity {
                Severity::Normal => wit::EventType::Normal,
                Severity::Warning => wit::EventType::Warning,
            },
            reason: self.reason,
            message: self.message,
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

/// What should change.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    apply: Vec<String>,
    delete: Vec<Delete>,
    status: Option<String>,
    events: Vec<Event>,
    requeue_after_ms: Option<u64>,
}

impl Outcome {
    /// Nothing to change.
    pub fn new() -> Self {
        Outcome::default()
    }
    /// Adds a server-side apply intent (any serialisable object with apiVersion, kind, metadata.name).
    pub fn apply<T: Serialize>(mut self, object: &T) -> Result<Self, Failure> {
        let text = serde_json::to_string(object)
            .map_err(|e| Failure::permanent(format!("cannot serialise an intent: {e}")))?;
        self.apply.push(text);
        Ok(self)
    }
    /// Adds a deletion.
    pub fn delete(mut self, d: Delete) -> Self {
        self.delete.push(d);
        self
    }
    /// Sets the primary's status (the value of its `status` field).
    pub fn status<T: Serialize>(mut self, status: &T) -> Result<Self, Failure> {
        self.status = Some(
            serde_json::to_string(status)
                .map_err(|e| Failure::permanent(format!("cannot serialise the status: {e}")))?,
        );
        Ok(self)
    }
    /// Adds an event.
    pub fn event(mut self, e: Event) -> Self {
        self.events.push(e);
        self
    }
    /// Asks to be reconciled again after `ms` milliseconds.
    pub fn requeue_after_ms(mut self, ms: u64) -> Self {
        self.requeue_after_ms = Some(ms);
        self
    }

    /// The intents to apply, as JSON text (what the host receives).
    pub fn applied(&self) -> &[String] {
        &self.apply
    }
    /// The `i`-th intent parsed as `T` (e.g. a k8s-openapi `ConfigMap`, or `serde_json::Value`);
    /// `None` if there is no such intent or it does not parse as `T`.
    pub fn applied_as<T: DeserializeOwned>(&self, i: usize) -> Option<T> {
        serde_json::from_str(self.apply.get(i)?).ok()
    }
    /// The deletions.
    pub fn deletes(&self) -> &[Delete] {
        &self.delete
    }
    /// The status as JSON, if one is set.
    pub fn status_json(&self) -> Option<Value> {
        serde_json::from_str(self.status.as_deref()?).ok()
    }
    /// The events.
    pub fn events(&self) -> &[Event] {
        &self.events
    }
    /// The requeue hint.
    pub fn requeue_after(&self) -> Option<u64> {
        self.requeue_after_ms
    }
}

/// A reconcile that could not decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What went wrong.
    pub message: String,
    /// Events to record.
    pub events: Vec<Event>,
    /// Retry with backoff?
    pub retry: bool,
}

impl Failure {
    /// A failure worth retrying with backoff.
    pub fn retry(message: impl Into<String>) -> Self {
        Failure { message: message.into(), events: vec![], retry: true }
    }
    /// A failure only a change of the primary can fix (no retry).
    pub fn permanent(message: impl Into<String>) -> Self {
        Failure { message: message.into(), events: vec![], retry: false }
    }
    /// Adds an event.
    pub fn event(mut self, e: Event) -> Self {
        self.events.push(e);
        self
    }
}

/// The host's caches, read-only, for the kinds the plugin declared.
///
/// In a plugin the host builds it; in native unit tests build one with [`Context::fake`] (a
/// [`testing::FakeCache`] stands in for the host's cache).
pub struct Context {
    owned: Vec<String>,
    source: Source,
}

enum Source {
    Host,
    Fake { cache: testing::FakeCache, namespace: Option<String> },
}

impl Context {
    /// A context for native unit tests: reads answer from `cache`, `namespace` is the primary's
    /// (what `None` means for namespaced kinds, as in the host), and the objects the primary
    /// controls are those of `cache` whose controller owner reference has the primary's `uid`.
    pub fn fake(cache: testing::FakeCache, namespace: Option<&str>, uid: &str) -> Self {
        let owned = cache.controlled_by(uid, namespace);
        Context { owned, source: Source::Fake { cache, namespace: namespace.map(str::to_string) } }
    }

    fn cache_get(&self, gvk: &Gvk, namespace: Option<&str>, name: &str) -> Option<String> {
        match &self.source {
            Source::Host => cache::get(&gvk.wit(), namespace, name),
            Source::Fake { cache, namespace: primary } => cache.get(gvk, namespace.or(primary.as_deref()), name),
        }
    }

    fn cache_query(&self, gvk: &Gvk, namespace: Option<&str>, selector: Option<&str>) -> Vec<String> {
        match &self.source {
            Source::Host => cache::query(&gvk.wit(), namespace, selector),
            Source::Fake { cache, .. } => cache.query(gvk, namespace, selector),
        }
    }

    /// One object of a k8s-openapi type, e.g. `ctx.get::<Deployment>(Some("ns"), "name")`.
    /// `None` as the namespace means the primary's (for namespaced kinds). An object that does
    /// not parse as `K` reads as absent (and is logged).
    #[cfg(feature = "k8s-openapi")]
    pub fn get<K: k8s_openapi::Resource + DeserializeOwned>(&self, namespace: Option<&str>, name: &str) -> Option<K> {
        self.get_as(&Gvk::of::<K>(), namespace, name)
    }

    /// One object of any kind, as any deserialisable type (`serde_json::Value` for untyped).
    pub fn get_as<T: DeserializeOwned>(&self, gvk: &Gvk, namespace: Option<&str>, name: &str) -> Option<T> {
        let text = self.cache_get(gvk, namespace, name)?;
        parse(&text, gvk)
    }

    /// Objects of a kind, in a namespace (or all), matching a label selector (or all).
    pub fn query_as<T: DeserializeOwned>(&self, gvk: &Gvk, namespace: Option<&str>, selector: Option<&str>) -> Vec<T> {
        self.cache_query(gvk, namespace, selector).iter().filter_map(|t| parse(t, gvk)).collect()
    }

    /// The objects of a kind the primary controls (from the request, no cache call).
    #[cfg(feature = "k8s-openapi")]
    pub fn owned<K: k8s_openapi::Resource + DeserializeOwned>(&self) -> Vec<K> {
        self.owned
            .iter()
            .filter_map(|t| serde_json::from_str::<Value>(t).ok())
            .filter(|v| {
                v.get("kind").and_then(Value::as_str) == Some(K::KIND)
                    && v.get("apiVersion").and_then(Value::as_str) == Some(K::API_VERSION)
            })
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect()
    }

    /// Every owned object, untyped.
    pub fn owned_json(&self) -> Vec<Value> {
        self.owned.iter().filter_map(|t| serde_json::from_str(t).ok()).collect()
    }
}

fn parse<T: DeserializeOwned>(text: &str, gvk: &Gvk) -> Option<T> {
    match serde_json::from_str(text) {
        Ok(v) => Some(v),
        Err(e) => {
            log::error(&format!("cached {}/{} does not parse as the requested type: {e}", gvk.group, gvk.kind));
            None
        }
    }
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

pub mod testing;

/// A reconcile plugin.
pub trait Reconciler {
    /// The primary object's type (derive `Deserialize` for it).
    type Primary: DeserializeOwned;
    /// What the plugin reconciles, owns and reads.
    fn info() -> Info;
    /// One reconcile.
    fn reconcile(primary: Self::Primary, ctx: &Context) -> Result<Outcome, Failure>;
}

#[doc(hidden)]
pub fn __info<R: Reconciler>() -> bindings::PluginInfo {
    let i = R::info();
    bindings::PluginInfo {
        name: i.name,
        version: i.version,
        primary: i.primary.wit(),
        owns: i.owns.iter().map(Gvk::wit).collect(),
        reads: i.reads.iter().map(Gvk::wit).collect(),
    }
}

#[doc(hidden)]
pub fn __reconcile<R: Reconciler>(req: bindings::Request) -> Result<bindings::Outcome, bindings::Failure> {
    let to_failure = |f: Failure| bindings::Failure {
        message: f.message,
        events: f.events.into_iter().map(Event::wit).collect(),
        retry: f.retry,
    };
    let primary: R::Primary = serde_json::from_str(&req.primary)
        .map_err(|e| to_failure(Failure::permanent(format!("the primary object does not parse: {e}"))))?;
    let ctx = Context { owned: req.owned, source: Source::Host };
    let o = R::reconcile(primary, &ctx).map_err(to_failure)?;
    Ok(bindings::Outcome {
        apply: o.apply,
        delete: o
            .delete
            .into_iter()
            .map(|d| wit::ObjectRef { gvk: d.gvk.wit(), namespace: d.namespace, name: d.name })
            .collect(),
        status: o.status,
        events: o.events.into_iter().map(Event::wit).collect(),
        requeue_after_ms: o.requeue_after_ms,
    })
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
        }
        $crate::bindings::__export_reconciler!(__KwopGuest with_types_in $crate::bindings);
    };
}
