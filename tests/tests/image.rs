//! The container image (issue 20): `scripts/image` builds it without a container engine; it is
//! unpacked from its OCI layout as a runtime would (digests checked), run from the unpacked root
//! as the image's user with only the image's files plus what a kubelet mounts (service-account
//! token, an emptyDir cache), and reconciles a Foo with the service account's token, running the
//! example ReconcilerPlugin of `deploy/`. It is small, its digest is stable, and it pushes to a real registry.
//!
//! The first test to run pays for the static release build (~20 min cold on 2 cores), cached
//! beside this test binary's target folder; later runs take seconds.

mod common;

use anyhow::{anyhow, bail, Context, Result};
use common::*;
use kwop_tests::image::{Container, Image, Mount};
use kwop_tests::registry::Registry;
use kwop_tests::{host::http_get, procs::free_port, ControlPlane, Host, Mode};
use std::collections::BTreeSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// What the one layer holds, nothing more.
const FILES: [&str; 12] = [
    "cache/",
    "etc/",
    "etc/group",
    "etc/passwd",
    "etc/ssl/",
    "etc/ssl/certs/",
    "etc/ssl/certs/ca-certificates.crt",
    "plugins/",
    "usr/",
    "usr/local/",
    "usr/local/bin/",
    "usr/local/bin/kwop",
];

fn scratch(what: &str) -> Result<PathBuf> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join("kwop-test").join(format!("{}-image-{what}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The target folder this test binary was built in (`<target>/debug/deps/image-*`): the static
/// build goes there too, so it is cached with everything else.
fn target_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    exe.ancestors().nth(3).map(Path::to_path_buf).ok_or_else(|| anyhow!("no target folder above {}", exe.display()))
}

/// Runs `scripts/image ARGS` with `env`; returns its output.
fn scripts_image(args: &[&str], env: &[(&str, &str)]) -> Result<String> {
    let mut cmd = Command::new("bash");
    cmd.arg(kwop_tests::repo_root().join("scripts/image")).args(args).env("CARGO_TARGET_DIR", target_dir()?);
    for v in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET", "RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER"]
    {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().context("cannot run scripts/image")?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        let tail: Vec<&str> = text.lines().rev().take(40).collect();
        bail!("scripts/image {args:?} failed:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
    }
    Ok(text)
}

/// Builds into a fresh folder; returns the layout and what the script said.
fn build(what: &str, env: &[(&str, &str)]) -> Result<(PathBuf, String)> {
    let out = scratch(what)?.join("oci");
    let said = scripts_image(&["--out", &out.display().to_string()], env)?;
    Ok((out, said))
}

/// One build shared by the tests of this binary.
fn built() -> Result<&'static Path> {
    static BUILT: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| build("shared", &[]).map(|(p, _)| p).map_err(|e| format!("{e:#}")))
        .as_deref()
        .map_err(|e| anyhow!("{e}"))
}

fn yaml(path: &str) -> Result<serde_yaml::Value> {
    Ok(serde_yaml::from_str(&std::fs::read_to_string(kwop_tests::repo_root().join(path))?)?)
}

/// Every path of an unpacked tree, folders with a trailing `/`.
fn tree(root: &Path) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir)? {
            let p = e?.path();
            let rel = p.strip_prefix(root)?.display().to_string();
            if p.is_dir() {
                out.insert(format!("{rel}/"));
                stack.push(p);
            } else {
                out.insert(rel);
            }
        }
    }
    Ok(out)
}

