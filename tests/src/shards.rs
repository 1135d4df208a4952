//! Sharded kwop hosts against one control plane (`kwop run --sharding`): a ring of replicas
//! started, killed, stopped and replaced by name; Foos spread over many namespaces; and what the
//! API server's audit log says each replica wrote.

use crate::audit::AuditedWrite;
use crate::host::{http_get, Host};
use crate::plane::ControlPlane;
use anyhow::{bail, Context, Result};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::Client;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The Foo resource (samplecontroller.k8s.io/v1alpha1).
pub fn foo_resource() -> ApiResource {
    crate::bench::world::foo_resource("samplecontroller.k8s.io")
}

/// A Foo's namespace and name.
pub type FooKey = (String, String);

/// Replicas of one ring, by name.
pub struct Ring<'a> {
    plane: &'a ControlPlane,
    bin: String,
    /// A plugin folder, or `None`: the cluster's ReconcilerPlugins.
    plugins: Option<PathBuf>,
    kubeconfig: PathBuf,
    flags: Vec<String>,
    /// Running replicas by name (the name is the POD_NAME each runs with; its user agent carries
    /// `(<name>_`).
    pub hosts: BTreeMap<String, Host>,
}

impl<'a> Ring<'a> {
    /// A ring of `bin` replicas running the plugins in `plugins` with `flags` (sharding flags
    /// included).
    pub fn new(plane: &'a ControlPlane, bin: &str, plugins: &Path, flags: Vec<String>) -> Self {
        Ring {
            plane,
            bin: bin.to_string(),
            plugins: Some(plugins.to_path_buf()),
            kubeconfig: plane.kubeconfig.clone(),
            flags,
            hosts: BTreeMap::new(),
        }
    }

    /// A ring of replicas running the cluster's ReconcilerPlugins as `kubeconfig` (e.g. the
    /// install's service account).
    pub fn reconciler_plugins(plane: &'a ControlPlane, bin: &str, kubeconfig: &Path, flags: Vec<String>) -> Self {
        Ring {
            plane,
            bin: bin.to_string(),
            plugins: None,
            kubeconfig: kubeconfig.to_path_buf(),
            flags,
            hosts: BTreeMap::new(),
        }
    }

    /// Starts a replica named `name` and waits until it is ready.
    pub fn add(&mut self, name: &str) -> Result<()> {
        let kubeconfig = self.kubeconfig.clone();
        self.add_with_kubeconfig(name, &kubeconfig)
    }

    /// Starts a replica named `name` talking to the API server as `kubeconfig` says (e.g.
    /// through a [`crate::proxy::Proxy`] that can cut it off), and waits until it is ready.
    pub fn add_with_kubeconfig(&mut self, name: &str, kubeconfig: &Path) -> Result<()> {
        self.add_with(name, kubeconfig, true)
    }

    /// Starts a replica named `name` as `kubeconfig` says, waiting until it is ready or, when
    /// `wait_ready` is false, until it answers `/healthz` (e.g. while its plugins cannot be
    /// pulled).
    pub fn add_with(&mut self, name: &str, kubeconfig: &Path, wait_ready: bool) -> Result<()> {
        let flags: Vec<&str> = self.flags.iter().map(String::as_str).collect();
        let env = [("POD_NAME", name)];
        let host = match &self.plugins {
            Some(dir) => Host::start_with_env(&self.bin, self.plane, kubeconfig, dir, &flags, &env, wait_ready),
            None => Host::start_reconciler_plugins(&self.bin, self.plane, kubeconfig, &flags, &env, wait_ready),
        }
        .with_context(|| format!("starting replica {name}"))?;
        self.hosts.insert(name.to_string(), host);
        Ok(())
    }

    /// Kills a replica (SIGKILL: it leaves nothing in order).
    pub fn kill(&mut self, name: &str) {
        if let Some(mut h) = self.hosts.remove(name) {
            h.proc.kill();
        }
    }

    /// Stops a replica as Kubernetes does (SIGTERM, then SIGKILL after `grace`); returns its log.
    pub fn stop(&mut self, name: &str, grace: Duration) -> String {
        match self.hosts.remove(name) {
            Some(mut h) => {
                h.proc.stop(grace);
                h.log()
            }
            None => String::new(),
        }
    }

