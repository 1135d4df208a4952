//! guest-foo: kubernetes/sample-controller's `syncHandler`, as a kwop plugin.
//!
//! The decision logic lives in [`sync`] — plain Rust over JSON values, unit-tested natively. The
//! WASM export (`component`, only on `wasm32`) is a thin shell that parses the request, reads the
//! Deployment from the host's cache and converts the result into the WIT types.

pub mod foo;

// The bindings wit-bindgen generates use `unsafe` for the canonical ABI; our code has none.
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)]
mod component;

pub use foo::{sync, Decision, Event, Failure, Severity};