fn label<'a>(img: &'a Image, key: &str) -> Option<&'a str> {
    img.config.config.labels.as_ref()?.get(key).map(String::as_str)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_image_runs_as_its_user_with_only_its_files_and_reconciles_with_the_sa_token() -> Result<()> {
    if not_root() {
        bail!("this test runs the image in a chroot with its own mounts: it needs root (CI and our machines are)");
    }
    let img = Image::open(built()?)?;
    let cfg = &img.config.config;
    assert_eq!(img.config.os, "linux");
    assert_eq!(img.config.architecture, "amd64");
    assert_eq!(cfg.user.as_deref(), Some("65532:65532"));
    let entrypoint = cfg.entrypoint.clone().unwrap_or_default();
    assert_eq!(entrypoint, ["/usr/local/bin/kwop"]);
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(label(&img, "org.opencontainers.image.title"), Some("kwop"));
    assert_eq!(label(&img, "org.opencontainers.image.version"), Some(version));
    assert_eq!(label(&img, "org.opencontainers.image.licenses"), Some("Apache-2.0"));
    let head = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(kwop_tests::repo_root()).output()?;
    assert_eq!(label(&img, "org.opencontainers.image.revision"), Some(String::from_utf8_lossy(&head.stdout).trim()));

    // deploy/ names this image and runs it as its user.
    let kustomization = yaml("deploy/kustomization.yaml")?;
    let pinned = &kustomization["images"][0];
    assert_eq!(pinned["name"], "kwop");
    assert_eq!(pinned["newTag"].as_str(), Some(version), "deploy/ must pin the image version scripts/image tags");
    let ref_name = img.index.manifests[0].annotations.get("org.opencontainers.image.ref.name");
    assert_eq!(ref_name.map(String::as_str), Some(version));
    let deployment = yaml("deploy/base/deployment.yaml")?;
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    assert_eq!(pod["securityContext"]["runAsGroup"], 65532);
    let container = &pod["containers"][0];
    assert_eq!(container["image"], "kwop");

    // Unpacked as a runtime would: exactly the image's files, modes and owners kept.
    let root = scratch("root")?.join("rootfs");
    let unpacked = img.unpack(&root)?;
    let want: BTreeSet<String> = FILES.iter().map(|s| s.to_string()).collect();
    assert_eq!(tree(&root)?, want, "the layer holds exactly these files");
    let kwop = std::fs::metadata(root.join("usr/local/bin/kwop"))?;
    assert_eq!((kwop.permissions().mode() & 0o7777, kwop.uid()), (0o755, 0));
    let cache = std::fs::metadata(root.join("cache"))?;
    assert_eq!((cache.uid(), cache.gid()), (65532, 65532), "the cache folder belongs to the image's user");
    let passwd = std::fs::read_to_string(root.join("etc/passwd"))?;
    assert!(passwd.lines().any(|l| l.starts_with("nonroot:x:65532:65532:")), "{passwd}");
    let certs = std::fs::read_to_string(root.join("etc/ssl/certs/ca-certificates.crt"))?;
    assert!(certs.matches("BEGIN CERTIFICATE").count() > 100, "a CA bundle");
    eprintln!("image {}: {} bytes compressed, {unpacked} unpacked", img.digest, img.compressed_size());

    // The cluster side, as `kubectl apply -k deploy/` leaves it; a token for its service account.
    let plane = ControlPlane::shared(Mode::Api)?;
    install(plane)?;
    let token = plane.kubectl_output(&["create", "token", "kwop", "-n", "kwop-system", "--duration=1h"])?;
    let ca = plane.ca_crt().ok_or_else(|| anyhow!("needs the harness's own control plane"))?;
    let api_port = plane.server.rsplit(':').next().unwrap_or_default().to_string();

    // What the kubelet would mount: the service-account volume and the emptyDir (plugins come from
    // the ReconcilerPlugin install() applied).
    let pod_dir = scratch("pod")?;
    let sa = pod_dir.join("serviceaccount");
    std::fs::create_dir_all(&sa)?;
    std::fs::write(sa.join("token"), token.trim())?;
    std::fs::copy(ca, sa.join("ca.crt"))?;
    std::fs::write(sa.join("namespace"), "kwop-system")?;
    let empty_dir = pod_dir.join("cache");
    std::fs::create_dir_all(&empty_dir)?;
    std::fs::set_permissions(&empty_dir, std::fs::Permissions::from_mode(0o777))?;
    let mut mounts =
        vec![Mount { source: sa, target: "/var/run/secrets/kubernetes.io/serviceaccount".into(), writable: false }];
    for m in container["volumeMounts"].as_sequence().into_iter().flatten() {
        let (name, path) = (m["name"].as_str().unwrap_or_default(), m["mountPath"].as_str().unwrap_or_default());
        let volume = pod["volumes"].as_sequence().into_iter().flatten().find(|v| v["name"] == name);
        let volume = volume.ok_or_else(|| anyhow!("volumeMount {name} has no volume"))?;
        let source = if !volume["emptyDir"].is_null() {
            empty_dir.clone()
        } else {
            bail!("volume {name}: the test knows emptyDir only");
        };
        mounts.push(Mount { source, target: path.into(), writable: m["readOnly"] != true });
    }
    assert_eq!(mounts.len(), 2, "service account and cache");

    // The container's command: the image's entrypoint and the Deployment's args (probe and metrics
    // ports moved to a free loopback port: this test shares the host's network).
    // The webhook is left out: this plane has no pod network for its Service, and the API server
    // would refuse every Foo under the Fail policy (admission is tested in `admission`).
    let port = free_port()?;
    let mut argv = entrypoint.clone();
    let mut moved = 0;
    let mut webhook = false;
    for a in container["args"].as_sequence().into_iter().flatten() {
        let a = a.as_str().ok_or_else(|| anyhow!("non-string arg"))?;
        if a.starts_with("--webhook-bind-address=") {
            webhook = true;
            continue;
        }
        if a.starts_with("--metrics-bind-address=") || a.starts_with("--health-probe-bind-address=") {
            moved += 1;
            argv.push(format!("{}=127.0.0.1:{port}", a.split('=').next().unwrap_or_default()));
        } else {
            argv.push(a.to_string());
        }
    }
    assert_eq!(moved, 2, "deployment.yaml sets both bind addresses");
    assert!(webhook, "deployment.yaml serves admission");
    let mut env: Vec<(String, String)> = Vec::new();
    for kv in cfg.env.clone().unwrap_or_default() {
        let (k, v) = kv.split_once('=').ok_or_else(|| anyhow!("bad env {kv}"))?;
        env.push((k.into(), v.into()));
    }
    env.extend([
        ("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into()),
        ("KUBERNETES_SERVICE_PORT".into(), api_port),
        ("HOSTNAME".into(), "kwop-image-test".into()),
        ("POD_NAME".into(), "kwop-image-test".into()),
    ]);
    let (uid, gid) = (65532, 65532);
    let jail = Container { root: root.clone(), uid, gid, argv, env, mounts };
    let proc = jail.spawn("kwop-image", &pod_dir.join("kwop.log"))?;
    let pid = proc.child.id();
    let host = Host::attach(proc, port, true)?;

    // It is the image's user, without privileges, on a read-only root.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    assert!(
        status
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["Uid:", "65532", "65532", "65532", "65532"]),
        "{status}"
    );
    assert!(status.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["NoNewPrivs:", "1"]));
    assert!(status.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["CapEff:", "0000000000000000"]));
    let mountinfo = std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))?;
    let root_mount = mountinfo.lines().find(|l| l.split_whitespace().nth(4) == Some("/"));
    assert!(
        root_mount.is_some_and(|l| l.split_whitespace().nth(5).is_some_and(|o| o.split(',').any(|f| f == "ro"))),
        "root not read-only:\n{mountinfo}"
    );
    assert_eq!(std::fs::read_link(format!("/proc/{pid}/root"))?, root.canonicalize()?);

    // And it reconciles, with the service account's token only.
    let ns = plane.namespace("image")?;
    let client = plane.client().await?;
    create_foo(&client, &ns, "from-image", "from-image", Some(2)).await?;
    deployment_where(&client, &ns, "from-image", "Deployment written by the image", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(2)
    })
    .await?;
    foo_status_where(&client, &ns, "from-image", "status written by the image", |s| s["availableReplicas"] == 0)
        .await?;
    event_with_reason(&client, &ns, "from-image", "Synced").await?;
    assert_eq!(host.metric("kwop_write_errors_total", &[])?, 0.0, "no write was refused");
    assert_eq!(host.metric("kwop_leader", &[])?, 1.0, "it leads, with its lease in kwop-system");
    assert_eq!(http_get(port, "/healthz")?.0, 200);
    let cached = std::fs::read_dir(&empty_dir)?.count();
    assert!(cached > 0, "the precompiled plugin is written to the emptyDir at /cache");
    Ok(())
}

