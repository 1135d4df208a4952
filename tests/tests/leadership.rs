//! Losing the leader lease is acted on at once, whatever else the host is doing (issue 12): a
//! leader busy compiling two large plugins (~20 s of Cranelift) steps down and stops its
//! controllers within the retry period once another holder takes the lease, and writes nothing
//! more.

mod common;

use common::*;
use kwop_tests::{host::http_get, plugins, wait, ControlPlane, Mode};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// `src` with a custom section appended: the same plugin with a new sha256, so the precompile
/// cache (shared across runs) cannot spare the compile.
fn unique_copy(src: &str, dest: &Path, nonce: &str) -> anyhow::Result<()> {
    let mut bytes = std::fs::read(src)?;
    let name = b"kwop-test-nonce";
    let mut body = vec![name.len() as u8];
    body.extend_from_slice(name);
    body.extend_from_slice(nonce.as_bytes());
    anyhow::ensure!(body.len() < 128, "one-byte LEB128 length");
    bytes.push(0); // custom section
    bytes.push(body.len() as u8);
    bytes.extend(body);
    let tmp = dest.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(tmp, dest)?;
    Ok(())
}

fn now_micro() -> anyhow::Result<String> {
    let out = std::process::Command::new("date").args(["-u", "+%Y-%m-%dT%H:%M:%S.%6NZ"]).output()?;
    Ok(String::from_utf8(out.stdout)?.trim().to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_lease_is_not_queued_behind_a_slow_compile() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("steal")?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    let flags = [format!("--namespace={ns}"), "--leader-elect".into(), format!("--leader-election-namespace={ns}")];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let host = host(plane, &dir, &flags)?;
    let client = plane.client().await?;
    create_foo(&client, &ns, "foo", "dep", Some(1)).await?;
    deployment_where(&client, &ns, "dep", "the leader reconciles", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(1)
    })
    .await?;

    // Two large plugins to compile (the JavaScript and Python guest-foo, new to the cache).
    let guests = std::env::var("KWOP_GUESTS_DIR").map_err(|_| anyhow::anyhow!("KWOP_GUESTS_DIR is not set"))?;
    let nonce = format!("{}-{}", std::process::id(), now_micro()?);
    for lang in ["js", "py"] {
        let src = format!("{guests}/foo-{lang}.wasm");
        unique_copy(&src, &dir.join(format!("foo-{lang}.wasm")), &nonce)?;
    }
    wait::until("the host to start loading them", Duration::from_secs(10), || async {
        Ok(host.log().contains("foo-js.wasm").then_some(()))
    })
    .await?;

    // Someone else takes the lease.
    let t = now_micro()?;
    let patch = format!(
        r#"{{"spec":{{"holderIdentity":"intruder","acquireTime":"{t}","renewTime":"{t}","leaseDurationSeconds":3600}}}}"#
    );
    plane.kubectl_output(&["patch", "lease", "kwop-leader", "-n", &ns, "--type=merge", "-p", &patch])?;
    let stolen = Instant::now();
    wait::until("guest-foo's controller to stop", Duration::from_secs(10), || async {
        Ok(host.log().contains("controller stopped").then_some(()))
    })
    .await?;
    let took = stolen.elapsed();
    let p: Value = serde_json::from_str(&http_get(host.port, "/plugins")?.1)?;
    assert_eq!(p["role"], "standby", "{p}");
    // The compiles were still running: the switch did not wait for them.
    let log = host.log();
    assert!(
        !log.contains("plugin=guest-foo-js") && !log.contains("plugin=guest-foo-py"),
        "a big plugin finished loading before the step-down: the test proves nothing\n{}",
        host.proc.tail(30)
    );
    assert!(took < Duration::from_secs(6), "stepping down took {took:?}");

    // A standby writes nothing.
    foos(&client, &ns)
        .patch(
            "foo",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({ "spec": { "replicas": 3 } })),
        )
        .await?;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let d = kube::Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), &ns).get("dep").await?;
    assert_eq!(d.spec.and_then(|s| s.replicas), Some(1), "the old leader wrote after stepping down");
    // What the log says once such a load ends (so the check above looked for the right words).
    wait::until("the JavaScript plugin to finish loading", Duration::from_secs(180), || async {
        Ok(host.log().contains("plugin=guest-foo-js").then_some(()))
    })
    .await?;
    Ok(())
}
