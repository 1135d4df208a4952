//! Full mode: controller-manager, scheduler and kwok with a fake node, added to a running plane.

use super::{ControlPlane, Mode};
use crate::procs::free_port;
use anyhow::{anyhow, bail, Result};
use std::time::{Duration, Instant};

impl ControlPlane {
    /// Adds controller-manager, scheduler and kwok (with a fake node) if not running yet.
    pub fn ensure(&self, mode: Mode) -> Result<()> {
        let mut current = self.mode.lock().unwrap_or_else(|e| e.into_inner());
        if *current >= mode || self.external {
            return Ok(());
        }
        let pki = self.pki.clone().ok_or_else(|| anyhow!("no PKI"))?;
        let kc = self.kubeconfig.display().to_string();
        for b in ["kube-controller-manager", "kube-scheduler", "kwok"] {
            if !self.bin.join(b).is_file() {
                bail!("{} has no {b} (full mode needs it; run scripts/k8s-bins)", self.bin.display());
            }
        }
        let common = |port: u16| {
            vec![
                format!("--kubeconfig={kc}"),
                format!("--authentication-kubeconfig={kc}"),
                format!("--authorization-kubeconfig={kc}"),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={port}"),
            ]
        };
        let mut kcm = common(free_port()?);
        kcm.extend([
            format!("--service-account-private-key-file={}", pki.sa_key.display()),
            format!("--root-ca-file={}", pki.ca_crt.display()),
            format!("--cluster-signing-cert-file={}", pki.ca_crt.display()),
            format!("--cluster-signing-key-file={}", pki.ca_key.display()),
            "--use-service-account-credentials=false".into(),
            "--controllers=*".into(),
            // Faster reactions than the production defaults.
            "--concurrent-gc-syncs=10".into(),
        ]);
        self.define("kube-controller-manager", &self.bin.join("kube-controller-manager"), kcm);
        self.define("kube-scheduler", &self.bin.join("kube-scheduler"), common(free_port()?));
        self.define(
            "kwok",
            &self.bin.join("kwok"),
            vec![
                format!("--kubeconfig={kc}"),
                format!("--config={}", self.bin.join("kwok-stages.yaml").display()),
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake".into(),
                "--node-lease-duration-seconds=40".into(),
                format!("--server-address=127.0.0.1:{}", free_port()?),
                "--cidr=10.244.0.0/16".into(),
            ],
        );
        for p in ["kube-controller-manager", "kube-scheduler", "kwok"] {
            self.start_proc(p)?;
        }
        // One fake node without taints (sample-controller's Pods have no tolerations).
        self.kubectl_stdin(&["apply", "--server-side", "-f", "-"], FAKE_NODE)?;
        let start = Instant::now();
        loop {
            for p in ["kube-controller-manager", "kube-scheduler", "kwok"] {
                self.check_alive(p)?;
            }
            let ready = self.kubectl_output(&[
                "get",
                "node",
                "kwok-node-0",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
            ]);
            if matches!(&ready, Ok(s) if s.trim() == "True") {
                break;
            }
            if start.elapsed() > Duration::from_secs(90) {
                bail!("fake node not Ready after 90s: {ready:?}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        *current = mode;
        Ok(())
    }
}

const FAKE_NODE: &str = r#"
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-0
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: kwok-node-0
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
status:
  allocatable: {cpu: "64", memory: 256Gi, pods: "1000"}
  capacity: {cpu: "64", memory: 256Gi, pods: "1000"}
"#;
