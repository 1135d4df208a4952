//! `kwop explain` (issue 37) on a real control plane: one host running guest-foo as a
//! ReconcilerPlugin granted one namespace, resyncing every 2 s, and the words it prints for a
//! Deployment hand-edited and healed, a Foo whose plugin failed, a memoized in-sync Foo and a Foo
//! outside the plugin's grants; also through real kubectl as `kubectl kwop`, and what it says
//! when there is nothing to ask or nothing known.

mod common;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kwop_tests::{plugins, wait, ControlPlane, Host, Mode};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::sync::OnceCell;

/// The one host of this binary and its two namespaces: `granted` (the plugin's) and `outside`.
struct World {
    plane: &'static ControlPlane,
    granted: String,
    outside: String,
    host: Host,
}

const RP: &str = "explain-foo";

async fn world() -> anyhow::Result<&'static World> {
    static WORLD: OnceCell<World> = OnceCell::const_new();
    WORLD.get_or_try_init(start).await
}

async fn start() -> anyhow::Result<World> {
    use base64::Engine as _;
    let plane = ControlPlane::shared(Mode::Api)?;
    let (granted, outside) = (plane.namespace("explain")?, plane.namespace("explain-outside")?);
    let client = plane.client().await?;
    let wasm = base64::engine::general_purpose::STANDARD.encode(std::fs::read(plugins::GUEST_FOO)?);
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "plugins" }, "binaryData": { "guest-foo.wasm": wasm },
    }))?;
    Api::<ConfigMap>::namespaced(client.clone(), &granted).create(&PostParams::default(), &cm).await?;
    let mut grants = rp::foo_grants("samplecontroller.k8s.io/v1alpha1");
    grants["namespaces"] = json!([granted]);
    let spec = json!({ "source": { "configMap": { "name": "plugins", "key": "guest-foo.wasm" } }, "grants": grants });
    rp::apply_rp(&client, RP, &granted, spec).await?;
    let host = Host::start_reconciler_plugins(
        KWOP,
        plane,
        &plane.kubeconfig,
        &[
            &format!("--reconciler-plugin-selector=kwop.dev/test={granted}"),
            &format!("--system-namespace={granted}"),
            "--resync-period=2s",
        ],
        &[],
        true,
    )?;
    rp::status_where(&client, RP, "Ready", Duration::from_secs(120), rp::ready).await?;
    Ok(World { plane, granted, outside, host })
}

impl World {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.host.port)
    }
}

/// `kwop explain ARGS --url <the host>`: (exit code, stdout, stderr).
fn explain(w: &World, args: &[&str]) -> (i32, String, String) {
    let mut cmd = std::process::Command::new(KWOP);
    cmd.arg("explain").args(args).arg(format!("--url={}", w.url()));
    run(cmd)
}

fn run(cmd: std::process::Command) -> (i32, String, String) {
    let mut cmd = cmd;
    match cmd.output() {
        Ok(o) => (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        ),
        Err(e) => (-1, String::new(), format!("cannot run {cmd:?}: {e}")),
    }
}

