//! Shadow mode and record/replay (issue 18) on a real control plane and registry: a candidate
//! (`spec.candidate`) runs beside the active version on the same inputs and writes nothing;
//! `kwop run --record` writes fixtures that `kwop plugin replay` runs again, as docs/roll-out.md
//! shows it (the block is run from the guide's text).

mod common;

use common::rp::*;
use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams};
use kwop::vocab::crd::CandidateStatus;
use kwop_tests::registry::Registry;
use kwop_tests::wat_plugin::WatPlugin;
use kwop_tests::{plugins, wait, ControlPlane, Host, Mode};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

const V2_ANNOTATION: &str = "samplecontroller.k8s.io/reconciled-by";
const FOO_GROUP: &str = "samplecontroller.k8s.io/v1alpha1";

fn rp_host(plane: &ControlPlane, label: &str, registry: &str, ns: &str) -> anyhow::Result<Host> {
    let args = [
        format!("--reconciler-plugin-selector=kwop.dev/test={label}"),
        format!("--insecure-registry={registry}"),
        format!("--namespace={ns}"),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Host::start_reconciler_plugins(KWOP, plane, &plane.kubeconfig, &args, &[], true)
}

fn has_v2(d: &Deployment) -> bool {
    d.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(V2_ANNOTATION))
}

async fn candidate_where(
    client: &kube::Client,
    name: &str,
    what: &str,
    pred: impl Fn(&CandidateStatus) -> bool,
) -> anyhow::Result<CandidateStatus> {
    let s =
        status_where(client, name, what, Duration::from_secs(120), |s| s.candidate.as_ref().is_some_and(&pred)).await?;
    s.candidate.ok_or_else(|| anyhow::anyhow!("no candidate status"))
}

async fn create_foos(client: &kube::Client, ns: &str, n: usize) -> anyhow::Result<()> {
    for i in 0..n {
        create_foo(client, ns, &format!("foo-{i}"), &format!("dep-{i}"), Some(1)).await?;
    }
    for i in 0..n {
        foo_status_where(client, ns, &format!("foo-{i}"), "status written", |s| s.get("availableReplicas").is_some())
            .await?;
    }
    Ok(())
}

fn kwop_writes(plane: &ControlPlane, ns: &str) -> Vec<String> {
    plane
        .audited("kwop/")
        .into_iter()
        .filter(|w| w.namespace == ns)
        .map(|w| format!("{} {} {}", w.verb, w.resource, w.name))
        .collect()
}

