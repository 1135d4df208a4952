//! Unit tests of the pure parts of OCI pulls and pushes: references, credentials, verification,
//! the wasm layout, the reasons errors map to.

use super::*;
use oci_client::errors::{DigestError, OciDistributionError, OciEnvelope};

const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

#[test]
fn references_parse_with_or_without_a_prefix() {
    for s in
        ["127.0.0.1:5000/kwop/foo:1.0", "oci://127.0.0.1:5000/kwop/foo:1.0", "registry://127.0.0.1:5000/kwop/foo:1.0"]
    {
        let r = parse_reference(s).expect(s);
        assert_eq!(
            (r.registry(), r.repository(), r.tag(), r.digest()),
            ("127.0.0.1:5000", "kwop/foo", Some("1.0"), None)
        );
    }
    let r = parse_reference(&format!("ghcr.io/org/foo@{D}")).expect("by digest");
    assert_eq!((r.registry(), r.repository(), r.tag(), r.digest()), ("ghcr.io", "org/foo", None, Some(D)));
    let r = parse_reference("ghcr.io/org/foo").expect("no tag");
    assert_eq!(r.tag(), Some("latest"));
    assert_eq!(parse_reference("foo:1").expect("docker hub").registry(), "docker.io");
}

#[test]
fn bad_references_are_refused_with_the_reason() {
    let upper = format!("ghcr.io/org/foo@sha256:{}", D["sha256:".len()..].to_uppercase());
    for (s, needle) in [
        ("", "empty"),
        ("https://ghcr.io/org/foo:1", "prefixes"),
        ("ghcr.io/Org/Foo:1", "expected host/repository"),
        ("ghcr.io/org/foo@sha256:abc", "sha256"),
        (upper.as_str(), "sha256"),
        ("ghcr.io/org/foo@md5:0123456789abcdef0123456789abcdef", "sha256"),
    ] {
        let e = parse_reference(s).expect_err(s);
        assert_eq!(e.reason(), "InvalidReference", "{s}: {e}");
        assert!(e.to_string().contains(needle), "{s}: {e}");
    }
}

fn cfg(json: &str) -> Vec<u8> {
    json.as_bytes().to_vec()
}

