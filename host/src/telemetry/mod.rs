//! Metrics, health and readiness, served over HTTP.

pub mod health;
pub mod http;
pub mod metrics;

pub use health::Health;
pub use metrics::Metrics;