fn not_root() -> bool {
    #[allow(unsafe_code)]
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    euid != 0
}

fn digest_of(said: &str) -> Result<String> {
    said.split_whitespace()
        .find(|w| w.starts_with("sha256:"))
        .map(str::to_string)
        .ok_or_else(|| anyhow!("no digest in:\n{said}"))
}

#[test]
fn the_image_is_small_and_its_digest_is_stable() -> Result<()> {
    let first = Image::open(built()?)?;
    // Another folder, later, another umask: a build time, a path or an mtime leaking in would show.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (again, said) = build("again", &[])?;
    let second = Image::open(&again)?;
    assert_eq!(second.digest, first.digest, "two builds of the same sources");
    assert_eq!(digest_of(&said)?, first.digest, "scripts/image prints the digest it wrote");
    assert_eq!(std::fs::read(again.join("index.json"))?, std::fs::read(first.dir.join("index.json"))?);
    // ...and the digest does follow its inputs (here the timestamp every entry carries).
    let (other, _) = build("epoch", &[("SOURCE_DATE_EPOCH", "1700000000")])?;
    assert_ne!(Image::open(&other)?.digest, first.digest, "SOURCE_DATE_EPOCH is an input");

    let size = first.compressed_size();
    assert!(size < 40_000_000, "the image is {size} bytes, over ~40 MB");
    assert_eq!(first.manifest.layers.len(), 1, "one layer");
    Ok(())
}

