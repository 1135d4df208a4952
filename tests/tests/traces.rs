//! OpenTelemetry traces (issue 37) on a real control plane, exported to a real collector
//! (`otelcol-kwop`, built by `scripts/tools otelcol` from the collector's Go modules; its file
//! exporter writes what it received). One Foo's reconcile is one trace with the expected span
//! tree and attributes; an admission call and a hot swap are traces of their own; a plugin that
//! panics writes a Warning event whose annotation names its trace, and the host's log lines carry
//! the same id. Sampling 0 exports no reconcile and puts no trace id anywhere.

mod common;

use common::webhook::*;
use common::*;
use kwop_tests::otel::{is_connected_trace, Collector, Span};
use kwop_tests::{plugins, ControlPlane, Host, Mode};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

fn attr<'a>(s: &'a Span, k: &str) -> Option<&'a str> {
    s.attributes.get(k).and_then(Value::as_str)
}

/// The spans of the trace holding a root span named `root` whose attribute `key` is `value`.
fn trace_of(spans: &[Span], root: &str, key: &str, value: &str, result: Option<&str>) -> Option<Vec<Span>> {
    let r = spans.iter().rev().find(|s| {
        s.name == root
            && s.parent_span_id.is_none()
            && attr(s, key) == Some(value)
            && result.is_none_or(|want| attr(s, "result") == Some(want))
    })?;
    Some(spans.iter().filter(|s| s.trace_id == r.trace_id).cloned().collect())
}

/// The trace of the reconcile of `object` that created its Deployment.
fn creating(spans: &[Span], object: &str) -> Option<Vec<Span>> {
    let created = spans.iter().find(|w| {
        w.name == "write"
            && attr(w, "verb") == Some("apply")
            && attr(w, "kind") == Some("Deployment")
            && attr(w, "result") == Some("created")
            && spans
                .iter()
                .any(|r| r.trace_id == w.trace_id && r.name == "reconcile" && attr(r, "object") == Some(object))
    })?;
    Some(spans.iter().filter(|s| s.trace_id == created.trace_id).cloned().collect())
}

fn child<'a>(trace: &'a [Span], parent: &Span, name: &str) -> Option<&'a Span> {
    trace.iter().find(|s| s.name == name && s.parent_span_id.as_deref() == Some(parent.span_id.as_str()))
}

