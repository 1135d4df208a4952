//! Where plugins come from: the plugin folder, ReconcilerPlugin objects, OCI registries.

pub mod oci;
