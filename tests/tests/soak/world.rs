//! What the soak runs on: a control plane of its own (its components are restarted), a registry
//! holding guest-foo v1 and v2, config-sync and the finalizer plugin, three namespace-sharded
//! replicas running them as ReconcilerPlugins (`b` behind a proxy that can cut it off), and the
//! primaries the driver creates, changes and deletes: Foos, Fins (finalized, copies in other
//! namespaces) and one ConfigSync whose source changes.

use super::common::{self, rp};
use super::ops::Op;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use kwop_tests::proxy::Proxy;
use kwop_tests::registry::Registry;
use kwop_tests::shards::{self, FooKey, Ring};
use kwop_tests::{plugins, ControlPlane, Mode};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The member Leases' timing (short, so that a freeze past the lease fits in a round).
pub const LEASE: Duration = Duration::from_secs(6);
pub const RENEW_DEADLINE: Duration = Duration::from_secs(3);
/// The label selecting ReconcilerPlugins and the namespaces config-sync copies into.
const LABEL: &str = "soak";
/// The replicas' slots; `b` talks to the API server through the proxy.
pub const SLOTS: [&str; 3] = ["a", "b", "c"];
const V2_ANNOTATION: &str = "samplecontroller.k8s.io/reconciled-by";

/// The soak's world.
pub struct World {
    pub plane: &'static ControlPlane,
    pub client: Client,
    /// The system namespace (Leases).
    pub system: String,
    /// Where the primaries live.
    pub namespaces: Vec<String>,
    /// config-sync's source namespace.
    pub source_ns: String,
    pub registry: Registry,
    pub proxy: Proxy,
    proxy_kubeconfig: PathBuf,
    pub ring: Ring<'static>,
    /// Slot → the name of its current incarnation (`a1`, `a2`…: each process writes under its own).
    pub current: BTreeMap<&'static str, String>,
    incarnations: usize,
    /// guest-foo's version now (`v1` or `v2`).
    pub version: &'static str,
    pub foos: BTreeSet<FooKey>,
    /// Live Fins (namespace, name) → the namespaces of their copies.
    pub fins: BTreeMap<FooKey, Vec<String>>,
    /// Fins deleted (their copies must go, and they too).
    pub fins_deleted: BTreeSet<FooKey>,
    /// The ConfigSync source's value now.
    pub setting: u64,
    serial: u64,
    /// Changes that did not go through yet (a fault): done again once it healed.
    pending: Vec<Op>,
}

pub fn fins_api(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("test.kwop.dev", "v1", "Fin")),
    )
}

/// The ConfigSyncs.
pub fn syncs(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk("examples.kwop.dev", "v1alpha1", "ConfigSync")),
    )
}