fn root(trace: &[Span]) -> &Span {
    trace.iter().find(|s| s.parent_span_id.is_none()).unwrap_or_else(|| panic!("no root in {trace:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reconcile_an_admission_call_and_a_hot_swap_are_traces_and_events_lead_to_theirs() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("traces")?;
    let client = plane.client().await?;
    let otel = Collector::start()?;
    let dir = plugins::folder(&[("guest-foo.wasm", plugins::GUEST_FOO), ("chaos.wasm", plugins::CHAOS)])?;
    let endpoint = format!("--otlp-endpoint={}", otel.http_endpoint());
    let a = admitting(plane, &dir, &ns, &[&endpoint])?;
    configured(&client, &a.configuration, "guest-foo").await?;

    // Loading each plugin at start is a trace of its own: load → compile + the info() call.
    let spans = otel.wait_for_spans(WAIT, |s| s.iter().filter(|s| s.name == "plugin.load").count() >= 2)?;
    let load = spans.iter().find(|s| s.name == "plugin.load" && attr(s, "result") == Some("loaded")).expect("a load");
    let load_trace: Vec<Span> = spans.iter().filter(|s| s.trace_id == load.trace_id).cloned().collect();
    is_connected_trace(&load_trace)?;
    assert!(child(&load_trace, load, "compile").is_some(), "{load_trace:#?}");
    assert_eq!(load.service_name.as_deref(), Some("kwop"));

    // Admission: its own trace, the plugin's validate call inside with its world and digest.
    apply_answered(plane, &ns, &foo_yaml("traced", Some("traced"))).await.map_err(anyhow::Error::msg)?;
    let object = format!("{ns}/traced");
    let spans =
        otel.wait_for_spans(WAIT, |s| trace_of(s, "admission", "object", &object, Some("allowed")).is_some())?;
    let adm = trace_of(&spans, "admission", "object", &object, Some("allowed")).expect("admission trace");
    is_connected_trace(&adm)?;
    let call = child(&adm, root(&adm), "plugin.call").unwrap_or_else(|| panic!("no plugin.call: {adm:#?}"));
    assert_eq!(attr(call, "export"), Some("validate"));
    assert!(attr(call, "world").is_some_and(|w| w.starts_with("kwop:reconciler@")), "{call:?}");
    assert_eq!(attr(root(&adm), "plugin"), Some("guest-foo"));

    // The reconcile that created the Deployment: one trace, root `reconcile`, the steps as children.
    let spans = otel.wait_for_spans(WAIT, |s| creating(s, &object).is_some())?;
    let rec = creating(&spans, &object).expect("reconcile trace");
    is_connected_trace(&rec)?;
    let r = root(&rec);
    assert_eq!(attr(r, "plugin"), Some("guest-foo"));
    assert_eq!(attr(r, "kind"), Some("Foo"));
    assert!(attr(r, "plugin.digest").is_some_and(|d| d.starts_with("sha256:") && d.len() == 71), "{r:?}");
    for step in ["queue.wait", "memo.check", "plugin.call", "fence"] {
        assert!(child(&rec, r, step).is_some(), "no {step} under reconcile: {:#?}", names(&rec));
    }
    let call = child(&rec, r, "plugin.call").expect("call");
    assert_eq!(attr(call, "result"), Some("ok"));
    assert!(
        call.attributes.contains_key("duration_ms") && call.attributes.contains_key("memory_peak_bytes"),
        "{call:?}"
    );
    let writes: Vec<&Span> = rec.iter().filter(|s| s.name == "write").collect();
    assert!(
        writes.iter().any(|w| attr(w, "verb") == Some("apply")
            && attr(w, "kind") == Some("Deployment")
            && attr(w, "name") == Some("traced")
            && attr(w, "result") == Some("created")),
        "writes: {writes:#?}"
    );
    assert!(writes.iter().any(|w| attr(w, "verb") == Some("status")), "no status write: {writes:#?}");
    // The flight recorder names the same trace.
    let (_, explain) =
        kwop_tests::host::http_get(a.host.port, &format!("/explain?kind=Foo&namespace={ns}&name=traced"))?;
    let explain: Value = serde_json::from_str(&explain)?;
    let ids: Vec<&str> =
        explain["as_primary"].as_array().into_iter().flatten().filter_map(|f| f["trace_id"].as_str()).collect();
    assert!(ids.contains(&r.trace_id.as_str()), "trace {} not in /explain: {explain}", r.trace_id);

    // A plugin that panics: the Warning event's annotation leads to its trace, so does the log.
    create_chaos(&client, &ns, "boom", json!({ "mode": "panic" })).await?;
    let ev = event_with_reason(&client, &ns, "boom", "ReconcilePluginFailed").await?;
    let id = ev
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("kwop.dev/trace-id"))
        .cloned()
        .unwrap_or_else(|| panic!("no trace annotation on {ev:?}"));
    let spans = otel.wait_for_spans(WAIT, |s| s.iter().any(|s| s.trace_id == id && s.name == "reconcile"))?;
    let failed: Vec<Span> = spans.iter().filter(|s| s.trace_id == id).cloned().collect();
    assert_eq!(attr(root(&failed), "result"), Some("failed"), "{failed:#?}");
    assert_eq!(attr(root(&failed), "object"), Some(format!("{ns}/boom").as_str()));
    assert!(failed.iter().any(|s| s.name == "plugin.call" && attr(s, "result") == Some("trap")), "{failed:#?}");
    assert!(a.host.log().contains(&format!("trace_id={id}")), "the log does not name trace {id}");

    // A hot swap: the new version's load and its swap are traces.
    plugins::replace(&dir, "guest-foo.wasm", plugins::GUEST_FOO_V2)?;
    let spans = otel.wait_for_spans(WAIT, |s| {
        s.iter().any(|s| {
            s.name == "plugin.swap" && attr(s, "plugin") == Some("guest-foo") && attr(s, "version") != Some("0.1.0")
        }) || s.iter().filter(|s| s.name == "plugin.swap" && attr(s, "plugin") == Some("guest-foo")).count() >= 2
    })?;
    let swaps: Vec<&Span> =
        spans.iter().filter(|s| s.name == "plugin.swap" && attr(s, "plugin") == Some("guest-foo")).collect();
    assert!(swaps.len() >= 2, "the start and the swap: {swaps:#?}");
    assert_ne!(attr(swaps[0], "digest"), attr(swaps[swaps.len() - 1], "digest"), "{swaps:#?}");
    remove_configuration(&client, &a.configuration).await;
    drop(a);

    // Sampling 0 (through the standard environment variable for the endpoint): nothing of the
    // reconciles is exported, and events and logs carry no trace id.
    let before = otel.spans()?.len();
    let quiet = Host::start_with_env(
        KWOP,
        plane,
        &plane.kubeconfig,
        &dir,
        &[&format!("--namespace={ns}"), "--otlp-sampling=0"],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &otel.http_endpoint())],
        true,
    )?;
    create_chaos(&client, &ns, "boom2", json!({ "mode": "panic" })).await?;
    let ev = event_with_reason(&client, &ns, "boom2", "ReconcilePluginFailed").await?;
    assert!(ev.metadata.annotations.as_ref().is_none_or(|a| !a.contains_key("kwop.dev/trace-id")), "{ev:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = otel.spans()?;
    assert!(!after[before.min(after.len())..].iter().any(|s| s.name == "reconcile"), "sampling 0 exported a reconcile");
    assert!(!quiet.log().contains("trace_id="), "sampling 0 still logged trace ids");
    Ok(())
}

fn names(trace: &[Span]) -> Vec<(&str, Option<&str>)> {
    trace.iter().map(|s| (s.name.as_str(), s.parent_span_id.as_deref())).collect()
}
