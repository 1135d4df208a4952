//! The test harness: a real kube-apiserver + etcd (and, in full mode, kube-controller-manager,
//! kube-scheduler and kwok with a fake node) started on free loopback ports, like
//! controller-runtime's envtest; plus helpers to build plugins and run the kwop host.
//!
//! - Binaries come from `$KUBEBUILDER_ASSETS` or `scripts/k8s-bins` (built from Go modules).
//! - `KWOP_TEST_KUBECONFIG=/path` runs the tests against an existing cluster instead (kind, a
//!   real cluster): nothing is started, full mode is assumed.
//! - One shared plane per test binary ([`ControlPlane::shared`]); each test takes its own
//!   namespace. Every process is killed when the test binary exits, even on panic or Ctrl-C
//!   (`PR_SET_PDEATHSIG` from a keeper thread that lives as long as the process).
//! - [`registry::Registry`]: a real OCI registry (distribution) on loopback; [`image`]: OCI image
//!   layouts unpacked and run as a container runtime would.
//! - [`docs`]: the checks that keep README.md and docs/ true to the repository.
//! - [`otel::Collector`]: a real OpenTelemetry collector writing the spans it receives to a file;
//!   [`tools`]: the tools `scripts/tools` builds from Go modules (the collector, helm, cosign).

pub mod audit;
pub mod bench;
pub mod c_plugins;
pub mod certs;
pub mod docs;
pub mod foo_groups;
pub mod go_plugins;
pub mod host;
pub mod image;
pub mod js_plugins;
pub mod otel;
pub mod plane;
pub mod plugins;
pub mod procs;
pub mod promql;
pub mod proxy;
pub mod python_plugins;
pub mod registry;
pub mod scaffolds;
pub mod shards;
pub mod tools;
pub mod tree;
pub mod wait;
pub mod wat_plugin;

pub use host::Host;
pub use plane::{ControlPlane, Mode};

/// The repository root.
pub fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(|p| p.to_path_buf()).unwrap_or_default()
}