#[test]
fn docker_config_entries_are_found_by_registry() {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode("alice:s3cr:et");
    let c = cfg(&format!(
        r#"{{"auths": {{
            "127.0.0.1:5000": {{"auth": "{b64}"}},
            "https://ghcr.io": {{"username": "bob", "password": "pw"}},
            "https://index.docker.io/v1/": {{"auth": "{b64}"}},
            "quay.io": {{"auth": "", "username": "carol", "password": "c"}}
        }}}}"#
    ));
    let alice = Auth::Basic { username: "alice".into(), password: "s3cr:et".into() };
    assert_eq!(auth_from_docker_config(&c, "127.0.0.1:5000").expect("by host:port"), alice);
    assert_eq!(auth_from_docker_config(&c, "127.0.0.1:5001").expect("other port"), Auth::Anonymous);
    assert_eq!(auth_from_docker_config(&c, "127.0.0.1").expect("no port"), Auth::Anonymous);
    assert_eq!(
        auth_from_docker_config(&c, "GHCR.io").expect("URL key, any case"),
        Auth::Basic { username: "bob".into(), password: "pw".into() }
    );
    for hub in ["docker.io", "index.docker.io", "registry-1.docker.io"] {
        assert_eq!(auth_from_docker_config(&c, hub).expect(hub), alice, "{hub}");
    }
    assert_eq!(
        auth_from_docker_config(&c, "quay.io").expect("empty auth, user and password"),
        Auth::Basic { username: "carol".into(), password: "c".into() }
    );
    assert_eq!(auth_from_docker_config(&c, "example.com").expect("absent"), Auth::Anonymous);
    // The legacy .dockercfg: the map itself.
    let legacy = cfg(&format!(r#"{{"127.0.0.1:5000": {{"auth": "{b64}"}}}}"#));
    assert_eq!(auth_from_docker_config(&legacy, "127.0.0.1:5000").expect("legacy"), alice);
}

#[test]
fn unusable_credentials_are_errors_not_anonymous() {
    for (json, needle) in [
        ("not json", "not valid JSON"),
        (r#"{"auths": []}"#, "no \"auths\" object"),
        (r#"{"auths": {"r.io": {"auth": "%%%"}}}"#, "not base64"),
        (r#"{"auths": {"r.io": {"auth": "bm9jb2xvbg=="}}}"#, "user:password"),
        (r#"{"auths": {"r.io": {"username": "u"}}}"#, "neither"),
        (r#"{"auths": {"r.io": "x"}}"#, "not valid"),
    ] {
        let e = auth_from_docker_config(json.as_bytes(), "r.io").expect_err(json);
        assert_eq!(e.reason(), "Unauthorized", "{json}");
        assert!(e.to_string().contains(needle) && e.to_string().contains("r.io"), "{json}: {e}");
    }
    let basic = Auth::Basic { username: "u".into(), password: "hunter2".into() };
    assert!(!format!("{basic:?}").contains("hunter2"), "passwords are never printed");
}

#[test]
fn a_manifest_that_is_not_what_the_digest_names_is_a_mismatch() {
    let raw = br#"{"schemaVersion":2}"#;
    let actual = format!("sha256:{}", hex::encode(Sha256::digest(raw)));
    assert_eq!(verify_manifest("r/x@d", None, raw).expect("by tag: any digest"), actual);
    assert_eq!(verify_manifest("r/x@d", Some(&actual), raw).expect("matches"), actual);
    let e = verify_manifest("r/x@d", Some(D), raw).expect_err("differs");
    assert_eq!(e.reason(), "DigestMismatch");
    assert!(e.to_string().contains(D) && e.to_string().contains(&actual) && e.to_string().contains("r/x@d"), "{e}");
    let e = verify_layer("r/x:1", D, b"bytes").expect_err("layer differs");
    assert_eq!(e.reason(), "DigestMismatch");
    assert!(e.to_string().contains("layer"), "{e}");
    let ok = format!("sha256:{}", hex::encode(Sha256::digest(b"bytes")));
    verify_layer("r/x:1", &ok, b"bytes").expect("layer matches");
}

fn manifest(config: &str, layers: &[&str]) -> Vec<u8> {
    let layers: Vec<_> = layers.iter().map(|t| serde_json::json!({"mediaType": t, "digest": D, "size": 10})).collect();
    serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2, "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {"mediaType": config, "digest": D, "size": 2}, "layers": layers
    }))
    .expect("json")
}

#[test]
fn only_the_wasm_layout_is_a_component_artifact() {
    let l = wasm_layer("r/x:1", &manifest(WASM_MANIFEST_CONFIG_MEDIA_TYPE, &[WASM_LAYER_MEDIA_TYPE])).expect("wasm");
    assert_eq!((l.digest.as_str(), l.size), (D, 10));
    let image = "application/vnd.oci.image.layer.v1.tar+gzip";
    for (raw, needle) in [
        (
            manifest("application/vnd.oci.image.config.v1+json", &[image]),
            "config application/vnd.oci.image.config.v1+json, layers [application/vnd.oci.image.layer.v1.tar+gzip]",
        ),
        (manifest(WASM_MANIFEST_CONFIG_MEDIA_TYPE, &[WASM_LAYER_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE]), "exactly one"),
        (manifest(WASM_MANIFEST_CONFIG_MEDIA_TYPE, &[]), "layers []"),
        (manifest(WASM_MANIFEST_CONFIG_MEDIA_TYPE, &[image]), "exactly one application/wasm"),
        (br#"{"schemaVersion":2,"manifests":[]}"#.to_vec(), "image index"),
        (b"<html>".to_vec(), "not JSON"),
    ] {
        let e = wasm_layer("r/x:1", &raw).expect_err(needle);
        assert_eq!(e.reason(), "NotAComponent");
        assert!(e.to_string().contains(needle) && e.to_string().contains("r/x:1"), "{needle}: {e}");
    }
}

/// The smallest component: the preamble of the component binary format.
const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

#[test]
fn pushes_are_reproducible_and_in_the_wasm_layout() {
    let t = chrono::DateTime::UNIX_EPOCH;
    let (m1, c1, l1) = wasm_artifact("r/x:1", EMPTY_COMPONENT.to_vec(), t).expect("a component");
    let (m2, c2, _) = wasm_artifact("r/x:1", EMPTY_COMPONENT.to_vec(), t).expect("again");
    assert_eq!(serde_json::to_vec(&m1).expect("json"), serde_json::to_vec(&m2).expect("json"));
    assert_eq!(c1.data, c2.data);
    assert_eq!(m1.media_type.as_deref(), Some(MANIFEST_MEDIA_TYPE));
    assert_eq!(m1.config.media_type, WASM_MANIFEST_CONFIG_MEDIA_TYPE);
    assert_eq!(m1.layers.len(), 1);
    assert_eq!(m1.layers[0].media_type, WASM_LAYER_MEDIA_TYPE);
    assert_eq!(l1.data.as_ref(), EMPTY_COMPONENT);
    let config: serde_json::Value = serde_json::from_slice(&c1.data).expect("config");
    assert_eq!(config["created"], "1970-01-01T00:00:00Z");
    assert_eq!(config["os"], "wasip2");
    let later = chrono::DateTime::from_timestamp(1_700_000_000, 0).expect("time");
    let (m3, _, _) = wasm_artifact("r/x:1", EMPTY_COMPONENT.to_vec(), later).expect("later");
    assert_ne!(m1.config.digest, m3.config.digest, "created is part of the config");
    for bytes in [b"\0asm\x01\0\0\0".to_vec(), b"hello".to_vec()] {
        let Err(e) = wasm_artifact("plugin.wasm", bytes, t) else { panic!("not a component, yet accepted") };
        assert_eq!(e.reason(), "NotAComponent", "{e}");
    }
}

#[test]
fn client_errors_map_to_status_reasons() {
    let r = "127.0.0.1:5000/x:1";
    let envelope = |code: &str| -> OciEnvelope {
        serde_json::from_str(&format!(r#"{{"errors":[{{"code":"{code}","message":"m"}}]}}"#)).expect("envelope")
    };
    let reg = |code: &str| OciDistributionError::RegistryError { envelope: envelope(code), url: "u".into() };
    let server = |code: u16| OciDistributionError::ServerError { code, url: "u".into(), message: "m".into() };
    let cases: Vec<(OciDistributionError, &str)> = vec![
        (reg("MANIFEST_UNKNOWN"), "NotFound"),
        (reg("NAME_UNKNOWN"), "NotFound"),
        (reg("BLOB_UNKNOWN"), "NotFound"),
        (reg("UNAUTHORIZED"), "Unauthorized"),
        (reg("DENIED"), "Unauthorized"),
        (reg("NAME_INVALID"), "InvalidReference"),
        (reg("TOOMANYREQUESTS"), "Unreachable"),
        (reg("MANIFEST_INVALID"), "Unreachable"),
        (server(401), "Unauthorized"),
        (server(403), "Unauthorized"),
        (server(404), "NotFound"),
        (server(502), "Unreachable"),
        (server(503), "Unreachable"),
        (OciDistributionError::UnauthorizedError { url: "u".into() }, "Unauthorized"),
        (OciDistributionError::AuthenticationFailure("no".into()), "Unauthorized"),
        (
            OciDistributionError::DigestError(DigestError::VerificationError {
                expected: D.into(),
                actual: "b".into(),
            }),
            "DigestMismatch",
        ),
        (OciDistributionError::ImageIndexParsingNoPlatformResolverError, "NotAComponent"),
        (OciDistributionError::IncompatibleLayerMediaTypeError("t".into()), "NotAComponent"),
        (OciDistributionError::UnsupportedMediaTypeError("t".into()), "NotAComponent"),
        (OciDistributionError::RegistryNoLocationError, "Unreachable"),
    ];
    for (e, reason) in cases {
        let text = format!("{e}");
        let mapped = OciError::from_client(r, e);
        assert_eq!(mapped.reason(), reason, "{text} -> {mapped}");
        assert!(mapped.to_string().contains(r), "names the reference: {mapped}");
    }
    let too = OciError::TooLarge { reference: r.into(), size: 2, limit: 1 };
    assert_eq!((too.reason(), too.is_transient()), ("TooLarge", false));
    assert!(OciError::Unreachable { reference: r.into(), detail: "x".into() }.is_transient());
}

#[tokio::test]
async fn a_refused_connection_is_unreachable_and_a_silent_registry_times_out() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
    let cfg = OciConfig { insecure: vec!["127.0.0.1".into()], ..OciConfig::default() };
    let e = pull(&format!("127.0.0.1:{port}/x:1"), &Auth::Anonymous, &cfg).await.expect_err("nobody there");
    assert_eq!(e.reason(), "Unreachable", "{e}");
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}/x:1")), "{e}");
    // Accepts connections, never answers: the total timeout ends it.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("listen");
    let addr = silent.local_addr().expect("addr");
    let keep = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            held.push(s);
        }
    });
    let cfg =
        OciConfig { insecure: vec![addr.to_string()], timeout: Duration::from_millis(500), ..OciConfig::default() };
    let started = std::time::Instant::now();
    let e = pull(&format!("{addr}/x:1"), &Auth::Anonymous, &cfg).await.expect_err("silent");
    assert_eq!(e.reason(), "Unreachable", "{e}");
    assert!(started.elapsed() < Duration::from_secs(5), "bounded: {:?}", started.elapsed());
    keep.abort();
}

#[test]
fn source_date_epoch_sets_the_created_time() {
    // The only test touching the variable (tests run in threads of one process).
    std::env::set_var("SOURCE_DATE_EPOCH", "1700000000");
    assert_eq!(created_time().timestamp(), 1_700_000_000);
    std::env::set_var("SOURCE_DATE_EPOCH", "not a number");
    assert_eq!(created_time(), chrono::DateTime::UNIX_EPOCH);
    std::env::remove_var("SOURCE_DATE_EPOCH");
    assert_eq!(created_time(), chrono::DateTime::UNIX_EPOCH);
}

#[test]
fn registries_on_this_machine_are_plain_http_and_a_tls_failure_says_what_to_do() {
    for h in ["localhost", "127.0.0.1", "127.1.2.3", "::1", "[::1]"] {
        assert!(is_loopback(h), "{h}");
    }
    for h in ["registry.example.com", "10.0.0.1", "localhost.example.com", "[::2]"] {
        assert!(!is_loopback(h), "{h}");
    }
    let hint = error::tls_hint("error sending request: received corrupt message of type InvalidContentType");
    assert!(hint.contains("--insecure-registry HOST:PORT"), "{hint}");
    assert_eq!(error::tls_hint("Connection refused"), "");
}