#[test]
fn scripts_image_pushes_to_a_registry() -> Result<()> {
    let local = Image::open(built()?)?;
    let registry = Registry::start()?;
    let reference = format!("{}/kwop/host:test", registry.host_port());
    let out = scratch("push")?.join("oci");
    let said = scripts_image(&["--out", &out.display().to_string(), "--push", &reference], &[])?;
    assert!(said.contains(&format!("pushed {}/kwop/host@{}", registry.host_port(), local.digest)), "{said}");

    // The registry serves the same manifest, by tag and by digest, and every blob it names.
    let accept = "application/vnd.oci.image.manifest.v1+json";
    let (status, headers, body) = registry.get("/v2/kwop/host/manifests/test", accept)?;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let header = headers.iter().find(|(k, _)| k == "docker-content-digest").map(|(_, v)| v.as_str());
    assert_eq!(header, Some(local.digest.as_str()));
    assert_eq!(body, local.blob(&local.index.manifests[0])?, "the manifest's bytes");
    let (status, _, _) = registry.get(&format!("/v2/kwop/host/manifests/{}", local.digest), accept)?;
    assert_eq!(status, 200);
    for desc in std::iter::once(&local.manifest.config).chain(&local.manifest.layers) {
        let (status, _, blob) = registry.get(&format!("/v2/kwop/host/blobs/{}", desc.digest), "")?;
        assert_eq!(status, 200, "blob {}", desc.digest);
        assert_eq!(blob, local.blob(desc)?, "blob {}", desc.digest);
    }
    // A tag that was never pushed is not there (the registry is real, not a recorder).
    assert_eq!(registry.get("/v2/kwop/host/manifests/other", accept)?.0, 404);
    Ok(())
}
