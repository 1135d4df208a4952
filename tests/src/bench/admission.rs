//! Measurement 11: admission latency at the API server (issue 34). What a client sees for a
//! request that goes through one of kwop's webhooks (the real kube-apiserver calling a real
//! `kwop run` with guest-foo over HTTPS), against the same request with no webhook registered, on
//! the same API server with the same objects: p50 and p99 per call (one client, requests one
//! after another) and under `adm_clients` concurrent clients. The difference is the webhook's
//! cost as a client pays it. Beside them, the mean of the API server's own histogram of the
//! webhook call and of kwop's histogram of its answer (both read from `/metrics`), and kwop's CPU.
//!
//! The order is fixed: every "off" run first (no kwop, no webhook configuration at all, the Foo
//! CRD converting with `strategy: None`), then kwop starts — running guest-foo as a
//! ReconcilerPlugin that is granted the Foo CRD's conversion — registers its webhooks and takes
//! the conversion over, and every "on" run follows on the same plane and namespace.
//!
//! guest-foo validates and mutates, so a create goes through both webhooks: the validate and mutate
//! rows time the same request (each its own run); what each webhook costs on its own is in the
//! second table (the API server's histogram of each call, by type, and kwop's of each route).

use super::controllers::{self, Controller};
use super::histo::Histo;
use super::report::ratio;
use super::scenarios::{cache_dir, say, start_plane};
use super::stats::percentile;
use super::world::{foo_object, foo_resource, warm_up, FOO_GROUP};
use super::Config;
use crate::host::http_get;
use crate::plane::ControlPlane;
use crate::procs::free_port;
use anyhow::{bail, Context, Result};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// A kind of webhook kwop serves. The scenario measures the kinds in [`MEASURED`], and the
/// figure prints rows only for the kinds a run measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hook {
    /// The ValidatingWebhook kwop keeps for guest-foo (`validate`): a server-side dry-run create
    /// of a Foo.
    Validate,
    /// The MutatingWebhook kwop keeps for guest-foo (`mutate`, WIT 0.3): the same dry-run create.
    Mutate,
    /// The Foo CRD's conversion webhook (`convert`, WIT 0.3): a GET of a stored (v1alpha1) Foo at
    /// v1beta1, which makes the API server call it (off: the CRD with `strategy: None`).
    Convert,
}

/// The kinds measured, in the figure's order.
pub const MEASURED: &[Hook] = &[Hook::Validate, Hook::Mutate, Hook::Convert];

/// The stored Foo a conversion reads (a name the dry-run creates never use).
const STORED: &str = "stored";

/// The webhook configuration kwop keeps in the benchmark.
const CONFIGURATION: &str = "kwop-bench-admission";

impl Hook {
    /// Its name in the figure.
    pub fn label(self) -> &'static str {
        match self {
            Hook::Validate => "validate",
            Hook::Mutate => "mutate",
            Hook::Convert => "convert",
        }
    }

    /// What the client sends, for the figure.
    pub fn request(self) -> &'static str {
        match self {
            Hook::Validate | Hook::Mutate => {
                "server-side dry-run create of a Foo (`dryRun=All`: admitted, not stored), through both webhooks when on"
            }
            Hook::Convert => "GET of a stored v1alpha1 Foo at v1beta1 (the API server converts it through the webhook when on)",
        }
    }

    /// The API server's histogram of its call to the webhook, and the labels selecting it.
    fn apiserver_metric(self) -> (&'static str, &'static [(&'static str, &'static str)]) {
        match self {
            Hook::Validate => (
                "apiserver_admission_webhook_admission_duration_seconds",
                &[("name", "guest-foo.kwop.dev"), ("type", "validating")],
            ),
            Hook::Mutate => (
                "apiserver_admission_webhook_admission_duration_seconds",
                &[("name", "guest-foo.kwop.dev"), ("type", "admit")],
            ),
            Hook::Convert => {
                ("apiserver_crd_conversion_webhook_duration_seconds", &[("crd_name", "foos.samplecontroller.k8s.io")])
            }
        }
    }

    /// kwop's histogram of its answers on this route.
    fn kwop_metric(self) -> &'static str {
        match self {
            Hook::Validate => "kwop_admission_duration_seconds",
            Hook::Mutate => "kwop_mutation_duration_seconds",
            Hook::Convert => "kwop_conversion_duration_seconds",
        }
    }

    /// Sends request number `i` of this kind; an error if the API server refused it.
    async fn send(self, api: &Api<DynamicObject>, i: usize) -> Result<()> {
        match self {
            Hook::Validate | Hook::Mutate => {
                let dry = PostParams { dry_run: true, ..PostParams::default() };
                api.create(&dry, &foo_object(FOO_GROUP, i)).await.map(drop).context("dry-run create of a Foo")
            }
            Hook::Convert => {
                let _ = i;
                let beta = ApiResource::from_gvk(&GroupVersionKind::gvk(FOO_GROUP, "v1beta1", "Foo"));
                let ns = api.namespace().unwrap_or_default();
                let at: Api<DynamicObject> = Api::namespaced_with(api.clone().into_client(), ns, &beta);
                at.get(STORED).await.map(drop).context("GET of a Foo at v1beta1")
            }
        }
    }
}

