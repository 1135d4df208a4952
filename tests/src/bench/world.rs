//! The benchmark world: Foos created at once, the write floor, a watch that tells when every Foo
//! has converged, and the API server's own request counters.

use crate::plane::ControlPlane;
use anyhow::{anyhow, Context, Result};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use kube::Client;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// sample-controller's group (the shipped CRD).
pub const FOO_GROUP: &str = "samplecontroller.k8s.io";

/// The Foo resource of a group.
pub fn foo_resource(group: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, "v1alpha1", "Foo"))
}

/// Name of Foo number `i` (its Deployment has the same name).
pub fn foo_name(i: usize) -> String {
    format!("foo-{i}")
}

/// Replicas of Foo number `i`: 1, 2, 3, 1, ... (explicit, so defaults play no part).
pub fn replicas_of(i: usize) -> i64 {
    1 + (i % 3) as i64
}

fn index_of(name: &str) -> Option<usize> {
    name.strip_prefix("foo-")?.parse().ok()
}

/// Foo number `i` of a group.
pub fn foo_object(group: &str, i: usize) -> DynamicObject {
    let name = foo_name(i);
    let v = json!({
        "apiVersion": format!("{group}/v1alpha1"), "kind": "Foo",
        "metadata": { "name": name },
        "spec": { "deploymentName": name, "replicas": replicas_of(i) }
    });
    serde_json::from_value(v).unwrap_or_else(|_| DynamicObject::new(&name, &foo_resource(group)))
}

/// Creates Foos `range` in `ns` with `concurrency` requests in flight.
pub async fn create_foos(
    client: &Client,
    group: &str,
    ns: &str,
    range: std::ops::Range<usize>,
    concurrency: usize,
) -> Result<()> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &foo_resource(group));
    futures::stream::iter(range.map(|i| {
        let api = api.clone();
        async move {
            api.create(&PostParams::default(), &foo_object(group, i))
                .await
                .with_context(|| format!("creating {}", foo_name(i)))
        }
    }))
    .buffer_unordered(concurrency.max(1))
    .try_for_each(|_| async { Ok(()) })
    .await
}

/// Warms a fresh namespace up: the first writes in a namespace created moments ago can stall for
/// ~2 s at the API server (seen on this plane: every first Foo create of a run waited 2.0 s), which
/// would land on whichever client writes first. A ConfigMap create and dry-run creates of a Foo and
/// a Deployment (nothing persisted, nothing for a controller to see) take that hit before timing.
pub async fn warm_up(client: &Client, ns: &str) -> Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let cm: ConfigMap = serde_json::from_value(json!({ "metadata": { "name": "bench-warm-up" } }))?;
    match cms.create(&PostParams::default(), &cm).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    let dry = PostParams { dry_run: true, ..PostParams::default() };
    let foos: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &foo_resource(FOO_GROUP));
    foos.create(&dry, &foo_object(FOO_GROUP, usize::MAX)).await?;
    let deps: Api<Deployment> = Api::namespaced(client.clone(), ns);
    deps.create(&dry, &deployment_for(usize::MAX, "00000000-0000-0000-0000-000000000000")?).await?;
    Ok(())
}

/// sample-controller's `newDeployment` for Foo `i` (with its controller owner reference).
pub fn deployment_for(i: usize, foo_uid: &str) -> Result<Deployment> {
    let name = foo_name(i);
    let labels = json!({ "app": "nginx", "controller": name });
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": name, "ownerReferences": [{
            "apiVersion": format!("{FOO_GROUP}/v1alpha1"), "kind": "Foo", "name": name, "uid": foo_uid,
            "controller": true, "blockOwnerDeletion": true }] },
        "spec": { "replicas": replicas_of(i), "selector": { "matchLabels": labels },
            "template": { "metadata": { "labels": labels },
                "spec": { "containers": [ { "name": "nginx", "image": "nginx:latest" } ] } } }
    }))?)
}

/// The write floor: for each Foo, the requests a controller must make at least — create the Foo
/// (as the other runs' creating client does), create its Deployment, write its status — issued
/// directly, `concurrency` Foos in flight, no watch, no cache, no client-side throttling.
pub async fn floor(client: &Client, ns: &str, range: std::ops::Range<usize>, concurrency: usize) -> Result<()> {
    let foos: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &foo_resource(FOO_GROUP));
    let deps: Api<Deployment> = Api::namespaced(client.clone(), ns);
    futures::stream::iter(range.map(|i| {
        let (foos, deps) = (foos.clone(), deps.clone());
        async move {
            let foo = foos.create(&PostParams::default(), &foo_object(FOO_GROUP, i)).await?;
            let uid = foo.metadata.uid.clone().unwrap_or_default();
            deps.create(&PostParams::default(), &deployment_for(i, &uid)?).await?;
            let status = json!({ "status": { "availableReplicas": 0 } });
            foos.patch_status(&foo_name(i), &PatchParams::default(), &Patch::Merge(&status)).await?;
            anyhow::Ok(())
        }
    }))
    .buffer_unordered(concurrency.max(1))
    .try_for_each(|_| async { Ok(()) })
    .await
}

