//! Hot swap: loads new and changed plugins from their source (the plugin folder, or the
//! ReconcilerPlugin objects of a cluster), keeps the last good version of each when a new one is
//! rejected, swaps between reconciles, stops removed ones (deleting nothing in the cluster), and
//! holds one active plugin per primary kind.
//!
//! Works with a plain folder and with a mounted ConfigMap, where the kubelet replaces a `..data`
//! symlink atomically and each `name.wasm` is a symlink through it: every change in the folder
//! triggers a full rescan by content hash, so how a file got replaced does not matter.

mod drive;
mod load;
mod slot;
pub mod supervisor;

pub use supervisor::Supervisor;
