//! The vocabulary: the words every floor of the host shares, and nothing else — group/version/
//! kinds, a plugin's declaration and what a cluster admin grants it, the ReconcilerPlugin
//! resource, the labels that track objects owned across namespaces, the finalizer and its
//! condition, label selectors, admission failure policies, and the units of sizes and durations.
//!
//! Floor 0: types and pure functions only — no I/O, no tasks, no API client. It uses no other
//! module of the crate; every other module may use it (as kube-rs keeps its types in kube-core).

pub mod crd;
pub mod finalize;
pub mod grants;
mod gvk;
mod info;
mod policy;
pub mod rbac;
pub mod selector;
pub mod tracking;
pub mod units;

pub use gvk::Gvk;
pub use info::{is_dns_label, PluginInfo, FIELD_MANAGER_PREFIX};
pub use policy::FailurePolicy;