/// Client-side latencies of one run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Latency {
    /// Concurrent clients (1: requests one after another).
    pub clients: usize,
    /// Requests timed, over all clients.
    pub requests: usize,
    /// Median request, seconds.
    pub p50_s: f64,
    /// 99th percentile, seconds.
    pub p99_s: f64,
    /// From the first request to the last answer, seconds.
    pub wall_s: f64,
}

impl Latency {
    /// Requests answered per second.
    pub fn per_second(&self) -> f64 {
        self.requests as f64 / self.wall_s
    }
}

/// One webhook kind, off and on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HookRun {
    /// Which kind.
    pub hook: Hook,
    /// One client, no webhook registered.
    pub seq_off: Latency,
    /// One client, through kwop's webhook.
    pub seq_on: Latency,
    /// Concurrent clients, no webhook registered.
    pub conc_off: Latency,
    /// Concurrent clients, through kwop's webhook.
    pub conc_on: Latency,
    /// The API server's histogram of its webhook calls, during `seq_on` and `conc_on`.
    pub apiserver_seq: Histo,
    /// During `conc_on`.
    pub apiserver_conc: Histo,
    /// kwop's `kwop_admission_duration_seconds` (request in to answer out), during `seq_on`.
    pub kwop_seq: Histo,
    /// During `conc_on`.
    pub kwop_conc: Histo,
    /// kwop's CPU time over `seq_on` and `conc_on`, seconds.
    pub kwop_cpu_s: f64,
}

/// The admission measurement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdmissionRun {
    /// Every kind measured, in [`MEASURED`]'s order.
    pub hooks: Vec<HookRun>,
}

/// Times `range.len()` requests one after another.
async fn timed(hook: Hook, api: Api<DynamicObject>, range: std::ops::Range<usize>) -> Result<Vec<f64>> {
    let mut out = Vec::with_capacity(range.len());
    for i in range {
        let t = Instant::now();
        hook.send(&api, i).await?;
        out.push(t.elapsed().as_secs_f64());
    }
    Ok(out)
}

/// `clients` clients (each its own task), `per_client` requests each.
async fn run(hook: Hook, api: &Api<DynamicObject>, clients: usize, per_client: usize) -> Result<Latency> {
    let t0 = Instant::now();
    let tasks: Vec<_> =
        (0..clients).map(|c| tokio::spawn(timed(hook, api.clone(), c * per_client..(c + 1) * per_client))).collect();
    let mut all = Vec::with_capacity(clients * per_client);
    for t in tasks {
        all.extend(t.await??);
    }
    let wall_s = t0.elapsed().as_secs_f64();
    Ok(Latency { clients, requests: all.len(), p50_s: percentile(&all, 50.0), p99_s: percentile(&all, 99.0), wall_s })
}