/// The write floor with kwop's kind of writes: per Foo, create it, then server-side apply its
/// Deployment (with the controller reference and an intent-hash annotation, field manager
/// `kwop-guest-foo`), server-side apply its status, and post a `Synced` event (events.k8s.io/v1) —
/// the requests kwop makes, without a controller in between.
pub async fn floor_ssa(client: &Client, ns: &str, range: std::ops::Range<usize>, concurrency: usize) -> Result<()> {
    let foos: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &foo_resource(FOO_GROUP));
    let deps: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let events: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("events.k8s.io", "v1", "Event")),
    );
    let pp = PatchParams::apply("kwop-guest-foo").force();
    futures::stream::iter(range.map(|i| {
        let (foos, deps, events, pp) = (foos.clone(), deps.clone(), events.clone(), pp.clone());
        async move {
            let name = foo_name(i);
            let foo = foos.create(&PostParams::default(), &foo_object(FOO_GROUP, i)).await?;
            let uid = foo.metadata.uid.clone().unwrap_or_default();
            let mut d = serde_json::to_value(deployment_for(i, &uid)?)?;
            d["metadata"]["namespace"] = json!(ns);
            d["metadata"]["annotations"] = json!({ "kwop.dev/intent-hash": "000000000000000000000000" });
            deps.patch(&name, &pp, &Patch::Apply(&d)).await?;
            let status = json!({ "apiVersion": format!("{FOO_GROUP}/v1alpha1"), "kind": "Foo",
                "metadata": { "name": name, "namespace": ns }, "status": { "availableReplicas": 0 } });
            foos.patch_status(&name, &pp, &Patch::Apply(&status)).await?;
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            let ev: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": { "name": format!("{name}.{:x}", now.as_nanos()) },
                "eventTime": micro_time(now),
                "reportingController": "kwop-guest-foo", "reportingInstance": "bench",
                "action": "Reconcile", "reason": "Synced", "note": "Foo synced successfully", "type": "Normal",
                "regarding": { "apiVersion": format!("{FOO_GROUP}/v1alpha1"), "kind": "Foo", "name": name,
                    "namespace": ns, "uid": uid }
            }))?;
            events.create(&PostParams::default(), &ev).await?;
            anyhow::Ok(())
        }
    }))
    .buffer_unordered(concurrency.max(1))
    .try_for_each(|_| async { Ok(()) })
    .await
}

/// RFC 3339 with microseconds, UTC (the `MicroTime` format).
fn micro_time(since_epoch: Duration) -> String {
    let secs = since_epoch.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60,
        since_epoch.subsec_micros()
    )
}

/// Convergence as seen by a watch: how many of Foos `0..n` have their status written and their
/// Deployment with the right replicas, and when all of them first did.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    /// Foos converged.
    pub done: usize,
    /// When `done` first reached `n`.
    pub all_at: Option<Instant>,
}

/// Watches Foos and Deployments of one namespace.
pub struct Tracker {
    rx: watch::Receiver<Progress>,
    task: tokio::task::JoinHandle<()>,
    n: usize,
}

enum Seen {
    Foo(usize, bool),
    Dep(usize, bool),
    Listed,
}

