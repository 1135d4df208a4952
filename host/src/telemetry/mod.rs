//! Metrics, health and readiness, served over HTTP.
//!
//! Floor 4 of 0–15 (`docs/ARCHITECTURE.md`). May use: `plugin`. Used by: `admission`, `cli`,
//! `controller`, `hotswap`, `shadow`, `source`, `watch`.

pub mod flight;
pub mod health;
pub mod http;
pub mod metrics;
pub mod traces;

pub use health::Health;
pub use metrics::Metrics;
