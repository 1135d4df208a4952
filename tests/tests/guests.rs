//! Reconcilers in other languages (issue 8): the Foo plugin in Rust, JavaScript, Python and C
//! passes the same conformance fixtures, and the host runs the JS and Python ones on a real
//! control plane. The components are built by `scripts/build-guests` (called by `scripts/test`)
//! into `$CARGO_TARGET_DIR/guests`; without them these tests fail and say so.

mod common;

use common::*;
use kwop_tests::{ControlPlane, Mode};
use std::path::PathBuf;
use std::process::Command;

fn guest(name: &str) -> PathBuf {
    let dir = std::env::var_os("KWOP_GUESTS_DIR").map(PathBuf::from).unwrap_or_else(|| {
        std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| kwop_tests::repo_root().join("target"))
            .join("guests")
    });
    let path = dir.join(format!("{name}.wasm"));
    assert!(path.is_file(), "{} is missing: run scripts/build-guests (scripts/test does)", path.display());
    path
}

fn kwop(args: &[&str]) -> (bool, String) {
    let out = Command::new(KWOP).args(args).output().expect("kwop runs");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn passes_fixtures(name: &str) {
    let file = guest(name);
    let fixtures = kwop_tests::repo_root().join("tests/fixtures/foo");
    let (ok, out) = kwop(&["plugin", "test", &file.display().to_string(), &fixtures.display().to_string()]);
    assert!(ok && out.contains("13 passed, 0 failed"), "{name}:\n{out}");
}

#[test]
fn rust_guest_passes_the_fixtures() {
    passes_fixtures("foo-rust");
}

#[test]
fn javascript_guest_passes_the_fixtures() {
    passes_fixtures("foo-js");
}

#[test]
fn python_guest_passes_the_fixtures() {
    passes_fixtures("foo-py");
}

#[test]
fn c_guest_passes_the_fixtures() {
    passes_fixtures("foo-c");
}

async fn reconciles_on_the_cluster(name: &str, plugin_name: &str) -> anyhow::Result<()> {
    let file = guest(name);
    // Compile once (into the shared precompile cache) before the host loads it.
    let (ok, out) = kwop(&["plugin", "inspect", &file.display().to_string()]);
    assert!(ok && out.contains(plugin_name), "{out}");
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace(&format!("guest-{name}"))?;
    let dir = kwop_tests::plugins::folder(&[(&format!("{name}.wasm"), &file.display().to_string())])?;
    let host = host(plane, &dir, &[&format!("--namespace={ns}")])?;
    let client = plane.client().await?;
    create_foo(&client, &ns, "polyglot", "polyglot", Some(2)).await?;
    deployment_where(&client, &ns, "polyglot", "the Deployment", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(2)
    })
    .await?;
    foo_status_where(&client, &ns, "polyglot", "status", |s| s["availableReplicas"] == 0).await?;
    event_with_reason(&client, &ns, "polyglot", "Synced").await?;
    assert!(host.metric("kwop_reconcile_total", &[("plugin", plugin_name), ("result", "success")])? >= 1.0);
    assert_eq!(host.metric("kwop_plugin_errors_total", &[])?, 0.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_host_runs_the_javascript_guest() -> anyhow::Result<()> {
    reconciles_on_the_cluster("foo-js", "guest-foo-js").await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_host_runs_the_python_guest() -> anyhow::Result<()> {
    reconciles_on_the_cluster("foo-py", "guest-foo-py").await
}
