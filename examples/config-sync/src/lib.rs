//! config-sync: a kwop example plugin that keeps a copy of one source ConfigMap or Secret in every
//! namespace a label selector picks, within one cluster.
//!
//! A `ConfigSync` (`examples.kwop.dev/v1alpha1`, cluster-scoped) names the source
//! (`spec.source`: kind, namespace, name) and the namespaces (`spec.namespaceSelector`). Each
//! reconcile applies a copy (same name; `data`, `binaryData` and a Secret's `type`) into every
//! selected namespace except the source's own and those being deleted, deletes the copies no
//! longer wanted, and reports `status.synced`, `status.conflicts` and the `Ready` condition. An
//! object of the same kind and name that config-sync did not create is never touched: it is a
//! conflict. When the ConfigSync is deleted, `finalize` deletes every copy first.
//!
//! - [`types`]: the ConfigSync and narrow views of what the plugin reads;
//! - [`selector`]: the namespace selector as the host's selector string, validated;
//! - [`sync`]: the decisions, plain functions over typed inputs (unit-tested natively);
//! - [`plugin`]: the kwop-guest `Reconciler` around them, exported as the component on `wasm32`.

pub mod plugin;
pub mod selector;
pub mod sync;
pub mod types;

pub use plugin::ConfigSyncPlugin;
pub use sync::{cleanup, sync, Decision, World};
pub use types::{ConfigSync, ConfigSyncSpec, ConfigSyncStatus, CopyRef, Kind, LabelSelector, Requirement, SourceRef};
