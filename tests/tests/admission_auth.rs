//! Admission with authenticated callers (issue 35, defect 5): given `--webhook-client-ca`, kwop's
//! webhook answers only callers holding a client certificate from that CA. The kube-apiserver gets
//! one through its admission configuration (`--admission-control-config-file`, as
//! docs/admission.md says) and still gets guest-foo's refusal of a bad Foo; a caller with no
//! certificate, or one from another CA, is refused in the TLS handshake; the same caller with the
//! right certificate is answered (the positive control). A CA file that holds no certificate is
//! refused at start-up with its path.

mod common;

use common::*;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::api::Api;
use kwop_tests::{plugins, procs::free_port, wait, ControlPlane, Mode};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A CA: its issuer (to sign client certificates) and its certificate as PEM.
fn ca(name: &str) -> anyhow::Result<(Issuer<'static, KeyPair>, String)> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let pem = params.self_signed(&key)?.pem();
    Ok((Issuer::new(params, key), pem))
}

/// A client certificate signed by `issuer`: (certificate PEM, key PEM).
fn client_cert(issuer: &Issuer<'static, KeyPair>, name: &str) -> anyhow::Result<(String, String)> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    Ok((params.signed_by(&key, issuer)?.pem(), key.serialize_pem()))
}

fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The admission configuration giving the API server `cert` for every webhook it calls.
fn admission_config(dir: &Path, cert: &(String, String)) -> anyhow::Result<std::path::PathBuf> {
    let kubeconfig = dir.join("webhook-kubeconfig.yaml");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nusers:\n- name: \"*\"\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(&cert.0),
            b64(&cert.1)
        ),
    )?;
    let plugin = |name: &str| {
        format!(
            "- name: {name}\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: \"{}\"\n",
            kubeconfig.display()
        )
    };
    let config = dir.join("admission.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n{}{}",
            plugin("ValidatingAdmissionWebhook"),
            plugin("MutatingAdmissionWebhook")
        ),
    )?;
    Ok(config)
}

/// A POST to the webhook trusting its serving CA (`ca_bundle`), presenting `cert` if given:
/// the HTTP status, or the error (a refused handshake).
async fn post(url: &str, ca_bundle: &[u8], cert: Option<&(String, String)>, body: &str) -> Result<u16, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_bundle) {
        roots.add(c.map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let tls = match cert {
        None => builder.with_no_client_auth(),
        Some((crt, key)) => {
            let chain = CertificateDer::pem_slice_iter(crt.as_bytes()).collect::<Result<Vec<_>, _>>();
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| e.to_string())?;
            builder.with_client_auth_cert(chain.map_err(|e| e.to_string())?, key).map_err(|e| e.to_string())?
        }
    };
    let http = reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| e.to_string())?;
    let r = http.post(url).header("content-type", "application/json").body(body.to_string()).send().await;
    r.map(|r| r.status().as_u16()).map_err(|e| format!("{e:?}"))
}

fn review(ns: &str) -> String {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "5e1f0c2a-1", "operation": "CREATE", "name": "x", "namespace": ns,
            "kind": { "group": "samplecontroller.k8s.io", "version": "v1alpha1", "kind": "Foo" },
            "resource": { "group": "samplecontroller.k8s.io", "version": "v1alpha1", "resource": "foos" },
            "userInfo": { "username": "someone" },
            "object": { "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
                "metadata": { "name": "x", "namespace": ns }, "spec": { "deploymentName": "x", "replicas": 1 } },
        }
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn only_callers_with_a_client_certificate_from_the_ca_are_answered() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = std::env::temp_dir().join("kwop-test").join(format!("{}-admission-auth", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (clients_ca, clients_ca_pem) = ca("kwop-webhook-clients")?;
    let (stranger_ca, _) = ca("someone-else")?;
    let apiserver = client_cert(&clients_ca, "kube-apiserver")?;
    let stranger = client_cert(&stranger_ca, "kube-apiserver")?;
    let ca_file = dir.join("webhook-clients-ca.crt");
    std::fs::write(&ca_file, &clients_ca_pem)?;

    let config = admission_config(&dir, &apiserver)?;
    let plane =
        ControlPlane::start_with(Mode::Api, &[&format!("--admission-control-config-file={}", config.display())])?;
    let ns = plane.namespace("adm-auth")?;
    let client = plane.client().await?;
    let plugins = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO)])?;
    let port = free_port()?;
    let args = [
        format!("--namespace={ns}"),
        format!("--system-namespace={ns}"),
        format!("--webhook-bind-address=127.0.0.1:{port}"),
        format!("--webhook-url=https://127.0.0.1:{port}"),
        format!("--webhook-client-ca={}", ca_file.display()),
    ];
    let host = host(&plane, &plugins, &args.iter().map(String::as_str).collect::<Vec<_>>())?;

    // The API server, with its certificate from the CA, is answered: guest-foo's refusal.
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let bundle = wait::until("the webhook configuration with its caBundle", Duration::from_secs(60), || async {
        let c = api.get_opt("kwop").await.map_err(|e| e.to_string())?;
        Ok(c.and_then(|c| c.webhooks?.into_iter().find_map(|w| w.client_config.ca_bundle)).map(|b| b.0))
    })
    .await?;
    let bad = "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata:\n  name: bad\nspec:\n  deploymentName: Bad_Name\n  replicas: 1\n";
    let until = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        let r = plane.kubectl_stdin(&["apply", "-n", &ns, "-f", "-"], bad).map_err(|e| e.to_string());
        match r {
            Err(e) if e.contains("failed calling webhook") && Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(300)).await
            }
            other => break other,
        }
    };
    let refused = refused.expect_err("a bad Foo is refused");
    assert!(refused.contains("is not a valid Deployment name"), "the API server got no answer: {refused}");
    assert!(host.metric("kwop_admission_requests_total", &[("result", "denied")])? >= 1.0);

    // Anyone else is refused in the handshake; the right certificate gets an answer.
    let url = format!("https://127.0.0.1:{port}/validate/guest-foo");
    let body = review(&ns);
    let anonymous = post(&url, &bundle, None, &body).await;
    assert!(anonymous.is_err(), "answered without a client certificate: {anonymous:?}");
    let foreign = post(&url, &bundle, Some(&stranger), &body).await;
    assert!(foreign.is_err(), "answered with another CA's certificate: {foreign:?}");
    assert_eq!(post(&url, &bundle, Some(&apiserver), &body).await, Ok(200), "the positive control");

    // A CA file with no certificate in it: refused at start-up, naming the file.
    let empty = dir.join("empty.crt");
    std::fs::write(&empty, "not a certificate\n")?;
    let out = std::process::Command::new(KWOP)
        .arg("run")
        .arg(format!("--plugins={}", plugins.display()))
        .arg(format!("--webhook-bind-address=127.0.0.1:{}", free_port()?))
        .arg(format!("--webhook-client-ca={}", empty.display()))
        .env("KUBECONFIG", &plane.kubeconfig)
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started with an empty client CA file");
    assert!(stderr.contains("--webhook-client-ca") && stderr.contains("empty.crt"), "{stderr}");
    plane.stop();
    Ok(())
}