impl Tracker {
    /// Starts watching and returns once both watches have listed (so nothing is missed).
    pub async fn start(client: &Client, group: &str, ns: &str, n: usize) -> Result<Tracker> {
        let foos: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &foo_resource(group));
        let deps: Api<Deployment> = Api::namespaced(client.clone(), ns);
        let foo_events = watcher(foos, watcher::Config::default()).filter_map(|e| async move {
            match e.ok()? {
                watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                    let i = index_of(o.metadata.name.as_deref()?)?;
                    let ok =
                        o.data.get("status").and_then(|s| s.get("availableReplicas")).is_some_and(Value::is_number);
                    Some(Seen::Foo(i, ok))
                }
                watcher::Event::Delete(o) => Some(Seen::Foo(index_of(o.metadata.name.as_deref()?)?, false)),
                watcher::Event::InitDone => Some(Seen::Listed),
                watcher::Event::Init => None,
            }
        });
        let dep_events = watcher(deps, watcher::Config::default()).filter_map(|e| async move {
            match e.ok()? {
                watcher::Event::Apply(d) | watcher::Event::InitApply(d) => {
                    let i = index_of(d.metadata.name.as_deref()?)?;
                    let ok = d.spec.as_ref().and_then(|s| s.replicas).map(i64::from) == Some(replicas_of(i));
                    Some(Seen::Dep(i, ok))
                }
                watcher::Event::Delete(d) => Some(Seen::Dep(index_of(d.metadata.name.as_deref()?)?, false)),
                watcher::Event::InitDone => Some(Seen::Listed),
                watcher::Event::Init => None,
            }
        });
        let (tx, rx) = watch::channel(Progress::default());
        let (listed_tx, mut listed_rx) = watch::channel(0usize);
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(futures::stream::select(foo_events, dep_events));
            let (mut foo_ok, mut dep_ok) = (vec![false; n], vec![false; n]);
            let mut done = 0usize;
            let mut listed = 0usize;
            while let Some(ev) = events.next().await {
                let (i, which, ok) = match ev {
                    Seen::Listed => {
                        listed += 1;
                        let _ = listed_tx.send(listed);
                        continue;
                    }
                    Seen::Foo(i, ok) => (i, 0, ok),
                    Seen::Dep(i, ok) => (i, 1, ok),
                };
                if i >= n {
                    continue;
                }
                let before = foo_ok[i] && dep_ok[i];
                if which == 0 {
                    foo_ok[i] = ok;
                } else {
                    dep_ok[i] = ok;
                }
                let after = foo_ok[i] && dep_ok[i];
                if before != after {
                    done = if after { done + 1 } else { done - 1 };
                    tx.send_modify(|p| {
                        p.done = done;
                        if done == n && p.all_at.is_none() {
                            p.all_at = Some(Instant::now());
                        }
                    });
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(60), listed_rx.wait_for(|l| *l >= 2))
            .await
            .map_err(|_| anyhow!("the tracker's watches did not list within 60s"))?
            .map_err(|_| anyhow!("the tracker stopped"))?;
        Ok(Tracker { rx, task, n })
    }

    /// Foos converged so far.
    pub fn done(&self) -> usize {
        self.rx.borrow().done
    }

    /// Waits until every Foo converged; returns when that happened.
    pub async fn wait_all(&mut self, timeout: Duration) -> Result<Instant> {
        let n = self.n;
        let r = match tokio::time::timeout(timeout, self.rx.wait_for(|p| p.all_at.is_some())).await {
            Ok(Ok(p)) => p.all_at.ok_or_else(|| anyhow!("no completion time")),
            Ok(Err(_)) => Err(anyhow!("the tracker stopped")),
            Err(_) => Err(anyhow!("timed out")),
        };
        r.map_err(|e| anyhow!("{e}: {}/{n} Foos converged after {timeout:?}", self.done()))
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Write verbs as `apiserver_request_total` names them.
pub const WRITE_VERBS: &[&str] = &["POST", "PUT", "PATCH", "APPLY", "DELETE"];

/// The API server's request counters: ("resource verb") → count, for write verbs.
pub fn apiserver_writes(plane: &ControlPlane) -> Result<BTreeMap<String, f64>> {
    let text = plane.kubectl_output(&["get", "--raw=/metrics"])?;
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let label = |k: &str| {
            let pat = format!("{k}=\"");
            series.split(&pat).nth(1).and_then(|r| r.split('"').next()).unwrap_or_default().to_string()
        };
        let verb = label("verb");
        if !WRITE_VERBS.contains(&verb.as_str()) {
            continue;
        }
        let resource = match label("subresource").as_str() {
            "" => label("resource"),
            sub => format!("{}/{sub}", label("resource")),
        };
        *out.entry(format!("{resource} {verb}")).or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
    }
    Ok(out)
}

/// Watches of `resource` (e.g. `deployments`) open at kube-apiserver now, by its own gauge
/// `apiserver_longrunning_requests`.
pub fn apiserver_watches(plane: &ControlPlane, resource: &str) -> Result<f64> {
    let text = plane.kubectl_output(&["get", "--raw=/metrics"])?;
    let pat = format!("resource=\"{resource}\"");
    Ok(text
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_longrunning_requests{") && l.contains(&pat) && l.contains("verb=\"WATCH\"")
        })
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum())
}

/// Writes to Foos, Deployments and events between two counter snapshots, by "resource verb".
pub fn writes_between(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .filter(|(k, _)| ["foos", "deployments", "events"].iter().any(|r| k.starts_with(r)))
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v > 0.0)
        .collect()
}

/// Sum of a counter map (0, not -0, when empty).
pub fn total(m: &BTreeMap<String, f64>) -> f64 {
    m.values().fold(0.0, |a, b| a + b)
}

#[cfg(test)]
mod tests {
    #[test]
    fn micro_time_is_rfc3339() {
        assert_eq!(super::micro_time(std::time::Duration::from_micros(0)), "1970-01-01T00:00:00.000000Z");
        let t = std::time::Duration::from_secs(1_709_164_800) + std::time::Duration::from_micros(42);
        assert_eq!(super::micro_time(t), "2024-02-29T00:00:00.000042Z");
    }
}