/// The shadow block of docs/roll-out.md, run as written against `plane` with the
/// ReconcilerPlugin's name and the candidate's reference replaced: what it printed.
fn shadow_as_the_guide_shows(plane: &ControlPlane, name: &str, reference: &str) -> anyhow::Result<String> {
    const GUIDE: &str = "docs/roll-out.md";
    let guide = std::fs::read_to_string(kwop_tests::repo_root().join(GUIDE))?;
    let test = "a_candidate_like_the_active_version_agrees_and_v2_differs_on_every_foo_without_writing";
    let mut block = kwop_tests::docs::run_by_block(&guide, "tests/tests/shadow.rs", test)
        .ok_or_else(|| anyhow::anyhow!("{GUIDE} has no sh block marked run-by this test"))?;
    for (from, to) in
        [("registry.example.com/plugins/foo-info:0.2.0", reference), ("rp foo-info ", &format!("rp {name} "))]
    {
        anyhow::ensure!(block.contains(from), "{GUIDE}'s shadow block no longer says {from}: {block}");
        block = block.replace(from, to);
    }
    let path = format!("{}:{}", plane.bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = std::process::Command::new("bash")
        .args(["-c", &format!("set -euo pipefail\n{block}")])
        .env("PATH", path)
        .env("KUBECONFIG", &plane.kubeconfig)
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    anyhow::ensure!(out.status.success(), "{block}\n{text}{}", String::from_utf8_lossy(&out.stderr));
    Ok(text)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_candidate_like_the_active_version_agrees_and_v2_differs_on_every_foo_without_writing() -> anyhow::Result<()>
{
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let ns = plane.namespace("shadow")?;
    let reg = Registry::start()?;
    let hp = reg.host_port();
    push(&hp, Path::new(plugins::GUEST_FOO), &format!("{hp}/guest-foo:v1"))?;
    push(&hp, Path::new(plugins::GUEST_FOO_V2), &format!("{hp}/guest-foo:v2"))?;
    let name = format!("guest-foo-{ns}");
    let spec = json!({
        "source": { "oci": format!("{hp}/guest-foo:v1") },
        "candidate": { "oci": format!("{hp}/guest-foo:v1") },
        "grants": foo_grants(FOO_GROUP),
    });
    apply_rp(&client, &name, &ns, spec).await?;
    let host = rp_host(plane, &ns, &hp, &ns)?;
    status_where(&client, &name, "Ready", Duration::from_secs(60), ready).await?;
    const N: usize = 20;
    create_foos(&client, &ns, N).await?;
    let same = candidate_where(&client, &name, "the same version shadowed every Foo", |c| {
        c.state == "Running" && c.reconciled >= N as u64
    })
    .await?;
    assert_eq!((same.differing, same.failing), (0, 0), "an identical candidate agrees: {same:?}");
    assert_eq!(same.identical, same.reconciled);
    assert!(same.differences.is_empty());
    assert_eq!(host.metric("kwop_candidate_reconciles_total", &[("reason", "differing")])?, 0.0);

    // v2 as the candidate: every Foo is reconciled again (the swap re-queues them all), every
    // outcome differs by v2's annotation, and nothing v2 decided reaches the cluster.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = kwop_writes(plane, &ns);
    // Positive control: the audit log sees kwop's writes here (v1's Deployments, statuses, events).
    for what in ["deployments", "foos", "events"] {
        assert!(before.iter().any(|w| w.contains(what)), "no {what} write seen: {before:?}");
    }
    // As docs/roll-out.md shows it: kubectl patch, then kubectl get of status.candidate.
    let shown = shadow_as_the_guide_shows(plane, &name, &format!("{hp}/guest-foo:v2"))?;
    assert!(shown.contains("\"identical\""), "the guide's kubectl get shows status.candidate: {shown}");
    let v2 = digest_of(Path::new(plugins::GUEST_FOO_V2))?;
    let diff = candidate_where(&client, &name, "v2 differs on every Foo", |c| {
        c.digest.as_deref() == Some(v2.as_str()) && c.state == "Running" && c.differing >= N as u64
    })
    .await?;
    assert_eq!((diff.identical, diff.failing), (0, 0), "v2 never agrees, never fails: {diff:?}");
    assert_eq!(diff.version.as_deref(), Some("0.1.0-v2"), "{diff:?}");
    assert!(!diff.differences.is_empty());
    for d in &diff.differences {
        assert!(
            d.paths.iter().any(|p| {
                p.starts_with(&format!(".apply.Deployment.apps {ns}/dep-"))
                    && p.contains(".metadata.annotations")
                    && p.contains(V2_ANNOTATION)
            }),
            "the field path names v2's annotation: {d:?}"
        );
    }
    let log = host.log();
    for i in 0..N {
        let line = format!("object=\"{ns}/foo-{i}\"");
        assert!(
            log.lines().any(|l| l.contains("candidate differs") && l.contains(&line)),
            "foo-{i} was found differing"
        );
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = kwop_writes(plane, &ns);
    assert_eq!(after.len(), before.len(), "writes while v2 ran in shadow: {:?}", &after[before.len()..]);
    let deps: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let deps = deps.list(&ListParams::default()).await?.items;
    assert_eq!(deps.len(), N);
    assert!(deps.iter().all(|d| !has_v2(d)), "no Deployment carries v2's annotation");

    // Removing the candidate drops its status; the active version runs on.
    let api = rps(&client);
    let patch = json!({ "spec": { "candidate": null } });
    api.patch(&name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await?;
    status_where(&client, &name, "no candidate", Duration::from_secs(60), |s| s.candidate.is_none() && ready(s))
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_candidate_that_traps_is_failing_and_one_beyond_the_grants_is_refused_the_active_is_unaffected(
) -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let ns = plane.namespace("shadow-trap")?;
    let reg = Registry::start()?;
    let hp = reg.host_port();
    push(&hp, Path::new(plugins::GUEST_FOO), &format!("{hp}/guest-foo:v1"))?;
    push(&hp, Path::new(plugins::CHAOS), &format!("{hp}/chaos:v1"))?;
    let trap = WatPlugin {
        primary: ("samplecontroller.k8s.io".into(), "v1alpha1".into(), "Foo".into()),
        trap: true,
        ..WatPlugin::chaos("foo-trap")
    };
    let trap_file = std::env::temp_dir().join(format!("kwop-foo-trap-{}.wasm", std::process::id()));
    std::fs::write(&trap_file, trap.build()?)?;
    push(&hp, &trap_file, &format!("{hp}/foo-trap:v1"))?;
    let name = format!("guest-foo-{ns}");
    let spec = json!({
        "source": { "oci": format!("{hp}/guest-foo:v1") },
        "candidate": { "oci": format!("{hp}/chaos:v1") },
        "grants": foo_grants(FOO_GROUP),
    });
    apply_rp(&client, &name, &ns, spec).await?;
    let host = rp_host(plane, &ns, &hp, &ns)?;
    // A candidate for another primary kind is beyond the grants (the admin's, not its own).
    let c = candidate_where(&client, &name, "Forbidden", |c| c.state == "Forbidden").await?;
    assert!(
        c.message.unwrap_or_default().contains("is granted the primary samplecontroller.k8s.io"),
        "names the grant"
    );
    status_where(&client, &name, "the active version is Ready", Duration::from_secs(60), ready).await?;

    patch_spec(&client, &name, json!({ "candidate": { "oci": format!("{hp}/foo-trap:v1") } })).await?;
    candidate_where(&client, &name, "the trapping candidate runs", |c| c.state == "Running").await?;
    const N: usize = 5;
    create_foos(&client, &ns, N).await?;
    let c = candidate_where(&client, &name, "every shadowed reconcile failing", |c| c.failing >= N as u64).await?;
    assert_eq!((c.identical, c.differing), (0, 0), "{c:?}");
    assert!(
        c.differences.iter().all(|d| d.paths.iter().any(|p| p.contains("(candidate failed)") && p.contains("trap"))),
        "the trap is named: {c:?}"
    );
    // The active version is unaffected: every Foo converged, no reconcile failed, and the
    // candidate's failures left nothing on the Foos.
    for bad in ["plugin_error", "plugin_failure", "rejected", "write_error"] {
        assert_eq!(host.metric("kwop_reconcile_total", &[("result", bad)])?, 0.0, "{bad} reconciles");
    }
    for i in 0..N {
        let evs = events_for(&client, &ns, &format!("foo-{i}")).await?;
        assert!(evs.iter().all(|e| e.type_.as_deref() != Some("Warning")), "no warning on foo-{i}: {evs:?}");
    }
    assert!(host.metric("kwop_candidate_reconciles_total", &[("reason", "failing")])? >= N as f64);
    let _ = std::fs::remove_file(trap_file);
    Ok(())
}

fn recordings(dir: &Path) -> usize {
    let Ok(plugins) = std::fs::read_dir(dir) else { return 0 };
    plugins
        .flatten()
        .filter_map(|p| std::fs::read_dir(p.path()).ok())
        .flat_map(|r| r.flatten())
        .filter(|r| r.path().join("expected.json").is_file())
        .count()
}

/// The replay block of docs/roll-out.md, run as written with its plugin file and recordings folder
/// replaced (and `kwop` the binary under test): its JSON report and exit code.
fn replay(plugin: &str, dir: &Path) -> anyhow::Result<(i32, Value)> {
    const GUIDE: &str = "docs/roll-out.md";
    let guide = std::fs::read_to_string(kwop_tests::repo_root().join(GUIDE))?;
    let test = "a_hundred_recorded_reconciles_replay_identically_and_v2_lists_its_differences";
    let block = kwop_tests::docs::run_by_block(&guide, "tests/tests/shadow.rs", test)
        .ok_or_else(|| anyhow::anyhow!("{GUIDE} has no sh block marked run-by this test"))?;
    let (file, folder) = ("foo-info-0.2.0.wasm", "recordings/");
    anyhow::ensure!(block.contains(file) && block.contains(folder), "{GUIDE}'s replay block changed: {block}");
    let block = block.replace(file, &format!("'{plugin}'")).replace(folder, &format!("'{}'", dir.display()));
    let bin = dir.with_extension("bin");
    std::fs::create_dir_all(&bin)?;
    if !bin.join("kwop").exists() {
        std::os::unix::fs::symlink(KWOP, bin.join("kwop"))?;
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = std::process::Command::new("bash").args(["-c", &block]).env("PATH", path).output()?;
    let report: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| anyhow::anyhow!("replay printed no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)))?;
    Ok((out.status.code().unwrap_or(-1), report))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hundred_recorded_reconciles_replay_identically_and_v2_lists_its_differences() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let client = plane.client().await?;
    let ns = plane.namespace("record")?;
    let dir: PathBuf = std::env::temp_dir().join(format!("kwop-record-{}-{ns}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let folder = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    let record = format!("--record={}", dir.display());
    let host = host(plane, &folder, &[&format!("--namespace={ns}"), &record])?;
    const N: usize = 100;
    create_foos(&client, &ns, N).await?;
    wait::until("100 recordings", Duration::from_secs(60), || async {
        let n = recordings(&dir);
        if n >= N {
            Ok(Some(n))
        } else {
            Err(format!("{n} so far"))
        }
    })
    .await?;
    assert!(host.metric("kwop_reconciles_recorded_total", &[])? >= N as f64);
    drop(host);
    let n = recordings(&dir);

    let (code, same) = replay(plugins::GUEST_FOO, &dir)?;
    assert_eq!(code, 0, "{same}");
    assert_eq!(same["replayed"].as_u64(), Some(n as u64), "{same}");
    assert_eq!((same["differing"].as_u64(), same["unreadable"].as_u64()), (Some(0), Some(0)), "{same}");
    let v1 = digest_of(Path::new(plugins::GUEST_FOO))?;
    assert_eq!(same["recordedWith"], json!([v1.trim_start_matches("sha256:")]));

    let (code, v2) = replay(plugins::GUEST_FOO_V2, &dir)?;
    assert_eq!(code, 1, "differences exit 1: {v2}");
    // guest-foo applies its Deployment on every reconcile: every recording differs, by v2's
    // annotation.
    assert_eq!(v2["differing"].as_u64(), Some(n as u64), "{v2}");
    for d in v2["differences"].as_array().into_iter().flatten() {
        let paths: Vec<&str> = d["paths"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        assert!(paths.iter().any(|p| p.contains(V2_ANNOTATION)), "{d}");
        assert!(d["object"].as_str().is_some_and(|o| o.starts_with(&format!("{ns}/foo-"))), "{d}");
    }
    // A recording whose files are broken is reported, not skipped.
    let broken = dir.join("broken").join("x");
    std::fs::create_dir_all(&broken)?;
    std::fs::write(broken.join("primary.yaml"), "{}")?;
    std::fs::write(broken.join("expected.json"), "not json")?;
    let (code, r) = replay(plugins::GUEST_FOO, &dir)?;
    assert_eq!((code, r["unreadable"].as_u64()), (1, Some(1)), "{r}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(dir.with_extension("bin"));
    Ok(())
}
