//! A throwaway PKI for a local control plane: a CA, the API server's serving certificate, an
//! admin client certificate in `system:masters`, and the service-account signing key.

use anyhow::Result;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use std::path::{Path, PathBuf};

/// Paths of the generated files.
#[derive(Debug, Clone)]
pub struct Pki {
    /// CA certificate.
    pub ca_crt: PathBuf,
    /// CA key (the controller-manager signs with it).
    pub ca_key: PathBuf,
    /// API server certificate.
    pub server_crt: PathBuf,
    /// API server key.
    pub server_key: PathBuf,
    /// Admin client certificate.
    pub admin_crt: PathBuf,
    /// Admin client key.
    pub admin_key: PathBuf,
    /// Service-account signing key (private).
    pub sa_key: PathBuf,
    /// Its public half (what the API server verifies tokens with).
    pub sa_pub: PathBuf,
}

fn write(dir: &Path, name: &str, text: &str) -> Result<PathBuf> {
    let p = dir.join(name);
    std::fs::write(&p, text)?;
    Ok(p)
}

/// Generates everything into `dir`.
pub fn generate(dir: &Path) -> Result<Pki> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "kwop-test-ca");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca.self_signed(&ca_key)?;
    let ca_key_pem = ca_key.serialize_pem();
    let issuer = Issuer::new(ca, ca_key);

    let server_key = KeyPair::generate()?;
    let mut server = CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
        "10.0.0.1".to_string(),
    ])?;
    server.distinguished_name.push(DnType::CommonName, "kube-apiserver");
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = server.signed_by(&server_key, &issuer)?;

    let admin_key = KeyPair::generate()?;
    let mut admin = CertificateParams::new(Vec::<String>::new())?;
    admin.distinguished_name.push(DnType::CommonName, "admin");
    admin.distinguished_name.push(DnType::OrganizationName, "system:masters");
    admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let admin_cert = admin.signed_by(&admin_key, &issuer)?;

    let sa_key = KeyPair::generate()?;
    Ok(Pki {
        ca_crt: write(dir, "ca.crt", &ca_cert.pem())?,
        ca_key: write(dir, "ca.key", &ca_key_pem)?,
        server_crt: write(dir, "apiserver.crt", &server_cert.pem())?,
        server_key: write(dir, "apiserver.key", &server_key.serialize_pem())?,
        admin_crt: write(dir, "admin.crt", &admin_cert.pem())?,
        admin_key: write(dir, "admin.key", &admin_key.serialize_pem())?,
        sa_key: write(dir, "sa.key", &sa_key.serialize_pem())?,
        sa_pub: write(dir, "sa.pub", &sa_key.public_key_pem())?,
    })
}

/// A kubeconfig for the admin user.
pub fn admin_kubeconfig(pki: &Pki, server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kwop-test\n  cluster:\n    server: {server}\n    certificate-authority: {}\n\
users:\n- name: admin\n  user:\n    client-certificate: {}\n    client-key: {}\n\
contexts:\n- name: kwop-test\n  context:\n    cluster: kwop-test\n    user: admin\ncurrent-context: kwop-test\n",
        pki.ca_crt.display(),
        pki.admin_crt.display(),
        pki.admin_key.display()
    )
}
