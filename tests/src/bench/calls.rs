//! The plugin call measured by `benches/plugin_call.rs` (criterion) and by the smoke test:
//! guest-foo reconciling a realistic Foo whose Deployment exists, exactly as the host calls it
//! (the primary and the owned objects as JSON text; the Deployment also answered from the cache
//! import).

use kwop::plugin::{CacheView, EngineConfig, Limits, LoadedPlugin, PluginEngine, Request, StaticCache};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

const FOO_UID: &str = "6f1c7a0e-2d4b-4c59-9a5e-0b3f1d2e7c11";

/// A Foo as the host's cache holds it (managedFields stripped), with its status already written.
pub fn foo() -> Value {
    json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "metadata": {
            "name": "example-foo",
            "namespace": "default",
            "uid": FOO_UID,
            "resourceVersion": "48213",
            "generation": 2,
            "creationTimestamp": "2026-01-15T09:30:12Z",
            "labels": { "team": "payments", "tier": "web" }
        },
        "spec": { "deploymentName": "example-foo", "replicas": 3 },
        "status": { "availableReplicas": 3 }
    })
}

/// The Foo's Deployment as the API server returns it (defaults filled in, status from the
/// Deployment controller), with managedFields stripped as the host's cache does.
pub fn deployment() -> Value {
    let labels = json!({ "app": "nginx", "controller": "example-foo" });
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "example-foo",
            "namespace": "default",
            "uid": "0d9b5c2e-7a41-4f0b-8d3e-5b6a9c1f2e44",
            "resourceVersion": "48250",
            "generation": 2,
            "creationTimestamp": "2026-01-15T09:30:12Z",
            "annotations": {
                "deployment.kubernetes.io/revision": "1",
                "kwop.dev/intent-hash": "3f2a9c0d41b7e85a6c1d2e3f"
            },
            "ownerReferences": [{
                "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "example-foo",
                "uid": FOO_UID, "controller": true, "blockOwnerDeletion": true
            }]
        },
        "spec": {
            "replicas": 3,
            "selector": { "matchLabels": labels },
            "template": {
                "metadata": { "labels": labels },
                "spec": {
                    "containers": [{
                        "name": "nginx", "image": "nginx:latest", "resources": {},
                        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                        "imagePullPolicy": "Always"
                    }],
                    "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                    "securityContext": {}, "schedulerName": "default-scheduler"
                }
            },
            "strategy": { "type": "RollingUpdate", "rollingUpdate": { "maxUnavailable": "25%", "maxSurge": "25%" } },
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600
        },
        "status": {
            "observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
            "conditions": [
                { "type": "Available", "status": "True", "lastUpdateTime": "2026-01-15T09:30:20Z",
                  "lastTransitionTime": "2026-01-15T09:30:20Z", "reason": "MinimumReplicasAvailable",
                  "message": "Deployment has minimum availability." },
                { "type": "Progressing", "status": "True", "lastUpdateTime": "2026-01-15T09:30:20Z",
                  "lastTransitionTime": "2026-01-15T09:30:12Z", "reason": "NewReplicaSetAvailable",
                  "message": "ReplicaSet \"example-foo-5d9c7f8b6c\" has successfully progressed." }
            ]
        }
    })
}

/// The request the host sends for [`foo`]: the Foo and the one Deployment it controls.
pub fn request() -> Request {
    Request { primary: foo().to_string(), owned: vec![deployment().to_string()] }
}

/// The webhook's request for [`foo`] on CREATE (guest-foo admits it).
pub fn admission() -> kwop::plugin::AdmissionRequest {
    kwop::plugin::AdmissionRequest {
        operation: kwop::plugin::Operation::Create,
        object: foo().to_string(),
        old_object: None,
        user: "bench".into(),
        dry_run: false,
        subresource: None,
    }
}

/// A call about [`foo`], starting now.
pub fn call_spec() -> kwop::plugin::CallSpec {
    kwop::plugin::CallSpec::new("default/example-foo".into(), &foo().to_string())
}

/// The cache the plugin reads the Deployment from.
pub fn cache() -> Arc<dyn CacheView> {
    let mut c = StaticCache::default();
    c.insert(deployment());
    Arc::new(c)
}

/// An engine configured as `kwop run` configures it, without the on-disk cache.
pub fn engine() -> anyhow::Result<Arc<PluginEngine>> {
    PluginEngine::new(EngineConfig { cache_dir: None, ..EngineConfig::default() })
}

/// An engine with other instantiation settings than `kwop run`'s (what each setting buys).
pub fn engine_with(pooling: bool, tuning: kwop::plugin::Tuning) -> anyhow::Result<Arc<PluginEngine>> {
    PluginEngine::new(EngineConfig { cache_dir: None, pooling, tuning, ..EngineConfig::default() })
}

/// Loads a plugin file with the default limits.
pub fn load(engine: &Arc<PluginEngine>, path: &Path) -> anyhow::Result<LoadedPlugin> {
    Ok(LoadedPlugin::load_file(engine, path, Limits::default())?)
}

/// Checks that an outcome is the expected one for [`request`]: one Deployment with 3 replicas and
/// the status.
pub fn check_outcome(apply: &[String], status: Option<&str>) -> anyhow::Result<()> {
    anyhow::ensure!(apply.len() == 1, "expected one intent, got {apply:?}");
    let d: Value = serde_json::from_str(&apply[0])?;
    anyhow::ensure!(d["kind"] == "Deployment" && d["spec"]["replicas"] == 3, "unexpected intent {d}");
    let s: Value = serde_json::from_str(status.unwrap_or("null"))?;
    anyhow::ensure!(s["availableReplicas"] == 3, "unexpected status {s}");
    Ok(())
}

/// Checks a plugin's raw result.
pub fn check_raw(r: &kwop::plugin::RawResult) -> anyhow::Result<()> {
    match r {
        Ok(o) => check_outcome(&o.apply, o.status.as_deref()),
        Err(f) => anyhow::bail!("plugin failed: {}", f.message),
    }
}

/// Nanoseconds per call of `f`: median over `batches` batches of `iters` calls, after a warm-up
/// batch (a quick stand-in for criterion, for the smoke test).
pub fn time_per_call(batches: usize, iters: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..iters {
        f();
    }
    let per: Vec<f64> = (0..batches.max(1))
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_nanos() as f64 / iters as f64
        })
        .collect();
    super::stats::median(&per)
}
