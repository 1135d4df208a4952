//! kwop: a Kubernetes operator host whose reconcile logic runs as WebAssembly components.
//!
//! ```text
//!  kube-apiserver ──watch──► watch/ (reflector stores, stripped) ──► controller/ queue
//!        ▲                        ▲ cache reads (plugin/host_api)        │ one reconcile
//!        │                        └──────────── plugin/ (wasmtime) ◄─────┘
//!        └── apply/ (SSA, status, deletes) ◄── outcome/ (decode + fence) ◄── outcome
//! ```
//!
//! Module map: [`plugin`] runs components; [`outcome`] decodes and fences what they return;
//! [`watch`] derives watches and caches from a plugin's declaration; [`controller`] is the queue
//! and the reconcile spine; [`apply`] is the only writer; [`report`] records events;
//! [`source`] is where plugins come from (folder, ReconcilerPlugins, OCI); [`hotswap`] loads
//! and swaps them; [`shadow`] runs candidates beside the active version and records reconciles
//! for replay; [`leader`] gates controllers on a Lease; [`finalize`] is the deletion lifecycle
//! of primaries whose plugin finalizes; [`admission`] serves plugins that validate as a
//! validating webhook; [`shard`] shares the primaries among replicas (`--sharding`);
//! [`telemetry`] serves metrics and probes; [`cli`] is the command line.

pub mod admission;
pub mod apply;
pub mod cli;
pub mod controller;
pub mod hotswap;
pub mod leader;
pub mod offline;
pub mod outcome;
pub mod plugin;
pub mod report;
pub mod scaffold;
pub mod schema;
pub mod shadow;
pub mod shard;
pub mod source;
pub mod telemetry;
pub mod vocab;
pub mod watch;
