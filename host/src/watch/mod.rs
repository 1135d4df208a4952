//! Watches derived from the plugins' declarations: discovery, one shared store per kind of
//! compact objects, owner mapping.
//!
//! Nothing here knows about Foo: kinds come from the plugin's `info()`, resolved through API
//! discovery, and every object is JSON text plus typed metadata (`object::Cached`).

pub mod caches;
pub mod discovery;
pub mod follow;
pub mod object;
mod owners;
pub mod pool;
pub mod view;

pub use caches::{Caches, KindCache, WatchEvent};
pub use discovery::{resolve, Resolved};
pub use object::Cached;
pub use pool::{Pool, Subscription};

/// Identity of a primary object in a queue: namespace (None when cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Namespace.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}