/// Waits (30 s) until `kwop explain ARGS` exits 0 with every one of `want` in its words.
async fn says(w: &World, args: &[&str], want: &[&str]) -> anyhow::Result<String> {
    wait::until(&format!("kwop explain {} to say {want:?}", args.join(" ")), Duration::from_secs(30), || async {
        let (code, out, err) = explain(w, args);
        if code == 0 && want.iter().all(|s| out.contains(s)) {
            eprintln!("$ kwop explain {}\n{out}", args.join(" "));
            Ok(Some(out))
        } else {
            Err(format!("exit {code}:\n{out}{err}"))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deployment_edited_by_hand_and_healed_is_explained_by_the_field_that_differed() -> anyhow::Result<()> {
    let w = world().await?;
    let ns = &w.granted;
    let client = w.plane.client().await?;
    create_foo(&client, ns, "healed", "healed-web", Some(2)).await?;
    let replicas = |n: i32| move |d: &Deployment| d.spec.as_ref().and_then(|s| s.replicas) == Some(n);
    deployment_where(&client, ns, "healed-web", "the Deployment at 2", replicas(2)).await?;
    // As a person would: `kubectl patch` (its own field manager), then kwop puts it back.
    let patch = r#"{"spec":{"replicas":5}}"#;
    w.plane.kubectl_output(&["patch", "deployment", "healed-web", "-n", ns, "--type=merge", "-p", patch])?;
    deployment_where(&client, ns, "healed-web", "the Deployment healed back to 2", replicas(2)).await?;
    let out = says(
        w,
        &["deployment/healed-web", "-n", ns],
        &[
            &format!("Deployment {ns}/healed-web is written by plugin guest-foo for Foo {ns}/healed."),
            "kwop re-applied it: spec.replicas differed from the plugin's intent (a hand edit, or a change of the Foo \
             healed) — healed.",
        ],
    )
    .await?;
    // The creation came first, the heal after it.
    assert!(out.contains("Earlier writes of it") && out.contains("apply created"), "{out}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_foo_whose_plugin_failed_is_explained_by_the_plugins_message() -> anyhow::Result<()> {
    let w = world().await?;
    let ns = &w.granted;
    let client = w.plane.client().await?;
    // A Deployment of someone else's under the name the Foo asks for: guest-foo refuses it.
    let d: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "taken" },
        "spec": { "selector": { "matchLabels": { "app": "t" } }, "template": {
            "metadata": { "labels": { "app": "t" } }, "spec": { "containers": [{ "name": "c", "image": "busybox" }] } } }
    }))?;
    Api::<Deployment>::namespaced(client.clone(), ns).create(&PostParams::default(), &d).await?;
    create_foo(&client, ns, "taken", "taken", Some(1)).await?;
    let out = says(
        w,
        &["Foo", "taken", "-n", ns],
        &[
            &format!("Foo {ns}/taken is reconciled by plugin guest-foo"),
            "failed: the plugin reported a failure: Resource \"taken\" already exists and is not managed by Foo",
        ],
    )
    .await?;
    assert!(!out.contains("synced"), "never synced:\n{out}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_in_sync_foo_is_memoized_and_says_since_when_and_how_many_checks() -> anyhow::Result<()> {
    let w = world().await?;
    let ns = &w.granted;
    let client = w.plane.client().await?;
    create_foo(&client, ns, "steady", "steady-web", Some(1)).await?;
    deployment_where(&client, ns, "steady-web", "the Deployment", |_| true).await?;
    // Resyncs every 2 s, each a memo hit: wait for three.
    let checks = regex::Regex::new(r"memoized since \d\d:\d\d:\d\d UTC \([^,]*, (\d+) checks?\)")?;
    let out = wait::until("three memo hits", Duration::from_secs(30), || async {
        let (code, out, err) = explain(w, &["Foo", "steady", "-n", ns]);
        let n: u64 = checks.captures(&out).and_then(|c| c[1].parse().ok()).unwrap_or(0);
        if code == 0 && n >= 3 {
            eprintln!("$ kwop explain Foo steady -n {ns}\n{out}");
            Ok(Some(out))
        } else {
            Err(format!("exit {code}, {n} checks:\n{out}{err}"))
        }
    })
    .await?;
    for want in [
        &format!("Foo {ns}/steady is reconciled by plugin guest-foo") as &str,
        "Last reconcile: nothing to do — memoized since ",
        "nothing it depends on changed, so the plugin was not called.",
        "The plugin last ran ",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    // -o json: the recorder's answer, the same run of memo hits.
    let (code, json_out, err) = explain(w, &["Foo", "steady", "-n", ns, "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&json_out)?;
    let last = v["as_primary"].as_array().and_then(|a| a.last()).cloned().unwrap_or_default();
    assert_eq!(last["verdict"]["kind"], "memoized", "{json_out}");
    assert!(last["verdict"]["checks"].as_u64().unwrap_or(0) >= 3, "{json_out}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_foo_outside_the_plugins_grants_is_left_alone_and_says_so() -> anyhow::Result<()> {
    let w = world().await?;
    let ns = &w.outside;
    let client = w.plane.client().await?;
    create_foo(&client, ns, "elsewhere", "elsewhere-web", Some(1)).await?;
    says(
        w,
        &["Foo", "elsewhere", "-n", ns],
        &[
            &format!("Foo {ns}/elsewhere is outside what plugin guest-foo "),
            "is granted, and kwop leaves it alone (last seen ",
            &format!("namespace \"{ns}\" is not among the namespaces plugin guest-foo is granted"),
        ],
    )
    .await?;
    let made = Api::<Deployment>::namespaced(client.clone(), ns).get_opt("elsewhere-web").await?;
    assert!(made.is_none(), "left alone: no Deployment in {ns}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_runs_it_as_the_plugin_kubectl_kwop() -> anyhow::Result<()> {
    let w = world().await?;
    let ns = &w.granted;
    let client = w.plane.client().await?;
    create_foo(&client, ns, "via-kubectl", "via-kubectl-web", Some(1)).await?;
    // A folder on PATH with the link kubectl looks for, as docs/operate.md says.
    let bin = w.plane.dir.join("kubectl-plugins");
    std::fs::create_dir_all(&bin)?;
    let link = bin.join("kubectl-kwop");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(KWOP, &link)?;
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let kubectl = |args: &[&str]| {
        let mut cmd = std::process::Command::new(w.plane.bin.join("kubectl"));
        cmd.args(args).env("PATH", &path).env("KUBECONFIG", &w.plane.kubeconfig);
        run(cmd)
    };
    let url = format!("--url={}", w.url());
    let out = wait::until("kubectl kwop explain to know the Foo", Duration::from_secs(30), || async {
        let (code, out, err) = kubectl(&["kwop", "explain", "Foo", "via-kubectl", "-n", ns, &url]);
        let want = format!("Foo {ns}/via-kubectl is reconciled by plugin guest-foo");
        if code == 0 && out.contains(&want) {
            Ok(Some(out))
        } else {
            Err(format!("exit {code}:\n{out}{err}"))
        }
    })
    .await?;
    assert!(out.contains("Last reconcile"), "{out}");
    let (code, help, _) = kubectl(&["kwop", "explain", "--help"]);
    assert_eq!(code, 0);
    assert!(help.contains("Usage: kubectl kwop explain"), "the usage names kubectl kwop:\n{help}");
    // Nothing known: exit 1 and a sentence naming the host asked.
    let (code, out, _) = kubectl(&["kwop", "explain", "Foo", "nope", "-n", ns, &url]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&format!("kwop at {} has no record of Foo {ns}/nope", w.url())), "{out}");
    Ok(())
}

/// No host to ask: exit 2 and an error naming the URL and the flag that sets the address.
#[test]
fn a_host_not_listening_is_named_with_the_flag_to_check() -> anyhow::Result<()> {
    let port = kwop_tests::procs::free_port()?;
    let url = format!("http://127.0.0.1:{port}");
    let (code, out, err) = run({
        let mut c = std::process::Command::new(KWOP);
        c.args(["explain", "Foo", "web", "-n", "demo", "--url", &url]);
        c
    });
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains(&format!("cannot connect to {url}")), "{err}");
    assert!(err.contains("--health-probe-bind-address") && err.contains("refused"), "{err}");
    Ok(())
}
