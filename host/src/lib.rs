//! kwop: a Kubernetes operator host whose reconcile logic runs as WebAssembly components.
//!
//! ```text
//!  kube-apiserver ──watch──► watch/ (shared caches) ──► controller/ queue
//!        ▲                        ▲ cache reads (plugin/host_api)        │ one reconcile
//!        │                        └──────────── plugin/ (wasmtime) ◄─────┘
//!        └── apply/ (SSA, status, deletes) ◄── outcome/ (decode + fence) ◄── outcome
//! ```
//!
//! Module map, one folder each, by floor (lowest first; a folder uses only folders on lower
//! floors — `tests/tests/house` checks it, `docs/ARCHITECTURE.md` says why):
//!
//! 0. [`vocab`]: the words every floor shares — kinds, a plugin's declaration and grants, the
//!    ReconcilerPlugin resource, tracking labels, the finalizer, selectors, failure policies,
//!    units.
//! 1. [`schema`]: offline schema checks (CRDs, built-in kinds); [`scaffold`]: `kwop plugin new`'s
//!    templates.
//! 2. [`plugin`]: the runtime — compiles, sandboxes and calls components.
//! 3. [`outcome`]: decodes what a plugin returns and fences it.
//! 4. [`telemetry`]: metrics, health and probes.
//! 5. [`leader`]: the Lease election and the write gate.
//! 6. [`shard`]: which primaries this replica holds (`--sharding`).
//! 7. [`watch`]: discovery and the shared caches, one per kind.
//! 8. [`apply`]: the only writer; [`report`]: events.
//! 9. [`shadow`]: candidates run beside the active version; recordings for replay.
//! 10. [`admission`]: plugins that validate, served as a validating webhook.
//! 11. [`controller`]: one per plugin — its queue and the reconcile spine.
//! 12. [`source`]: where plugins come from (folder, ReconcilerPlugins, OCI) and what a source
//!     and the supervisor tell each other.
//! 13. [`hotswap`]: the supervisor — loads, checks, swaps and stops plugins.
//! 14. [`offline`]: the offline engine (one reconcile or admission call from files).
//! 15. [`cli`]: the command line — `kwop run`, the `kwop plugin` tools and `kwop explain`.

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
