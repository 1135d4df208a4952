//! Reaching a control plane: kubectl, an admin client, kubeconfigs with other credentials, CRDs
//! and a namespace per test.

use super::ControlPlane;
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

impl ControlPlane {
    /// Runs kubectl against this plane; returns stdout or an error with stderr.
    pub fn kubectl_output(&self, args: &[&str]) -> Result<String> {
        let out = Command::new(self.bin.join("kubectl"))
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .args(args)
            .output()
            .context("cannot run kubectl")?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            bail!("kubectl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim())
        }
    }

    /// kubectl with YAML on stdin.
    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> Result<String> {
        use std::io::Write;
        let mut child = Command::new(self.bin.join("kubectl"))
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .context("cannot run kubectl")?;
        child.stdin.take().ok_or_else(|| anyhow!("no stdin"))?.write_all(input.as_bytes())?;
        let out = child.wait_with_output()?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            bail!("kubectl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim())
        }
    }

    /// Applies the project's CRDs and the test CRDs, and waits until they are served.
    pub fn install_crds(&self) -> Result<()> {
        for dir in [crate::repo_root().join("crds"), crate::repo_root().join("tests/crds")] {
            if !dir.is_dir() {
                continue;
            }
            let mut files: Vec<_> = std::fs::read_dir(&dir)?.flatten().map(|e| e.path()).collect();
            files.sort();
            for f in files {
                let text = std::fs::read_to_string(&f)?;
                if !text.contains("kind: CustomResourceDefinition") {
                    continue;
                }
                self.kubectl_output(&["apply", "--server-side", "--force-conflicts", "-f", &f.display().to_string()])?;
                let name = text
                    .lines()
                    .skip_while(|l| !l.starts_with("metadata:"))
                    .find_map(|l| l.trim().strip_prefix("name: "))
                    .ok_or_else(|| anyhow!("no metadata.name in {}", f.display()))?
                    .trim()
                    .to_string();
                self.kubectl_output(&["wait", "--for=condition=established", "--timeout=60s", &format!("crd/{name}")])?;
            }
        }
        Ok(())
    }

    /// The CA certificate the API server's serving certificate chains to (what a kubelet puts
    /// in a pod as `ca.crt`); `None` for an external cluster.
    pub fn ca_crt(&self) -> Option<&Path> {
        self.pki.as_ref().map(|p| p.ca_crt.as_path())
    }

    /// A kube client with admin rights.
    pub async fn client(&self) -> Result<kube::Client> {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig)?;
        let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?;
        Ok(kube::Client::try_from(cfg)?)
    }

    /// A kubeconfig like the admin one, but authenticating with a bearer token (e.g. a
    /// service account's, from `kubectl create token`).
    pub fn kubeconfig_with_token(&self, token: &str, file_name: &str) -> Result<PathBuf> {
        let text = std::fs::read_to_string(&self.kubeconfig)?;
        let mut kc: serde_yaml::Value = serde_yaml::from_str(&text)?;
        let users =
            kc.get_mut("users").and_then(|u| u.as_sequence_mut()).ok_or_else(|| anyhow!("kubeconfig has no users"))?;
        for u in users.iter_mut() {
            if let Some(m) = u.as_mapping_mut() {
                let mut user = serde_yaml::Mapping::new();
                user.insert("token".into(), token.into());
                m.insert("user".into(), serde_yaml::Value::Mapping(user));
            }
        }
        let path = self.dir.join(file_name);
        std::fs::write(&path, serde_yaml::to_string(&kc)?)?;
        Ok(path)
    }

    /// Creates a fresh namespace named after the test.
    pub fn namespace(&self, hint: &str) -> Result<String> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let clean: String =
            hint.to_lowercase().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).take(40).collect();
        let name = format!("{}-{}-{n}", clean.trim_matches('-'), std::process::id() % 100_000);
        self.kubectl_output(&["create", "namespace", &name])?;
        Ok(name)
    }
}