/// guest-foo's grants over `namespaces`.
pub fn foo_grants(namespaces: &[String]) -> serde_json::Value {
    let mut g = rp::foo_grants("samplecontroller.k8s.io/v1alpha1");
    g["namespaces"] = json!(namespaces);
    g
}
impl World {
    /// Starts everything and waits until the ring settled and the plugins are ready.
    pub async fn start(namespaces: usize) -> anyhow::Result<World> {
        let plane: &'static ControlPlane = Box::leak(Box::new(ControlPlane::start(Mode::Api)?));
        let client = plane.client().await?;
        let system = plane.namespace("kwop-system")?;
        let source_ns = plane.namespace("soak-src")?;
        let namespaces = shards::namespaces(plane, "soak", namespaces)?;
        let ns_api: Api<Namespace> = Api::all(client.clone());
        for ns in &namespaces {
            let patch = json!({ "metadata": { "labels": { LABEL: "yes" } } });
            ns_api.patch(ns, &PatchParams::default(), &Patch::Merge(patch)).await?;
        }
        let registry = Registry::start()?;
        let hp = registry.host_port();
        for (file, reference) in [
            (plugins::GUEST_FOO, "guest-foo:v1"),
            (plugins::GUEST_FOO_V2, "guest-foo:v2"),
            (plugins::CONFIG_SYNC, "config-sync:v1"),
            (plugins::FINALIZER, "finalizer:v1"),
        ] {
            rp::push(&hp, Path::new(file), &format!("{hp}/soak/{reference}"))?;
        }
        let everywhere: Vec<String> = namespaces.iter().chain([&source_ns]).cloned().collect();
        let oci = |r: &str| json!({ "oci": format!("{hp}/soak/{r}") });
        rp::apply_rp(
            &client,
            "guest-foo",
            LABEL,
            json!({ "source": oci("guest-foo:v1"), "grants": foo_grants(&namespaces) }),
        )
        .await?;
        let across = |kind: &str| json!({ "apiVersion": "v1", "kind": kind, "acrossNamespaces": true });
        let grants = json!({
            "primary": { "apiVersion": "examples.kwop.dev/v1alpha1", "kind": "ConfigSync" },
            "owns": [across("ConfigMap"), across("Secret")],
            "reads": [{ "apiVersion": "v1", "kind": "Namespace" }],
            "namespaces": everywhere,
        });
        rp::apply_rp(&client, "config-sync", LABEL, json!({ "source": oci("config-sync:v1"), "grants": grants }))
            .await?;
        let grants = json!({
            "primary": { "apiVersion": "test.kwop.dev/v1", "kind": "Fin" },
            "owns": [across("ConfigMap")],
            "namespaces": namespaces,
        });
        rp::apply_rp(&client, "finalizer", LABEL, json!({ "source": oci("finalizer:v1"), "grants": grants })).await?;

        let proxy = Proxy::start(Proxy::upstream_of(&plane.kubeconfig)?)?;
        let proxy_kubeconfig = proxy.kubeconfig(&plane.kubeconfig, plane.dir.join("kubeconfig-b"))?;
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        let flags = vec![
            "--sharding=namespace".to_string(),
            format!("--leader-election-namespace={system}"),
            format!("--reconciler-plugin-selector=kwop.dev/test={LABEL}"),
            format!("--insecure-registry={hp}"),
            format!("--leader-lease-duration={}", ms(LEASE)),
            format!("--leader-renew-deadline={}", ms(RENEW_DEADLINE)),
            "--leader-retry-period=1s".into(),
            "--shutdown-grace=3s".into(),
        ];
        let ring = Ring::reconciler_plugins(plane, common::KWOP, &plane.kubeconfig, flags);
        let mut w = World {
            plane,
            client,
            system,
            namespaces,
            source_ns,
            registry,
            proxy,
            proxy_kubeconfig,
            ring,
            current: BTreeMap::new(),
            incarnations: 0,
            version: "v1",
            foos: BTreeSet::new(),
            fins: BTreeMap::new(),
            fins_deleted: BTreeSet::new(),
            setting: 1,
            serial: 0,
            pending: Vec::new(),
        };
        for slot in SLOTS {
            w.start_replica(slot, true)?;
        }
        w.ring.settled(Duration::from_secs(60)).await?;
        for name in ["guest-foo", "config-sync", "finalizer"] {
            rp::status_where(&w.client, name, "Ready", Duration::from_secs(90), rp::ready).await?;
        }
        let source: ConfigMap =
            serde_json::from_value(json!({ "metadata": { "name": "settings" }, "data": { "setting": "1" } }))?;
        Api::<ConfigMap>::namespaced(w.client.clone(), &w.source_ns).create(&PostParams::default(), &source).await?;
        let sync: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "examples.kwop.dev/v1alpha1", "kind": "ConfigSync", "metadata": { "name": "soak-settings" },
            "spec": {
                "source": { "kind": "ConfigMap", "namespace": w.source_ns, "name": "settings" },
                "namespaceSelector": { "matchLabels": { LABEL: "yes" } },
            }
        }))?;
        syncs(&w.client).create(&PostParams::default(), &sync).await?;
        Ok(w)
    }

    /// A Fin whose `finalize` says "not yet" forever, deleted: a deletion that hangs (with no
    /// Warning event), for the soak's positive control.
    pub async fn hang_a_deletion(&mut self) -> anyhow::Result<()> {
        let ns = self.namespaces[0].clone();
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "test.kwop.dev/v1", "kind": "Fin", "metadata": { "name": "control-never" },
            "spec": { "finalize": "never" }
        }))?;
        fins_api(&self.client, &ns).create(&PostParams::default(), &obj).await?;
        let api = fins_api(&self.client, &ns);
        kwop_tests::wait::until("the control Fin finalizer on", Duration::from_secs(60), || async {
            let f = api.get("control-never").await.map_err(|e| e.to_string())?;
            Ok(f.metadata.finalizers.is_some_and(|f| !f.is_empty()).then_some(()))
        })
        .await?;
        api.delete("control-never", &DeleteParams::default()).await?;
        self.fins_deleted.insert((ns, "control-never".into()));
        Ok(())
    }

    /// Starts a new incarnation in `slot` (waiting until ready, or only until it is live).
    pub fn start_replica(&mut self, slot: &'static str, wait_ready: bool) -> anyhow::Result<()> {
        self.incarnations += 1;
        let name = format!("{slot}{}", self.incarnations);
        let kubeconfig = if slot == "b" { self.proxy_kubeconfig.clone() } else { self.plane.kubeconfig.clone() };
        self.ring.add_with(&name, &kubeconfig, wait_ready)?;
        self.current.insert(slot, name);
        Ok(())
    }

    /// The current incarnation's name in `slot`.
    pub fn name(&self, slot: &str) -> String {
        self.current.get(slot).cloned().unwrap_or_default()
    }

    /// A few changes of primaries: Foos created, scaled and deleted, a Fin created or deleted,
    /// the ConfigSync's source changed. Each waits 3 s at most (the API server or etcd may be
    /// down); one that did not go through is done again once the fault healed ([`World::settle`]).
    pub async fn churn(&mut self, rng: &mut fastrand::Rng) -> usize {
        let mut ops = Vec::new();
        for _ in 0..3 {
            self.serial += 1;
            let ns = self.namespaces[rng.usize(..self.namespaces.len())].clone();
            ops.push(Op::CreateFoo((ns, format!("s{}", self.serial))));
        }
        let live: Vec<FooKey> = self.foos.iter().cloned().collect();
        for _ in 0..2 {
            if !live.is_empty() {
                ops.push(Op::Scale(live[rng.usize(..live.len())].clone(), rng.i64(1..5)));
            }
        }
        if live.len() > 40 {
            ops.push(Op::DeleteFoo(live[rng.usize(..live.len())].clone()));
        }
        if rng.bool() || self.fins.len() < 3 {
            self.serial += 1;
            let i = rng.usize(..self.namespaces.len());
            let elsewhere = (1..3).map(|d| self.namespaces[(i + d) % self.namespaces.len()].clone()).collect();
            ops.push(Op::CreateFin((self.namespaces[i].clone(), format!("fin{}", self.serial)), elsewhere));
        } else if let Some(k) = self.fins.keys().nth(rng.usize(..self.fins.len())).cloned() {
            ops.push(Op::DeleteFin(k));
        }
        if rng.u8(..4) == 0 {
            ops.push(Op::Setting(self.setting + 1));
        }
        let n = ops.len();
        // Once one did not go through, the rest wait too (each would wait its 3 s).
        let mut failing = false;
        for op in ops {
            if failing {
                self.pending.push(op);
            } else {
                failing = !self.apply(op).await;
            }
        }
        n
    }

    /// Does `op` (3 s at most); records it as done, or as pending.
    async fn apply(&mut self, op: Op) -> bool {
        let done = tokio::time::timeout(Duration::from_secs(3), op.run(&self.client, &self.source_ns))
            .await
            .is_ok_and(|r| r.is_ok());
        if !done {
            self.pending.push(op);
            return false;
        }
        match op {
            Op::CreateFoo(k) => {
                self.foos.insert(k);
            }
            Op::DeleteFoo(k) => {
                self.foos.remove(&k);
            }
            Op::CreateFin(k, elsewhere) => {
                self.fins.insert(k, elsewhere);
            }
            Op::DeleteFin(k) => {
                self.fins.remove(&k);
                self.fins_deleted.insert(k);
            }
            Op::Setting(v) => self.setting = self.setting.max(v),
            Op::Scale(..) => {}
        }
        true
    }

    /// Does again what did not go through during a fault, until it does (within `bound`).
    pub async fn settle(&mut self, bound: Duration) -> anyhow::Result<()> {
        let start = std::time::Instant::now();
        while !self.pending.is_empty() {
            anyhow::ensure!(start.elapsed() < bound, "changes not accepted after {bound:?}: {:?}", self.pending);
            for op in std::mem::take(&mut self.pending) {
                self.apply(op).await;
            }
            if !self.pending.is_empty() {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        Ok(())
    }

    /// What has not converged yet (empty when everything has): Foos (status for their generation,
    /// a Deployment with their replicas, written by guest-foo's current version), Fins (copies
    /// made; deleted ones gone with their copies) and the ConfigSync's copies.
    pub async fn unconverged(&self) -> anyhow::Result<Vec<String>> {
        let keys: Vec<FooKey> = self.foos.iter().cloned().collect();
        let mut out: Vec<String> =
            shards::unconverged(&self.client, &keys).await?.into_iter().map(|(n, f)| format!("Foo {n}/{f}")).collect();
        let deps: Api<k8s_openapi::api::apps::v1::Deployment> = Api::all(self.client.clone());
        let want = if self.version == "v2" { Some("guest-foo-v2") } else { None };
        for d in deps.list(&ListParams::default()).await?.items {
            let by = d.metadata.annotations.as_ref().and_then(|a| a.get(V2_ANNOTATION)).map(String::as_str);
            let key = (d.metadata.namespace.clone().unwrap_or_default(), d.metadata.name.clone().unwrap_or_default());
            let owner = (key.0.clone(), key.1.trim_end_matches("-dep").to_string());
            if self.foos.contains(&owner) && by != want {
                out.push(format!("Deployment {}/{} not by guest-foo {}", key.0, key.1, self.version));
            }
        }
        let cms: Api<ConfigMap> = Api::all(self.client.clone());
        let cms: BTreeMap<FooKey, ConfigMap> = cms
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .map(|c| {
                ((c.metadata.namespace.clone().unwrap_or_default(), c.metadata.name.clone().unwrap_or_default()), c)
            })
            .collect();
        for ((ns, name), elsewhere) in &self.fins {
            for e in elsewhere {
                if !cms.contains_key(&(e.clone(), name.clone())) {
                    out.push(format!("Fin {ns}/{name}: no copy in {e}"));
                }
            }
        }
        for (ns, name) in &self.fins_deleted {
            if fins_api(&self.client, ns).get_opt(name).await?.is_some() {
                out.push(format!("Fin {ns}/{name}: deleted, still there"));
            }
            if cms.keys().any(|(_, n)| n == name) {
                out.push(format!("Fin {ns}/{name}: deleted, a copy left"));
            }
        }
        let setting = self.setting.to_string();
        for ns in &self.namespaces {
            let copy = cms.get(&(ns.clone(), "settings".into())).and_then(|c| c.data.as_ref()?.get("setting").cloned());
            if copy.as_deref() != Some(setting.as_str()) {
                out.push(format!("ConfigSync copy in {ns}: {copy:?}, want {setting}"));
            }
        }
        Ok(out)
    }
}
