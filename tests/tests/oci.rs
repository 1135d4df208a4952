//! Plugins in a real OCI registry (distribution, `tests/src/registry.rs`, plain HTTP on
//! loopback): `kwop plugin push` / `pull` and the library under them (`kwop::source::oci`). A
//! push is in the wasm layout and reproducible; a pull by tag or digest gives the same bytes and
//! pinned digest; a wrong digest, a missing tag, a stopped registry, a non-component file, a layer
//! over the size limit and a plain container image fail with the status reason the host will
//! report. (A registry serving a manifest that does not match its digest cannot be made with
//! distribution: that check is unit-tested in `host/src/source/oci/tests.rs`.)

mod common;

use kwop::source::oci::{self, Auth, OciConfig};
use kwop_tests::registry::Registry;
use std::path::{Path, PathBuf};
use std::process::Command;

const KWOP: &str = env!("CARGO_BIN_EXE_kwop-host");
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join("kwop-test").join(format!("{}-oci-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Runs kwop: (exit code, stdout, stderr). No docker config of the machine is read.
fn kwop(args: &[&str], dir: &Path) -> (i32, String, String) {
    let out = Command::new(KWOP)
        .args(args)
        .env("KWOP_CACHE_DIR", dir.join("cache"))
        .env("DOCKER_CONFIG", dir.join("no-docker-config"))
        .env_remove("SOURCE_DATE_EPOCH")
        .output()
        .expect("kwop runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn insecure(reg: &Registry) -> OciConfig {
    OciConfig { insecure: vec![reg.host_port()], ..OciConfig::default() }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

#[test]
fn the_cli_pushes_in_the_wasm_layout_and_pulls_by_tag_and_by_digest() {
    let reg = Registry::start().expect("registry");
    let dir = tmp("cli");
    let file = common::built_guest("foo-rust");
    let bytes = std::fs::read(&file).expect("guest");
    let reference = format!("{}/kwop/foo-rust:1.0", reg.host_port());
    let hp = reg.host_port();
    let (code, out, err) =
        kwop(&["plugin", "push", &file.display().to_string(), &reference, "--insecure-registry", &hp], &dir);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.lines().count(), 1, "one line: {out}");
    let pinned = out.trim().to_string();
    let digest = pinned.strip_prefix(&format!("{}/kwop/foo-rust@", reg.host_port())).expect("pinned").to_string();
    assert!(digest.starts_with("sha256:") && digest.len() == 71, "{pinned}");

    // What the registry holds: the CNCF wasm layout, under the digest push printed.
    let (status, headers, body) = reg.get("/v2/kwop/foo-rust/manifests/1.0", MANIFEST).expect("manifest");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(header(&headers, "docker-content-digest"), Some(digest.as_str()));
    let m: serde_json::Value = serde_json::from_slice(&body).expect("manifest JSON");
    assert_eq!(m["mediaType"], MANIFEST);
    assert_eq!(m["config"]["mediaType"], "application/vnd.wasm.config.v0+json");
    assert_eq!(m["layers"].as_array().map(Vec::len), Some(1), "{m}");
    assert_eq!(m["layers"][0]["mediaType"], "application/wasm");
    assert_eq!(m["layers"][0]["size"], bytes.len());
    let config_digest = m["config"]["digest"].as_str().expect("config digest");
    let (status, _, config) = reg.get(&format!("/v2/kwop/foo-rust/blobs/{config_digest}"), "").expect("config");
    assert_eq!(status, 200);
    let config: serde_json::Value = serde_json::from_slice(&config).expect("config JSON");
    assert_eq!((config["created"].as_str(), config["os"].as_str()), (Some("1970-01-01T00:00:00Z"), Some("wasip2")));

    // Pulled by tag and by digest (with a prefix): the same bytes, the same pinned reference.
    let by_tag = dir.join("by-tag.wasm");
    let (code, out, err) =
        kwop(&["plugin", "pull", &reference, "-o", &by_tag.display().to_string(), "--insecure-registry", &hp], &dir);
    assert_eq!((code, out.trim()), (0, pinned.as_str()), "{err}");
    assert!(std::fs::read(&by_tag).expect("written") == bytes, "identical bytes by tag");
    let by_digest = dir.join("by-digest.wasm");
    let (code, out, err) = kwop(
        &[
            "plugin",
            "pull",
            &format!("oci://{pinned}"),
            "-o",
            &by_digest.display().to_string(),
            "--insecure-registry",
            "127.0.0.1",
        ],
        &dir,
    );
    assert_eq!((code, out.trim()), (0, pinned.as_str()), "{err}");
    assert!(std::fs::read(&by_digest).expect("written") == bytes, "identical bytes by digest");

    // Reproducible: the same file again, even to another tag, is the same manifest.
    let again = format!("{}/kwop/foo-rust:again", reg.host_port());
    let (code, out, err) =
        kwop(&["plugin", "push", &file.display().to_string(), &again, "--insecure-registry", &hp], &dir);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), pinned, "same bytes, same digest");
}

#[test]
fn the_cli_refuses_what_it_cannot_do_in_one_line() {
    let reg = Registry::start().expect("registry");
    let dir = tmp("cli-errors");
    let hp = reg.host_port();
    let text = dir.join("text.wasm");
    std::fs::write(&text, "hello").expect("write");
    let core = dir.join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").expect("write");
    for (file, needle) in [
        (text, "magic number"),
        (core, "core WebAssembly module"),
        (PathBuf::from(kwop_tests::plugins::WRONG_WORLD), "kwop:reconciler"),
    ] {
        let r = format!("{hp}/kwop/bad:1");
        let (code, out, err) =
            kwop(&["plugin", "push", &file.display().to_string(), &r, "--insecure-registry", &hp], &dir);
        assert_eq!((code, out.as_str()), (1, ""), "{}: {err}", file.display());
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains(needle) && err.contains("not pushed"), "{err}");
    }
    let (status, _, _) = reg.get("/v2/kwop/bad/tags/list", "").expect("tags");
    assert_eq!(status, 404, "nothing was pushed");

    let out_file = dir.join("missing.wasm");
    let (code, out, err) = kwop(
        &[
            "plugin",
            "pull",
            &format!("{hp}/kwop/bad:1"),
            "-o",
            &out_file.display().to_string(),
            "--insecure-registry",
            &hp,
        ],
        &dir,
    );
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains("not found") && err.contains(&format!("{hp}/kwop/bad:1")), "{err}");
    assert!(!out_file.exists(), "nothing written");
    let (code, _, err) = kwop(&["plugin", "pull", "Not A Reference"], &dir);
    assert_eq!(code, 1);
    assert!(err.contains("invalid OCI reference"), "{err}");
}

