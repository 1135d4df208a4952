//! deploy/observability (issue 37): the Grafana dashboard and the PrometheusRule alerts are what
//! Grafana and the Prometheus Operator take (valid JSON and YAML, every expression parsed as
//! Prometheus would), each alert has a runbook in docs/operate.md, and every metric and label
//! they query is one a live kwop host exports — read from the `/metrics` of a host running on
//! the real control plane with ReconcilerPlugins (one Degraded), the webhook and sharding.

mod common;

use common::rp::*;
use common::webhook::{apply_answered, configured, foo_yaml, remove_configuration};
use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use kwop_tests::docs;
use kwop_tests::host::sum_metric;
use kwop_tests::promql::{self, problems, Exposition, Query};
use kwop_tests::{plugins, procs::free_port, wait, ControlPlane, Host, Mode};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;

const DASHBOARD: &str = "deploy/observability/dashboard.json";
const ALERTS: &str = "deploy/observability/alerts.yaml";
const MONITOR: &str = "deploy/observability/servicemonitor.yaml";
const OPERATE: &str = "docs/operate.md";

fn read(path: &str) -> String {
    std::fs::read_to_string(kwop_tests::repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn dashboard() -> Value {
    serde_json::from_str(&read(DASHBOARD)).unwrap_or_else(|e| panic!("{DASHBOARD} is not JSON: {e}"))
}

/// Every target's expression (Grafana's interval variables stood in for) and every variable's
/// `label_values(METRIC, LABEL)`.
fn dashboard_queries(d: &Value) -> (Vec<Query>, Vec<(String, String)>) {
    let mut queries = Vec::new();
    for p in d["panels"].as_array().into_iter().flatten().filter(|p| p["type"] != "row") {
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().unwrap_or_default();
            queries.push(Query {
                at: format!("panel {:?} {}", p["title"], t["refId"]),
                expr: promql::grafana_to_promql(expr),
            });
        }
    }
    let vars = d["templating"]["list"].as_array().into_iter().flatten();
    let values = vars.filter(|v| v["type"] == "query").filter_map(|v| promql::label_values(v["definition"].as_str()?));
    (queries, values.collect())
}

fn alert_rules() -> Vec<serde_yaml::Value> {
    let rule: serde_yaml::Value =
        serde_yaml::from_str(&read(ALERTS)).unwrap_or_else(|e| panic!("{ALERTS} is not YAML: {e}"));
    assert_eq!(rule["apiVersion"].as_str(), Some("monitoring.coreos.com/v1"), "{ALERTS}");
    assert_eq!(rule["kind"].as_str(), Some("PrometheusRule"), "{ALERTS}");
    let groups = rule["spec"]["groups"].as_sequence().cloned().unwrap_or_default();
    assert!(!groups.is_empty(), "{ALERTS}: spec.groups");
    groups
        .iter()
        .flat_map(|g| {
            assert!(g["name"].as_str().is_some_and(|n| !n.is_empty()), "{ALERTS}: a group without a name");
            let rules = g["rules"].as_sequence().cloned().unwrap_or_default();
            assert!(!rules.is_empty(), "{ALERTS}: group {:?} has no rules", g["name"]);
            rules
        })
        .collect()
}

fn alert_queries() -> Vec<Query> {
    let q = |r: &serde_yaml::Value| Query {
        at: format!("alert {}", r["alert"].as_str().unwrap_or("?")),
        expr: r["expr"].as_str().unwrap_or_default().to_string(),
    };
    alert_rules().iter().map(q).collect()
}

#[test]
fn the_dashboard_is_grafana_json_whose_queries_parse() {
    let d = dashboard();
    let schema = d["schemaVersion"].as_u64().unwrap_or(0);
    assert!((36..=41).contains(&schema), "{DASHBOARD}: schemaVersion {schema}");
    let vars = d["templating"]["list"].as_array().cloned().unwrap_or_default();
    assert!(
        vars.iter().any(|v| v["name"] == "datasource" && v["type"] == "datasource" && v["query"] == "prometheus"),
        "{DASHBOARD}: a `datasource` variable of Prometheus data sources"
    );
    let (mut ids, mut names) = (BTreeSet::new(), BTreeSet::new());
    for p in d["panels"].as_array().expect("panels") {
        assert!(ids.insert(p["id"].as_u64().expect("a panel id")), "{DASHBOARD}: panel id {} twice", p["id"]);
        let g = &p["gridPos"];
        let (x, w) = (g["x"].as_u64().unwrap_or(99), g["w"].as_u64().unwrap_or(99));
        assert!(x + w <= 24 && g["h"].as_u64().is_some() && g["y"].as_u64().is_some(), "{}: gridPos {g}", p["title"]);
        if p["type"] == "row" {
            continue;
        }
        assert!(
            ["timeseries", "stat"].contains(&p["type"].as_str().unwrap_or("")),
            "{}: type {}",
            p["title"],
            p["type"]
        );
        let targets = p["targets"].as_array().cloned().unwrap_or_default();
        assert!(!targets.is_empty(), "{}: no targets", p["title"]);
        for t in targets.iter().chain([p]) {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{}: the datasource variable", p["title"]);
        }
    }
    let (queries, values) = dashboard_queries(&d);
    for q in &queries {
        let selectors = promql::selectors(&q.expr).unwrap_or_else(|e| panic!("{}: {e}", q.at));
        names.extend(selectors.into_iter().map(|s| s.name));
    }
    names.extend(values.into_iter().map(|(m, _)| m));
    assert!(names.iter().all(|n| n.starts_with("kwop_")), "only kwop's metrics: {names:?}");
    // What issue 37 asks the dashboard to show.
    for wanted in [
        "kwop_reconcile_total",
        "kwop_reconcile_duration_seconds_bucket",
        "kwop_plugin_call_duration_seconds_bucket",
        "kwop_plugin_errors_total",
        "kwop_outcomes_rejected_total",
        "kwop_writes_total",
        "kwop_writes_skipped_total",
        "kwop_write_errors_total",
        "kwop_events_total",
        "kwop_admission_requests_total",
        "kwop_admission_duration_seconds_bucket",
        "kwop_shard_range_ppm",
        "kwop_shard_unheld_ppm",
        "kwop_plugin_memory_reserved_bytes",
        "kwop_plugin_calls_stuck",
        "kwop_reconcilerplugin_condition",
        "kwop_cached_objects",
    ] {
        assert!(names.contains(wanted), "{DASHBOARD} does not show {wanted}");
    }
}

#[test]
fn the_alerts_are_a_prometheus_rule_each_with_a_runbook_in_operate_md() {
    let operate = read(OPERATE);
    let anchors = docs::anchors(&operate);
    let runbooks = operate.split("\n## Alerts and what to do\n").nth(1).expect("operate.md: Alerts and what to do");
    let runbooks = runbooks.split("\n## ").next().unwrap_or(runbooks);
    let repository = read("Cargo.toml")
        .lines()
        .find_map(|l| Some(l.strip_prefix("repository = \"")?.trim_end_matches('"').to_string()))
        .expect("the workspace's repository");
    let mut names = BTreeSet::new();
    for r in alert_rules() {
        let name = r["alert"].as_str().expect("every rule is an alert").to_string();
        assert!(names.insert(name.clone()), "{name} twice");
        let expr = r["expr"].as_str().unwrap_or_default();
        promql::selectors(expr).unwrap_or_else(|e| panic!("{name}: {e}"));
        let held = r["for"].as_str().unwrap_or_default();
        promql_parser::util::parse_duration(held).unwrap_or_else(|e| panic!("{name}: for {held:?}: {e}"));
        let severity = r["labels"]["severity"].as_str().unwrap_or_default();
        assert!(["warning", "critical"].contains(&severity), "{name}: severity {severity:?}");
        for a in ["summary", "description"] {
            assert!(r["annotations"][a].as_str().is_some_and(|s| s.len() > 20), "{name}: annotations.{a}");
        }
        let url = r["annotations"]["runbook_url"].as_str().unwrap_or_default();
        let anchor = docs::slug(&name);
        assert_eq!(url, format!("{repository}/blob/main/{OPERATE}#{anchor}"), "{name}: runbook_url");
        assert!(anchors.contains(&anchor), "{OPERATE} has no #{anchor} for {name}");
        assert!(runbooks.contains(&format!("### {name}\n")), "{name}'s runbook is not under Alerts and what to do");
    }
    let issue = [
        "KwopReconcileErrors",
        "KwopPluginCallsStuck",
        "KwopReplicaHoldsNoRange",
        "KwopShardRangeUnheld",
        "KwopWebhookDenialsSpike",
        "KwopReconcilerPluginDegraded",
    ];
    let missing: Vec<_> = issue.iter().filter(|a| !names.contains(**a)).collect();
    assert!(missing.is_empty(), "{ALERTS} lacks {missing:?}");
}

#[test]
fn the_service_monitor_scrapes_the_metrics_service() {
    let monitor: serde_yaml::Value = serde_yaml::from_str(&read(MONITOR)).expect("YAML");
    assert_eq!(
        (monitor["apiVersion"].as_str(), monitor["kind"].as_str()),
        (Some("monitoring.coreos.com/v1"), Some("ServiceMonitor"))
    );
    let text = read("deploy/base/service.yaml");
    let services: Vec<serde_yaml::Value> =
        serde_yaml::Deserializer::from_str(&text).map(|d| serde::Deserialize::deserialize(d).expect("YAML")).collect();
    let metrics = services.iter().find(|s| s["metadata"]["name"] == "kwop-metrics").expect("the kwop-metrics Service");
    let wanted = monitor["spec"]["selector"]["matchLabels"].as_mapping().expect("matchLabels");
    assert!(!wanted.is_empty() && wanted.iter().all(|(k, v)| &metrics["metadata"]["labels"][k] == v), "{wanted:?}");
    let ports: Vec<&str> =
        metrics["spec"]["ports"].as_sequence().into_iter().flatten().filter_map(|p| p["name"].as_str()).collect();
    for e in monitor["spec"]["endpoints"].as_sequence().expect("endpoints") {
        assert!(ports.contains(&e["port"].as_str().unwrap_or("")), "port {:?} is not one of {ports:?}", e["port"]);
        assert_eq!(e["path"].as_str(), Some("/metrics"));
    }
}

/// A ConfigMap `name` in `ns` holding `bytes` under `plugin.wasm` (one per plugin: a ConfigMap
/// holds at most 1 MiB).
async fn plugin_configmap(client: &kube::Client, ns: &str, name: &str, bytes: &[u8]) -> anyhow::Result<Value> {
    use base64::Engine as _;
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": name },
        "binaryData": { "plugin.wasm": base64::engine::general_purpose::STANDARD.encode(bytes) },
    }))?;
    Api::<ConfigMap>::namespaced(client.clone(), ns).create(&PostParams::default(), &cm).await?;
    Ok(json!({ "configMap": { "name": name, "key": "plugin.wasm" } }))
}