/// The sequential run and the concurrent one, each after a few untimed requests (connections
/// opened, caches warm).
async fn both(cfg: &Config, hook: Hook, api: &Api<DynamicObject>) -> Result<(Latency, Latency)> {
    run(hook, api, 1, 20).await?;
    let seq = run(hook, api, 1, cfg.adm_requests).await?;
    run(hook, api, cfg.adm_clients, 3).await?;
    let conc = run(hook, api, cfg.adm_clients, cfg.adm_requests).await?;
    Ok((seq, conc))
}

fn apiserver_histo(plane: &ControlPlane, hook: Hook) -> Result<Histo> {
    let (name, labels) = hook.apiserver_metric();
    Ok(Histo::read(&plane.kubectl_output(&["get", "--raw=/metrics"])?, name, labels))
}

fn kwop_histo(k: &Controller, hook: Hook) -> Result<Histo> {
    let port = k.port.context("not kwop")?;
    Ok(Histo::read(&http_get(port, "/metrics")?.1, hook.kwop_metric(), &[("plugin", "guest-foo")]))
}

/// Waits until a request of `hook` is answered through kwop's webhook (the configuration made,
/// its caBundle in place, the API server's client ready).
async fn until_through(plane: &ControlPlane, hook: Hook, api: &Api<DynamicObject>) -> Result<()> {
    let start = Instant::now();
    loop {
        let before = apiserver_histo(plane, hook)?.count;
        let sent = hook.send(api, 0).await;
        if sent.is_ok() && apiserver_histo(plane, hook)?.count > before {
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(90) {
            bail!("{}: no request went through kwop's webhook within 90 s (last: {sent:?})", hook.label());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Checks that every request of an "on" run went through the webhook, as both sides count.
fn through_all(hook: Hook, what: &str, sent: &Latency, apiserver: &Histo, kwop: &Histo) -> Result<()> {
    let n = sent.requests as f64;
    if apiserver.count != n || kwop.count != n {
        bail!(
            "{} {what}: {n} requests, yet the API server called the webhook {} times and kwop answered {}",
            hook.label(),
            apiserver.count,
            kwop.count
        );
    }
    Ok(())
}

/// The label of the benchmark's ReconcilerPlugin.
const SELECTOR: &str = "kwop.dev/bench=admission";

/// A stored Foo to convert, and the Foo CRD's v1beta1 served (it ships unserved), converting
/// with `strategy: None` until kwop takes the conversion over.
async fn serve_v1beta1(plane: &ControlPlane, client: &kube::Client, api: &Api<DynamicObject>) -> Result<()> {
    let mut stored = foo_object(FOO_GROUP, 0);
    stored.metadata.name = Some(STORED.into());
    // Its own Deployment (kwop reconciles it once on): the dry-run creates name theirs.
    stored.data["spec"]["deploymentName"] = json!(STORED);
    api.create(&PostParams::default(), &stored).await.context("the stored Foo")?;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let serve = json!([{ "op": "replace", "path": "/spec/versions/1/served", "value": true }]);
    crds.patch(
        "foos.samplecontroller.k8s.io",
        &PatchParams::default(),
        &Patch::<()>::Json(serde_json::from_value(serve)?),
    )
    .await
    .context("serving v1beta1")?;
    let start = Instant::now();
    while plane.kubectl_output(&["get", "foos.v1beta1.samplecontroller.k8s.io", "-A"]).is_err() {
        if start.elapsed() > Duration::from_secs(60) {
            bail!("v1beta1 of the Foo CRD not served within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// guest-foo as a ReconcilerPlugin (its component in the ConfigMap `plugins` of `ns`, the host's
/// namespace) granted the Foo CRD's conversion.
async fn granted_guest_foo(client: &kube::Client, ns: &str) -> Result<()> {
    use base64::Engine as _;
    let wasm = base64::engine::general_purpose::STANDARD.encode(std::fs::read(crate::plugins::GUEST_FOO)?);
    let cm: k8s_openapi::api::core::v1::ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "plugins" }, "binaryData": { "guest-foo.wasm": wasm } }))?;
    Api::namespaced(client.clone(), ns).create(&PostParams::default(), &cm).await.context("the plugins ConfigMap")?;
    let (label, value) = SELECTOR.split_once('=').unwrap_or(("kwop.dev/bench", "admission"));
    let rp = json!({
        "apiVersion": "kwop.dev/v1alpha1", "kind": "ReconcilerPlugin",
        "metadata": { "name": "guest-foo-bench", "labels": { label: value } },
        "spec": {
            "source": { "configMap": { "name": "plugins", "key": "guest-foo.wasm" } },
            "grants": {
                "primary": { "apiVersion": format!("{FOO_GROUP}/v1alpha1"), "kind": "Foo" },
                "owns": [{ "apiVersion": "apps/v1", "kind": "Deployment" }],
                "conversion": true,
            },
        },
    });
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("kwop.dev", "v1alpha1", "ReconcilerPlugin"));
    let rps: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    rps.patch("guest-foo-bench", &PatchParams::apply("kwop-bench").force(), &Patch::Apply(&rp))
        .await
        .context("the ReconcilerPlugin")?;
    Ok(())
}

/// Runs the measurement on a fresh plane.
pub async fn admission(cfg: &Config) -> Result<AdmissionRun> {
    let plane = start_plane()?;
    let ns = plane.namespace("admission")?;
    let client = plane.client().await?;
    warm_up(&client, &ns).await?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &foo_resource(FOO_GROUP));
    serve_v1beta1(&plane, &client, &api).await?;
    let mut off = Vec::new();
    for &hook in MEASURED {
        say(format!("admission: {} without a webhook", hook.label()));
        off.push(both(cfg, hook, &api).await?);
    }
    let port = free_port()?;
    let flags = [
        format!("--namespace={ns}"),
        format!("--system-namespace={ns}"),
        format!("--webhook-bind-address=127.0.0.1:{port}"),
        format!("--webhook-url=https://127.0.0.1:{port}"),
        format!("--webhook-configuration={CONFIGURATION}"),
        "--webhook-secret=kwop-bench-webhook".to_string(),
    ];
    granted_guest_foo(&client, &ns).await?;
    let source = ["--reconciler-plugins".to_string(), format!("--reconciler-plugin-selector={SELECTOR}")];
    let k = controllers::kwop_with(&cfg.kwop, &plane, &source, &cache_dir(cfg), &flags)?;
    let mut hooks = Vec::new();
    for (&hook, (seq_off, conc_off)) in MEASURED.iter().zip(off) {
        until_through(&plane, hook, &api).await?;
        say(format!("admission: {} through kwop's webhook", hook.label()));
        let cpu0 = k.cpu();
        run(hook, &api, 1, 20).await?;
        let (a0, k0) = (apiserver_histo(&plane, hook)?, kwop_histo(&k, hook)?);
        let seq_on = run(hook, &api, 1, cfg.adm_requests).await?;
        let (a1, k1) = (apiserver_histo(&plane, hook)?, kwop_histo(&k, hook)?);
        run(hook, &api, cfg.adm_clients, 3).await?;
        let (a2, k2) = (apiserver_histo(&plane, hook)?, kwop_histo(&k, hook)?);
        let conc_on = run(hook, &api, cfg.adm_clients, cfg.adm_requests).await?;
        let (a3, k3) = (apiserver_histo(&plane, hook)?, kwop_histo(&k, hook)?);
        let (apiserver_seq, kwop_seq) = (a1.since(&a0), k1.since(&k0));
        let (apiserver_conc, kwop_conc) = (a3.since(&a2), k3.since(&k2));
        through_all(hook, "one client", &seq_on, &apiserver_seq, &kwop_seq)?;
        through_all(hook, "concurrent clients", &conc_on, &apiserver_conc, &kwop_conc)?;
        let kwop_cpu_s = k.cpu() - cpu0;
        say(format!(
            "  p50 {:.2} → {:.2} ms one client, {:.2} → {:.2} ms {} clients",
            seq_off.p50_s * 1e3,
            seq_on.p50_s * 1e3,
            conc_off.p50_s * 1e3,
            conc_on.p50_s * 1e3,
            cfg.adm_clients
        ));
        hooks.push(HookRun {
            hook,
            seq_off,
            seq_on,
            conc_off,
            conc_on,
            apiserver_seq,
            apiserver_conc,
            kwop_seq,
            kwop_conc,
            kwop_cpu_s,
        });
    }
    k.stop();
    Ok(AdmissionRun { hooks })
}

fn ms(s: f64) -> String {
    if s.is_finite() {
        format!("{:.2} ms", s * 1e3)
    } else {
        "–".into()
    }
}

/// Figure 11.
pub fn markdown(a: &AdmissionRun) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "### 11. Admission latency at the API server\n\n\
         What a client sees, per request, for a request that goes through kwop's webhook (the real kube-apiserver \
         calling `kwop run` with guest-foo over HTTPS, failure policy `Fail`) and for the same request with no \
         webhook registered, on the same API server and namespace; \"on − off\" is the webhook's cost as the client \
         pays it. One client sends its requests one after another; under load, every client does so at once. \
         All \"off\" runs come first (no kwop running), then kwop registers its webhook and the \"on\" runs follow.\n"
    );
    for h in &a.hooks {
        let _ = writeln!(o, "- {}: {}", h.hook.label(), h.hook.request());
    }
    let _ = writeln!(
        o,
        "\n| webhook | clients × requests | p50 off | p50 on | p50 on − off | p50 on / off | p99 off | p99 on | p99 on − off | p99 on / off | requests/s off | requests/s on |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for h in &a.hooks {
        for (off, on) in [(&h.seq_off, &h.seq_on), (&h.conc_off, &h.conc_on)] {
            let _ = writeln!(
                o,
                "| {} | {} × {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.0} |",
                h.hook.label(),
                on.clients,
                on.requests / on.clients.max(1),
                ms(off.p50_s),
                ms(on.p50_s),
                ms(on.p50_s - off.p50_s),
                ratio(on.p50_s, off.p50_s),
                ms(off.p99_s),
                ms(on.p99_s),
                ms(on.p99_s - off.p99_s),
                ratio(on.p99_s, off.p99_s),
                off.per_second(),
                on.per_second()
            );
        }
    }
    let _ = writeln!(
        o,
        "\nThe same \"on\" runs from both ends of each call, read from `/metrics`: the API server's \
         `apiserver_admission_webhook_admission_duration_seconds` (by type: `validating`, `admit`) and \
         `apiserver_crd_conversion_webhook_duration_seconds` (its call to the webhook: connection, TLS, request, \
         answer), and kwop's `kwop_admission_duration_seconds`, `kwop_mutation_duration_seconds` and \
         `kwop_conversion_duration_seconds` (request read to answer written, the plugin's call included). This is \
         where validate and mutate part: each row is that webhook's own call. Means are exact (`_sum / _count`); \
         the API server's buckets (5 ms, 25 ms, …) are too coarse for percentiles, kwop's (×2.5 apart) give the \
         p99 to within a bucket. kwop's CPU is its whole process over the run (both webhooks of a create).\n"
    );
    let _ = writeln!(
        o,
        "| webhook | clients | API server's call, mean | kwop's answer, mean | kwop's answer, p99 (estimated) | kwop CPU per request |\n|---|---:|---:|---:|---:|---:|"
    );
    for h in &a.hooks {
        let requests = (h.seq_on.requests + h.conc_on.requests) as f64;
        let cpu = if requests > 0.0 { ms(h.kwop_cpu_s / requests) } else { "–".into() };
        for (clients, api, kwop) in
            [(h.seq_on.clients, &h.apiserver_seq, &h.kwop_seq), (h.conc_on.clients, &h.apiserver_conc, &h.kwop_conc)]
        {
            let _ = writeln!(
                o,
                "| {} | {clients} | {} | {} | {} | {cpu} |",
                h.hook.label(),
                ms(api.mean()),
                ms(kwop.mean()),
                ms(kwop.quantile(0.99))
            );
        }
    }
    let _ = writeln!(o);
    o
}