#[tokio::test]
async fn pulls_are_verified_and_failures_carry_their_reason() {
    let reg = Registry::start().expect("registry");
    let cfg = insecure(&reg);
    let bytes = std::fs::read(common::built_guest("foo-rust")).expect("guest");
    let hp = reg.host_port();
    let pinned = oci::push(bytes.clone(), &format!("{hp}/lib/foo:v1"), &Auth::Anonymous, &cfg).await.expect("push");
    let digest = pinned.rsplit_once('@').map(|(_, d)| d.to_string()).expect("pinned");

    let by_tag = oci::pull(&format!("{hp}/lib/foo:v1"), &Auth::Anonymous, &cfg).await.expect("pull by tag");
    assert_eq!((by_tag.pinned.as_str(), by_tag.digest.as_str()), (pinned.as_str(), digest.as_str()));
    assert!(by_tag.bytes == bytes, "identical bytes");
    let by_digest = oci::pull(&pinned, &Auth::Anonymous, &cfg).await.expect("pull by digest");
    assert_eq!(by_digest, by_tag);
    let again =
        oci::push(bytes.clone(), &format!("{hp}/lib/foo:v1-again"), &Auth::Anonymous, &cfg).await.expect("push");
    assert_eq!(again, pinned, "reproducible");

    let reason = |r: Result<oci::Pulled, oci::OciError>| match r {
        Ok(p) => panic!("pulled {} but should have failed", p.pinned),
        Err(e) => (e.reason(), e.to_string()),
    };
    // A valid digest that is not there.
    let absent = format!("{hp}/lib/foo@sha256:{}", "0".repeat(64));
    let (r, msg) = reason(oci::pull(&absent, &Auth::Anonymous, &cfg).await);
    assert_eq!(r, "NotFound", "{msg}");
    assert!(msg.contains(&absent), "{msg}");
    let (r, msg) = reason(oci::pull(&format!("{hp}/lib/foo:v9"), &Auth::Anonymous, &cfg).await);
    assert_eq!(r, "NotFound", "a missing tag: {msg}");
    let (r, msg) = reason(oci::pull(&format!("{hp}/lib/nothing:v1"), &Auth::Anonymous, &cfg).await);
    assert_eq!(r, "NotFound", "a missing repository: {msg}");

    // Over the size limit: refused from the manifest, before the layer is downloaded.
    let small = OciConfig { max_bytes: bytes.len() as u64 - 1, ..cfg.clone() };
    let (r, msg) = reason(oci::pull(&pinned, &Auth::Anonymous, &small).await);
    assert_eq!(r, "TooLarge", "{msg}");
    assert!(msg.contains(&bytes.len().to_string()), "{msg}");
    let e =
        oci::push(bytes.clone(), &format!("{hp}/lib/foo:big"), &Auth::Anonymous, &small).await.expect_err("too large");
    assert_eq!(e.reason(), "TooLarge", "{e}");

    // A plain container image (an OCI config and a tar+gzip layer) pushed with oci-client.
    oci::install_crypto_provider();
    let client = oci_client::Client::new(oci_client::client::ClientConfig {
        protocol: oci_client::client::ClientProtocol::HttpsExcept(vec![hp.clone()]),
        ..Default::default()
    });
    let image: oci_client::Reference = format!("{hp}/lib/image:1").parse().expect("reference");
    let layer = oci_client::client::ImageLayer::oci_v1_gzip(b"not really a tarball".to_vec(), None);
    let config = oci_client::client::Config::oci_v1(br#"{"architecture":"amd64","os":"linux"}"#.to_vec(), None);
    client
        .push(&image, &[layer], config, &oci_client::secrets::RegistryAuth::Anonymous, None)
        .await
        .expect("push a plain image");
    let (r, msg) = reason(oci::pull(&format!("{hp}/lib/image:1"), &Auth::Anonymous, &cfg).await);
    assert_eq!(r, "NotAComponent", "{msg}");
    assert!(
        msg.contains("application/vnd.oci.image.config.v1+json") && msg.contains("tar+gzip"),
        "says what it found: {msg}"
    );

    // Bytes tampered with in the registry's own storage (same sizes, so only the digests can
    // tell): the layer by its digest in the manifest, the manifest by the digest pulled.
    let blob = |digest: &str| {
        let hex = digest.trim_start_matches("sha256:").to_string();
        reg.storage.join("docker/registry/v2/blobs/sha256").join(&hex[..2]).join(&hex).join("data")
    };
    let layer = blob(&format!("sha256:{}", kwop::plugin::loader::sha256_hex(&bytes)));
    let tamper = |path: &std::path::Path, at: usize| {
        let mut b = std::fs::read(path).expect("a stored blob");
        b[at] ^= 0x01;
        std::fs::write(path, b).expect("tampered");
    };
    tamper(&layer, bytes.len() / 2);
    let (r, msg) = reason(oci::pull(&format!("{hp}/lib/foo:v1"), &Auth::Anonymous, &cfg).await);
    assert_eq!(r, "DigestMismatch", "{msg}");
    assert!(msg.contains("layer"), "{msg}");
    tamper(&layer, bytes.len() / 2);
    let manifest = blob(&digest);
    let at = std::fs::read(&manifest).expect("manifest").iter().position(|b| *b == b'w').expect("a 'w' in the JSON");
    tamper(&manifest, at);
    let (r, msg) = reason(oci::pull(&pinned, &Auth::Anonymous, &cfg).await);
    assert_eq!(r, "DigestMismatch", "{msg}");
    assert!(msg.contains("manifest"), "{msg}");
    tamper(&manifest, at);

    // Not listed as insecure, but on this machine: plain HTTP all the same (as Docker treats a
    // loopback registry). A plain-HTTP registry elsewhere: a_registry_on_localhost_needs_no_flag….
    let local = oci::pull(&pinned, &Auth::Anonymous, &OciConfig::default()).await.expect("a loopback registry");
    assert_eq!(local.pinned, pinned);

    // The registry stops: unreachable.
    drop(reg);
    let (r, msg) = reason(oci::pull(&pinned, &Auth::Anonymous, &cfg).await);
    assert_eq!(r, "Unreachable", "{msg}");
    assert!(msg.contains(&pinned), "{msg}");
    let e = oci::push(bytes, &format!("{hp}/lib/foo:v2"), &Auth::Anonymous, &cfg).await.expect_err("stopped");
    assert_eq!(e.reason(), "Unreachable", "{e}");
}

/// `kwop` / `kwop-secret` (bcrypt, cost 4), as `htpasswd -B` writes it.
const HTPASSWD: &str = "kwop:$2b$04$O.KKWBPHPCWHtaq0e/tWMubwgTSG.bLiaYSnNPdNjWOLEz/ymLWsW\n";

#[tokio::test]
async fn a_registry_with_auth_takes_docker_config_credentials_and_refuses_others() {
    use base64::Engine as _;
    let reg = Registry::start_with_htpasswd(HTPASSWD).expect("registry with auth");
    let cfg = insecure(&reg);
    let hp = reg.host_port();
    let bytes = std::fs::read(common::built_guest("foo-rust")).expect("guest");
    let docker_config = |user_pass: &str| {
        let b64 = base64::engine::general_purpose::STANDARD.encode(user_pass);
        format!(r#"{{"auths": {{"http://{hp}": {{"auth": "{b64}"}}, "other.example.com": {{"auth": "eDp5"}}}}}}"#)
    };
    let good = oci::auth_from_docker_config(docker_config("kwop:kwop-secret").as_bytes(), &hp).expect("config");
    assert!(matches!(&good, Auth::Basic { username, .. } if username == "kwop"), "{good:?}");
    let bad = oci::auth_from_docker_config(docker_config("kwop:wrong").as_bytes(), &hp).expect("config");

    let r = format!("{hp}/private/foo:1");
    let e = oci::push(bytes.clone(), &r, &Auth::Anonymous, &cfg).await.expect_err("anonymous push");
    assert_eq!(e.reason(), "Unauthorized", "{e}");
    let e = oci::push(bytes.clone(), &r, &bad, &cfg).await.expect_err("wrong password");
    assert_eq!(e.reason(), "Unauthorized", "{e}");
    let pinned = oci::push(bytes.clone(), &r, &good, &cfg).await.expect("push with credentials");
    let pulled = oci::pull(&r, &good, &cfg).await.expect("pull with credentials");
    assert_eq!(pulled.pinned, pinned);
    assert!(pulled.bytes == bytes);
    for auth in [Auth::Anonymous, bad] {
        let e = oci::pull(&pinned, &auth, &cfg).await.expect_err("refused");
        assert_eq!(e.reason(), "Unauthorized", "{auth:?}: {e}");
        assert!(e.to_string().contains(&pinned), "{e}");
    }

    // The CLI reads the same file with --docker-config.
    let dir = tmp("auth");
    let file = dir.join("config.json");
    std::fs::write(&file, docker_config("kwop:kwop-secret")).expect("write");
    let out_file = dir.join("foo.wasm");
    let args = ["plugin", "pull", &r, "-o", &out_file.display().to_string(), "--insecure-registry", &hp];
    let (code, _, err) = kwop(&args, &dir);
    assert_eq!(code, 1, "no credentials: refused");
    assert!(err.contains("refused access"), "{err}");
    let mut with = args.to_vec();
    let f = file.display().to_string();
    with.extend(["--docker-config", &f]);
    let (code, out, err) = kwop(&with, &dir);
    assert_eq!((code, out.trim()), (0, pinned.as_str()), "{err}");
    assert!(std::fs::read(&out_file).expect("written") == bytes);
}

/// Issue 40: `kwop plugin push` to a plain-HTTP registry on 127.0.0.1 failed with "received
/// corrupt message of type InvalidContentType" and no hint. A registry on this machine is plain
/// HTTP by default (as Docker treats it), and a TLS failure against a plain-HTTP registry
/// elsewhere names `--insecure-registry`.
#[test]
fn a_registry_on_localhost_needs_no_flag_and_a_tls_failure_names_insecure_registry() {
    let reg = Registry::start().expect("registry");
    let dir = tmp("loopback");
    let file = common::built_guest("foo-rust").display().to_string();
    let port = reg.host_port().rsplit_once(':').map(|(_, p)| p.to_string()).expect("a port");
    for host in ["127.0.0.1", "localhost"] {
        let reference = format!("{host}:{port}/kwop/local:1");
        let (code, out, err) = kwop(&["plugin", "push", &file, &reference], &dir);
        assert_eq!(code, 0, "{host}: {out}{err}");
        let got = dir.join(format!("{host}.wasm"));
        let (code, out, err) = kwop(&["plugin", "pull", &reference, "-o", &got.display().to_string()], &dir);
        assert_eq!(code, 0, "{host}: {out}{err}");
    }
    // A plain-HTTP server reached by a non-loopback address: TLS fails, and the error says why.
    let ip = this_machines_address().expect("this machine has a non-loopback address");
    assert!(!ip.is_loopback(), "{ip}");
    let plain = std::net::TcpListener::bind((ip, 0)).expect("bind");
    let addr = plain.local_addr().expect("addr");
    std::thread::spawn(move || {
        for s in plain.incoming().flatten() {
            let mut s = s;
            let _ = std::io::Write::write_all(&mut s, b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let (code, out, err) = kwop(&["plugin", "push", &file, &format!("{addr}/kwop/x:1")], &dir);
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("--insecure-registry"), "{err}");
}

/// An address of this machine that is not loopback (the first `hostname -I` gives).
fn this_machines_address() -> Option<std::net::IpAddr> {
    let out = Command::new("hostname").arg("-I").output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|a| a.parse::<std::net::IpAddr>().ok())
        .find(|ip| ip.is_ipv4() && !ip.is_loopback())
}