    /// Each replica's `/plugins` shard section.
    pub fn shards(&self) -> BTreeMap<String, Value> {
        self.hosts
            .iter()
            .map(|(n, h)| {
                let v = http_get(h.port, "/plugins")
                    .ok()
                    .and_then(|(_, b)| serde_json::from_str::<Value>(&b).ok())
                    .map(|v| v["shard"].clone())
                    .unwrap_or(Value::Null);
                (n.clone(), v)
            })
            .collect()
    }

    /// Waits until the running replicas count each other and each holds what it should.
    pub async fn settled(&self, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        let n = self.hosts.len() as u64;
        loop {
            let shards = self.shards();
            let done = shards.values().all(|s| {
                s["members"].as_u64() == Some(n)
                    && s["holding"].as_str().is_some_and(|h| !h.is_empty())
                    && s["holding"] == s["target"]
            });
            let ppm: u64 = shards.values().map(|s| s["holdingPpm"].as_u64().unwrap_or(0)).sum();
            if done && ppm.abs_diff(1_000_000) <= n {
                return Ok(());
            }
            if start.elapsed() > timeout {
                bail!("the ring did not settle among {n} replicas within {timeout:?}: {shards:#?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The sum of a metric over one replica's samples with these labels.
    pub fn metric(&self, name: &str, metric: &str, labels: &[(&str, &str)]) -> f64 {
        self.hosts.get(name).and_then(|h| h.metric(metric, labels).ok()).unwrap_or(0.0)
    }
}

/// Namespaces `prefix-0..n` (created).
pub fn namespaces(plane: &ControlPlane, prefix: &str, n: usize) -> Result<Vec<String>> {
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    for ns in &names {
        plane.kubectl_output(&["create", "namespace", ns])?;
    }
    Ok(names)
}

/// Creates `per` Foos (`f0`…, deployment `f0-dep`…, 1 replica) in each namespace.
pub async fn create_foos(client: &Client, namespaces: &[String], per: usize) -> Result<Vec<FooKey>> {
    create_foos_named(client, namespaces, "f", per).await
}

/// Creates `per` Foos (`PREFIX0`…, deployment `PREFIX0-dep`…, 1 replica) in each namespace.
pub async fn create_foos_named(
    client: &Client,
    namespaces: &[String],
    prefix: &str,
    per: usize,
) -> Result<Vec<FooKey>> {
    let keys: Vec<FooKey> =
        namespaces.iter().flat_map(|ns| (0..per).map(move |i| (ns.clone(), format!("{prefix}{i}")))).collect();
    let client = client.clone();
    futures::stream::iter(keys.clone().into_iter().map(move |(ns, name)| {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &foo_resource());
        async move {
            let o: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
                "metadata": { "name": name },
                "spec": { "deploymentName": format!("{name}-dep"), "replicas": 1 }
            }))?;
            api.create(&PostParams::default(), &o).await.with_context(|| format!("creating {ns}/{name}"))?;
            anyhow::Ok(())
        }
    }))
    .buffer_unordered(16)
    .try_collect::<Vec<()>>()
    .await?;
    Ok(keys)
}

/// Sets a Foo's replicas.
pub async fn set_replicas(client: &Client, key: &FooKey, replicas: i64) -> Result<()> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &key.0, &foo_resource());
    api.patch(&key.1, &PatchParams::default(), &Patch::Merge(&json!({ "spec": { "replicas": replicas } }))).await?;
    Ok(())
}

/// The Foos not converged yet: status for another generation, or no Deployment with the replicas
/// asked for.
pub async fn unconverged(client: &Client, keys: &[FooKey]) -> Result<Vec<FooKey>> {
    let foos: Api<DynamicObject> = Api::all_with(client.clone(), &foo_resource());
    let deps: Api<k8s_openapi::api::apps::v1::Deployment> = Api::all(client.clone());
    let mut replicas: BTreeMap<FooKey, Option<i32>> = BTreeMap::new();
    for d in deps.list(&ListParams::default()).await? {
        let ns = d.metadata.namespace.clone().unwrap_or_default();
        let name = d.metadata.name.clone().unwrap_or_default();
        replicas.insert((ns, name), d.spec.and_then(|s| s.replicas));
    }
    let mut ok = BTreeSet::new();
    for f in foos.list(&ListParams::default()).await? {
        let key = (f.metadata.namespace.clone().unwrap_or_default(), f.metadata.name.clone().unwrap_or_default());
        let generation = f.metadata.generation;
        let observed = f.data["status"]["observedGeneration"].as_i64();
        let want = f.data["spec"]["replicas"].as_i64().and_then(|r| i32::try_from(r).ok());
        let dep = f.data["spec"]["deploymentName"].as_str().unwrap_or_default().to_string();
        if observed.is_some() && observed == generation && replicas.get(&(key.0.clone(), dep)) == Some(&want) {
            ok.insert(key);
        }
    }
    Ok(keys.iter().filter(|k| !ok.contains(*k)).cloned().collect())
}

