//! guest-foo: kubernetes/sample-controller's `syncHandler`, as a kwop plugin.
//!
//! The decision logic lives in [`foo::sync`] — plain Rust over typed objects, unit-tested natively.
//! The plugin (`plugin`, on `wasm32` only) is the kwop-guest SDK's `Reconciler` wrapped around it.

pub mod convert;
pub mod foo;
pub mod intent;

#[cfg(target_arch = "wasm32")]
mod plugin;

pub use foo::{admit, reconcile_json, sync, Decision, Foo, FooSpec, FooStatus, Observed};
pub use kwop_guest::Time;