fn kind(group_kind: &str, owns: Value) -> Value {
    json!({ "primary": { "apiVersion": "test.kwop.dev/v1", "kind": group_kind }, "owns": owns })
}

#[tokio::test(flavor = "multi_thread")]
async fn every_metric_the_dashboard_and_the_alerts_query_is_exported_by_a_live_host() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("obs")?;
    let client = plane.client().await?;
    // guest-foo with a candidate (shadow), the chaos and finalizer test plugins, and garbage:
    // each family of metrics gets its samples (prometheus-client writes no `# TYPE` line for a
    // family without any).
    let foo = plugin_configmap(&client, &ns, "foo", &std::fs::read(plugins::GUEST_FOO)?).await?;
    let foo_v2 = plugin_configmap(&client, &ns, "foo-v2", &std::fs::read(plugins::GUEST_FOO_V2)?).await?;
    let chaos = plugin_configmap(&client, &ns, "chaos", &std::fs::read(plugins::CHAOS)?).await?;
    let fin = plugin_configmap(&client, &ns, "fin", &std::fs::read(plugins::FINALIZER)?).await?;
    let garbage = plugin_configmap(&client, &ns, "garbage", b"not a component").await?;
    let name = |n: &str| format!("obs-{n}-{ns}");
    let foo_grants = foo_grants("samplecontroller.k8s.io/v1alpha1");
    apply_rp(&client, &name("foo"), &ns, json!({ "source": foo, "candidate": foo_v2, "grants": foo_grants })).await?;
    let chaos_grants = kind("Chaos", json!([{ "apiVersion": "v1", "kind": "ConfigMap" }]));
    let limits = json!({ "timeout": "10s" }); // the looper is in flight for 10 s
    apply_rp(&client, &name("chaos"), &ns, json!({ "source": chaos, "grants": chaos_grants, "limits": limits }))
        .await?;
    let fin_grants = kind("Fin", json!([{ "apiVersion": "v1", "kind": "ConfigMap", "acrossNamespaces": true }]));
    apply_rp(&client, &name("fin"), &ns, json!({ "source": fin, "grants": fin_grants })).await?;
    apply_rp(&client, &name("broken"), &ns, json!({ "source": garbage, "grants": kind("Heal", json!([])) })).await?;

    let port = free_port()?;
    let configuration = format!("kwop-{ns}");
    let flags = [
        format!("--reconciler-plugin-selector=kwop.dev/test={ns}"),
        format!("--namespace={ns}"),
        format!("--system-namespace={ns}"),
        format!("--leader-election-namespace={ns}"),
        "--sharding=namespace".into(),
        "--shard-ring=obs".into(),
        format!("--webhook-bind-address=127.0.0.1:{port}"),
        format!("--webhook-url=https://127.0.0.1:{port}"),
        format!("--webhook-configuration={configuration}"),
        format!("--webhook-secret=webhook-{ns}"),
        format!("--record={}", plane.dir.join(format!("record-{ns}")).display()),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let host = Host::start_reconciler_plugins(KWOP, plane, &plane.kubeconfig, &flags, &[("POD_NAME", "obs-0")], false)?;

    let within = Duration::from_secs(90);
    status_where(&client, &name("foo"), "Ready, its candidate running", within, |s| {
        ready(s) && s.candidate.as_ref().is_some_and(|c| c.state == "Running")
    })
    .await?;
    status_where(&client, &name("chaos"), "Ready", within, ready).await?;
    status_where(&client, &name("fin"), "Ready", within, ready).await?;
    let s = status_where(&client, &name("broken"), "Degraded", within, |s| degraded(s).is_some()).await?;
    let reason = degraded(&s).unwrap_or_default().to_string();
    // A denied and an allowed admission request; a reconcile with its writes, shadowed.
    configured(&client, &configuration, "guest-foo").await?;
    let refused = apply_answered(plane, &ns, &foo_yaml("bad", Some("Bad_Name"))).await.expect_err("refused");
    assert!(refused.contains("denied the request"), "{refused}");
    apply_answered(plane, &ns, &foo_yaml("good", Some("good"))).await.map_err(anyhow::Error::msg)?;
    deployment_where(&client, &ns, "good", "the good Foo's Deployment", |_| true).await?;
    // A trap, an outcome the fence refuses, a write the API server refuses, a call in flight.
    for (n, spec) in [
        ("trap", json!({ "mode": "panic" })),
        ("undeclared", json!({ "mode": "undeclared" })),
        ("invalid", json!({ "mode": "invalid-object" })),
        ("looper", json!({ "mode": "loop" })),
    ] {
        create_chaos(&client, &ns, n, spec).await?;
    }
    // A finalize call: a Fin created and deleted.
    let fins = Api::<kube::api::DynamicObject>::namespaced_with(
        client.clone(),
        &ns,
        &kube::core::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk("test.kwop.dev", "v1", "Fin")),
    );
    let f = serde_json::from_value(
        json!({ "apiVersion": "test.kwop.dev/v1", "kind": "Fin", "metadata": { "name": "gone" }, "spec": {} }),
    )?;
    fins.create(&PostParams::default(), &f).await?;
    wait::until("the Fin's finalizer", within, || async {
        let f = fins.get("gone").await.map_err(|e| e.to_string())?;
        Ok(f.metadata.finalizers.filter(|f| !f.is_empty()).map(|_| ()))
    })
    .await?;
    fins.delete("gone", &DeleteParams::default()).await?;
    // A swap: the candidate's version becomes the active one.
    patch_spec(&client, &name("foo"), json!({ "source": foo_v2, "candidate": null })).await?;

    let text = wait::until("a sample of every family", within, || async {
        let text = host.metrics().map_err(|e| e.to_string())?;
        let has = |metric: &str, labels: &[(&str, &str)]| sum_metric(&text, metric, labels) > 0.0;
        let seen = [
            ("admission denied", has("kwop_admission_requests_total", &[("result", "denied")])),
            ("RP condition", has("kwop_reconcilerplugin_condition", &[("reconcilerplugin", &name("foo"))])),
            ("shard", sum_metric(&text, "kwop_shard_range_ppm", &[]) == 1_000_000.0),
            ("trap", has("kwop_plugin_errors_total", &[("reason", "trap")])),
            ("fence", has("kwop_outcomes_rejected_total", &[])),
            ("422", has("kwop_write_errors_total", &[("reason", "422")])),
            ("in flight", has("kwop_plugin_calls_in_flight", &[])),
            ("finalize", has("kwop_finalize_total", &[("result", "done")])),
            ("load failure", has("kwop_plugin_load_failures_total", &[])),
            ("swap", has("kwop_plugin_swaps_total", &[])),
            ("shadow", has("kwop_candidate_reconciles_total", &[])),
            ("recorded", has("kwop_reconciles_recorded_total", &[])),
        ];
        let missing: Vec<&str> = seen.iter().filter(|(_, s)| !s).map(|(w, _)| *w).collect();
        if missing.is_empty() {
            Ok(Some(text))
        } else {
            Err(format!("no samples yet: {missing:?}"))
        }
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e}\n{}", host.log().lines().rev().take(40).collect::<Vec<_>>().join("\n")))?;
    chaos_api(&client, &ns).delete("looper", &DeleteParams::default()).await?;
    // The ReconcilerPlugin gauge says what the statuses say.
    let condition = |rp: &str, c: &str, reason: &str| {
        let labels = [("reconcilerplugin", rp), ("condition", c), ("reason", reason)];
        sum_metric(&text, "kwop_reconcilerplugin_condition", &labels)
    };
    assert_eq!(condition(&name("broken"), "Degraded", &reason), 1.0, "{text}");
    assert_eq!(condition(&name("fin"), "Degraded", "AsExpected"), 0.0, "{text}");
    assert_eq!(condition(&name("fin"), "Ready", "Running"), 1.0, "{text}");

    let x = Exposition::parse(&text);
    let (mut queries, values) = dashboard_queries(&dashboard());
    queries.extend(alert_queries());
    assert!(queries.len() > 30, "{} queries", queries.len());
    let found = problems(&queries, &values, &x);
    assert!(found.is_empty(), "not what the host exports:\n  {}\nits families: {:?}", found.join("\n  "), x.families);
    // The check itself: a metric the host does not export, a counter by its family name, a
    // label it does not carry are each caught.
    for (expr, why) in [
        ("sum(rate(kwop_reconciles_total[5m]))", "kwop_reconciles_total is not exported"),
        ("sum(rate(kwop_reconcile[5m]))", "kwop_reconcile is not exported"),
        ("sum by (plugins) (rate(kwop_reconcile_total[5m]))", "has no label [\"plugins\"]"),
    ] {
        let caught = problems(&[Query { at: "bogus".into(), expr: expr.into() }], &[], &x);
        assert!(caught.iter().any(|p| p.contains(why)), "{expr}: {caught:?}");
    }

    remove_configuration(&client, &configuration).await;
    for rp in ["foo", "chaos", "fin", "broken"] {
        let _ = rps(&client).delete(&name(rp), &DeleteParams::default()).await;
    }
    drop(host);
    Ok(())
}