/// Waits until every Foo of `keys` converged; returns how long it took.
pub async fn converged(client: &Client, keys: &[FooKey], timeout: Duration) -> Result<Duration> {
    let start = Instant::now();
    loop {
        let left = unconverged(client, keys).await?;
        if left.is_empty() {
            return Ok(start.elapsed());
        }
        if start.elapsed() > timeout {
            bail!("{} Foos not converged after {timeout:?}, e.g. {:?}", left.len(), &left[..left.len().min(5)]);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The replica (the `name` of `(name_` in the user agent) of an audited write.
fn replica(w: &AuditedWrite) -> Option<String> {
    let (_, rest) = w.user_agent.split_once('(')?;
    Some(rest.split_once('_')?.0.to_string())
}

/// What the replicas wrote, from the API server's audit log.
#[derive(Debug, Default)]
pub struct Audit {
    /// Every write to Foo status and Deployments, by Foo (a Deployment `fN-dep` is Foo `fN`'s),
    /// in the order the API server received them: (replica, write).
    pub by_foo: BTreeMap<FooKey, Vec<(String, AuditedWrite)>>,
    /// When the ring's assignment was written (received), in order: the handovers.
    pub handovers: Vec<String>,
}

/// [`Audit`] of the plane's log.
pub fn audit(plane: &ControlPlane) -> Audit {
    let mut out = Audit::default();
    let mut all = crate::audit::writes(&plane.dir, "kwop/");
    all.sort_by(|a, b| a.received.cmp(&b.received));
    for w in all {
        let Some(r) = replica(&w) else { continue };
        let foo = match (w.resource.as_str(), w.subresource.as_str()) {
            ("foos", _) => w.name.clone(),
            ("deployments", "") => match w.name.strip_suffix("-dep") {
                Some(f) => f.to_string(),
                None => continue,
            },
            // The ring object (`kwop-shard.RING`; member Leases have one more dot).
            ("leases", _) if w.name.starts_with("kwop-shard.") && w.name.matches('.').count() == 1 => {
                if w.code < 300 {
                    out.handovers.push(w.received.clone());
                }
                continue;
            }
            _ => continue,
        };
        out.by_foo.entry((w.namespace.clone(), foo)).or_default().push((r, w));
    }
    out
}

/// What the writes show of two replicas writing one Foo: Foo generations whose status was
/// written by more than one replica, and changes of a Foo's writer with no handover between the
/// last write of the one (answered) and the first of the other.
#[derive(Debug, Default)]
pub struct DoubleWrites {
    /// (Foo, generation) → the replicas that wrote that generation's status.
    pub generations: Vec<(FooKey, i64, BTreeSet<String>)>,
    /// Foo → (the writer before, the writer after) where no assignment write came between.
    pub without_handover: Vec<(FooKey, String, String)>,
    /// Status writes whose generation the audit log showed (what the check could see).
    pub checked: usize,
}

impl DoubleWrites {
    /// Nothing written twice.
    pub fn is_empty(&self) -> bool {
        self.generations.is_empty() && self.without_handover.is_empty()
    }
}

/// [`DoubleWrites`] of what the replicas wrote.
pub fn double_writes(audit: &Audit) -> DoubleWrites {
    let mut d = DoubleWrites::default();
    for (foo, ws) in &audit.by_foo {
        let mut by_gen: BTreeMap<i64, BTreeSet<String>> = BTreeMap::new();
        for (r, w) in ws {
            if let Some(g) = w.request.as_ref().and_then(|b| b["status"]["observedGeneration"].as_i64()) {
                by_gen.entry(g).or_default().insert(r.clone());
                d.checked += 1;
            }
        }
        for (g, rs) in by_gen {
            if rs.len() > 1 {
                d.generations.push((foo.clone(), g, rs));
            }
        }
        for pair in ws.windows(2) {
            let ((before, last), (after, first)) = (&pair[0], &pair[1]);
            if before != after && !audit.handovers.iter().any(|t| last.answered <= *t && *t <= first.received) {
                d.without_handover.push((foo.clone(), before.clone(), after.clone()));
            }
        }
    }
    d
}
