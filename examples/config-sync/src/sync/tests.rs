//! Native unit tests of config-sync, through the SDK's fake host (`kwop_guest::testing`): the
//! ConfigSync as JSON, a fake cache, and the outcome the host would receive. The fixtures under
//! `examples/config-sync/fixtures` check the same behaviours through the WASM component.

use super::*;
use crate::ConfigSyncPlugin;
use kwop_guest::testing::{self, FakeCache};
use kwop_guest::{Finalize, Gvk, Outcome, Severity};

const UID: &str = "uid-sync";

fn config_sync(kind: &str, selector: Value) -> Value {
    json!({
        "apiVersion": "examples.kwop.dev/v1alpha1", "kind": "ConfigSync",
        "metadata": { "name": "app-config", "uid": UID, "generation": 3 },
        "spec": {
            "source": { "kind": kind, "namespace": "platform", "name": "app-config" },
            "namespaceSelector": selector,
        }
    })
}

fn prod() -> Value {
    json!({ "matchLabels": { "env": "prod" } })
}

fn namespace(name: &str, env: Option<&str>) -> Value {
    let labels = env.map(|e| json!({ "env": e })).unwrap_or(json!({}));
    json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name, "labels": labels },
            "status": { "phase": "Active" } })
}

fn config_map(ns: &str, data: Value) -> Value {
    json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "app-config", "namespace": ns }, "data": data })
}

/// A copy as the host leaves it: the tracking labels of this ConfigSync and plugin.
fn owned(mut o: Value) -> Value {
    o["metadata"]["labels"] = json!({ "kwop.dev/owner-uid": UID, "kwop.dev/plugin": "config-sync" });
    o["metadata"]["annotations"] = json!({ "kwop.dev/owner": "app-config" });
    o
}

/// Namespaces platform (the source's, labelled too), team-a and team-b (env=prod), team-c (dev).
fn cluster() -> FakeCache {
    FakeCache::new()
        .with(namespace("platform", Some("prod")))
        .with(namespace("team-a", Some("prod")))
        .with(namespace("team-b", Some("prod")))
        .with(namespace("team-c", Some("dev")))
}

fn with_source(cache: FakeCache) -> FakeCache {
    let mut source = config_map("platform", json!({ "level": "info" }));
    // None of this may reach a copy.
    source["metadata"]["labels"] = json!({ "team": "platform" });
    source["metadata"]["annotations"] = json!({ "owner": "ops" });
    source["metadata"]["ownerReferences"] = json!([{ "apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u" }]);
    source["metadata"]["finalizers"] = json!(["example.com/keep"]);
    source["immutable"] = json!(false);
    cache.with(source)
}

fn reconcile(primary: &Value, cache: FakeCache) -> Outcome {
    match testing::reconcile::<ConfigSyncPlugin>(primary, cache) {
        Ok(out) => out,
        Err(f) => panic!("reconcile failed: {f:?}"),
    }
}

fn intents(out: &Outcome) -> Vec<Value> {
    (0..out.applied().len()).filter_map(|i| out.applied_as::<Value>(i)).collect()
}

fn namespaces_of(out: &Outcome) -> Vec<String> {
    intents(out).iter().filter_map(|o| o["metadata"]["namespace"].as_str().map(str::to_string)).collect()
}

fn deleted(out: &Outcome) -> Vec<(String, String)> {
    out.deletes().iter().map(|d| (d.gvk.kind.clone(), d.namespace.clone().unwrap_or_default())).collect()
}

fn ready(out: &Outcome) -> Value {
    out.status_json().map(|s| s["conditions"][0].clone()).unwrap_or_default()
}

fn copy_intent(ns: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "app-config", "namespace": ns,
                      "annotations": { "examples.kwop.dev/config-sync-source": "platform/app-config" } },
        "data": { "level": "info" }
    })
}

#[test]
fn copies_into_every_labelled_namespace_but_the_sources_own() {
    let out = reconcile(&config_sync("ConfigMap", prod()), with_source(cluster()));
    assert_eq!(intents(&out), vec![copy_intent("team-a"), copy_intent("team-b")]);
    assert!(out.deletes().is_empty());
    assert_eq!(
        out.status_json(),
        Some(json!({
            "observedGeneration": 3, "synced": 2,
            "conditions": [{ "type": "Ready", "status": "True", "observedGeneration": 3,
                "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "Synced", "message": "copied to 2 namespaces" }]
        }))
    );
    assert_eq!(out.events(), [Event::normal("Synced", "ConfigSync synced to 2 namespaces")]);
    assert_eq!(out.requeue_after(), None);
}

#[test]
fn a_namespace_without_the_label_gets_nothing() {
    let out = reconcile(&config_sync("ConfigMap", prod()), with_source(cluster()));
    assert!(!namespaces_of(&out).contains(&"team-c".to_string()));
}

#[test]
fn namespaces_being_deleted_get_nothing() {
    let mut gone = namespace("team-d", Some("prod"));
    gone["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let mut terminating = namespace("team-e", Some("prod"));
    terminating["status"]["phase"] = json!("Terminating");
    let out = reconcile(&config_sync("ConfigMap", prod()), with_source(cluster()).with(gone).with(terminating));
    assert_eq!(namespaces_of(&out), ["team-a", "team-b"]);
}

#[test]
fn the_empty_selector_selects_every_namespace() {
    let out = reconcile(&config_sync("ConfigMap", json!({})), with_source(cluster()));
    assert_eq!(namespaces_of(&out), ["team-a", "team-b", "team-c"]);
}

#[test]
fn set_based_expressions_select_as_kubernetes_does() {
    let selector = json!({ "matchExpressions": [{ "key": "env", "operator": "In", "values": ["dev", "test"] }] });
    let out = reconcile(&config_sync("ConfigMap", selector), with_source(cluster()));
    assert_eq!(namespaces_of(&out), ["team-c"]);
    let selector = json!({ "matchExpressions": [{ "key": "env", "operator": "DoesNotExist" }] });
    let out = reconcile(&config_sync("ConfigMap", selector), with_source(cluster().with(namespace("bare", None))));
    assert_eq!(namespaces_of(&out), ["bare"]);
}

#[test]
fn a_copy_whose_namespace_lost_the_label_is_deleted() {
    let cache = with_source(cluster()).with(owned(config_map("team-c", json!({ "level": "info" }))));
    let out = reconcile(&config_sync("ConfigMap", prod()), cache);
    assert_eq!(deleted(&out), [("ConfigMap".to_string(), "team-c".to_string())]);
    assert_eq!(out.deletes()[0].name, "app-config");
    assert_eq!(out.deletes()[0].gvk, Gvk::new("", "v1", "ConfigMap"));
    assert_eq!(namespaces_of(&out), ["team-a", "team-b"]);
}

#[test]
fn a_changed_source_is_the_new_intent_and_a_hand_edit_is_undone() {
    let mut edited = owned(config_map("team-b", json!({ "level": "trace", "extra": "by hand" })));
    edited["metadata"]["labels"]["added"] = json!("by-hand");
    let cache = cluster()
        .with(config_map("platform", json!({ "level": "warn" })))
        .with(owned(config_map("team-a", json!({ "level": "info" }))))
        .with(edited);
    let out = reconcile(&config_sync("ConfigMap", prod()), cache);
    // Both copies are applied as the source is now; the host writes what differs (server-side
    // apply removes the key the plugin no longer sets, and restores the one edited by hand).
    for o in intents(&out) {
        assert_eq!(o["data"], json!({ "level": "warn" }), "{o}");
        assert!(o["metadata"].get("labels").is_none(), "{o}");
    }
    assert_eq!(namespaces_of(&out), ["team-a", "team-b"]);
    assert!(out.deletes().is_empty());
}

#[test]
fn a_foreign_object_is_never_written_and_is_a_conflict() {
    // Not ours: no tracking labels; and one tracked for another ConfigSync.
    let mut other = owned(config_map("team-c", json!({})));
    other["metadata"]["labels"]["kwop.dev/owner-uid"] = json!("uid-other");
    let cache = with_source(cluster()).with(config_map("team-b", json!({ "mine": "yes" }))).with(other);
    let out = reconcile(&config_sync("ConfigMap", json!({})), cache);
    assert_eq!(namespaces_of(&out), ["team-a"]);
    assert!(out.deletes().is_empty(), "a foreign object is never deleted");
    let status = out.status_json().unwrap_or_default();
    assert_eq!((status["synced"].clone(), status["conflicts"].clone()), (json!(1), json!(["team-b", "team-c"])));
    assert_eq!(
        ready(&out),
        json!({ "type": "Ready", "status": "False", "observedGeneration": 3, "lastTransitionTime": "2026-01-01T00:00:00Z",
            "reason": "Conflict",
            "message": "copied to 1 namespace; 2 namespaces hold a ConfigMap \"app-config\" not managed by this ConfigSync: team-b, team-c" })
    );
    assert_eq!(
        out.events(),
        [
            Event::warning("ErrResourceExists", "ConfigMap \"app-config\" in namespace \"team-b\" already exists and is not managed by ConfigSync \"app-config\""),
            Event::warning("ErrResourceExists", "ConfigMap \"app-config\" in namespace \"team-c\" already exists and is not managed by ConfigSync \"app-config\""),
            Event::normal("Synced", "ConfigSync synced to 1 namespace"),
        ]
    );
}

#[test]
fn many_conflicts_make_five_events_and_a_summary() {
    let mut cache = with_source(cluster());
    for i in 0..8 {
        cache = cache.with(namespace(&format!("n{i}"), Some("prod"))).with(config_map(&format!("n{i}"), json!({})));
    }
    let out = reconcile(&config_sync("ConfigMap", prod()), cache);
    let warnings: Vec<&Event> = out.events().iter().filter(|e| e.severity == Severity::Warning).collect();
    assert_eq!(warnings.len(), MAX_CONFLICT_EVENTS + 1);
    assert_eq!(
        warnings[MAX_CONFLICT_EVENTS].message,
        "ConfigMap \"app-config\" also exists and is not managed by ConfigSync \"app-config\" in 3 more namespaces (see status.conflicts)"
    );
    assert!(ready(&out)["message"].as_str().unwrap_or_default().ends_with(": n0, n1, n2 and 5 more"));
    assert_eq!(out.status_json().unwrap_or_default()["conflicts"].as_array().map(Vec::len), Some(8));
}

#[test]
fn a_missing_source_keeps_every_copy_and_says_so() {
    let mut cs = config_sync("ConfigMap", prod());
    cs["status"] = json!({ "observedGeneration": 2, "synced": 2, "conditions": [{ "type": "Ready", "status": "True",
        "observedGeneration": 2, "lastTransitionTime": "2025-12-01T00:00:00Z", "reason": "Synced", "message": "copied to 2 namespaces" }] });
    let cache = cluster()
        .with(owned(config_map("team-a", json!({ "level": "info" }))))
        .with(owned(config_map("team-c", json!({ "level": "info" }))));
    let out = reconcile(&cs, cache);
    assert!(out.applied().is_empty() && out.deletes().is_empty(), "no writes while the source is missing");
    let why = "source ConfigMap \"app-config\" not found in namespace \"platform\": the existing copies are kept until it is back";
    assert_eq!(
        out.status_json(),
        Some(json!({ "observedGeneration": 3, "synced": 2, "conditions": [{ "type": "Ready", "status": "False",
            "observedGeneration": 3, "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "SourceNotFound", "message": why }] }))
    );
    assert_eq!(out.events(), [Event::warning("SourceNotFound", why)]);
}

#[test]
fn an_invalid_selector_is_reported_on_the_object_and_nothing_is_written() {
    let bad = json!({ "matchExpressions": [{ "key": "env", "operator": "In" }] });
    let cache = with_source(cluster()).with(owned(config_map("team-c", json!({}))));
    let out = reconcile(&config_sync("ConfigMap", bad), cache);
    assert!(out.applied().is_empty() && out.deletes().is_empty());
    let why = "spec.namespaceSelector.matchExpressions[0].values: must be non-empty when operator is In";
    assert_eq!((ready(&out)["reason"].as_str(), ready(&out)["message"].as_str()), (Some("InvalidSpec"), Some(why)));
    assert_eq!(out.events(), [Event::warning("InvalidSpec", why)]);
}

#[test]
fn an_invalid_source_is_reported_too() {
    for (kind, ns, name, want) in [
        ("Pod", "platform", "app-config", "spec.source.kind \"Pod\" is not supported"),
        ("ConfigMap", "", "app-config", "spec.source.namespace \"\" is not a valid namespace name"),
        ("Secret", "platform", "Bad_Name", "spec.source.name \"Bad_Name\" is not a valid Secret name"),
    ] {
        let mut cs = config_sync(kind, prod());
        cs["spec"]["source"] = json!({ "kind": kind, "namespace": ns, "name": name });
        let out = reconcile(&cs, with_source(cluster()));
        assert!(out.applied().is_empty() && out.deletes().is_empty());
        assert_eq!(ready(&out)["reason"], "InvalidSpec");
        assert!(out.events()[0].message.starts_with(want), "{:?}", out.events());
    }
}

#[test]
fn a_new_source_kind_deletes_the_old_kinds_copies() {
    let cache = cluster()
        .with(
            json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "app-config", "namespace": "platform" },
                      "type": "Opaque", "data": { "k": "dg==" } }),
        )
        .with(owned(config_map("team-a", json!({}))));
    let out = reconcile(&config_sync("Secret", prod()), cache);
    assert_eq!(deleted(&out), [("ConfigMap".to_string(), "team-a".to_string())]);
    let kinds: Vec<Value> = intents(&out).iter().map(|o| o["kind"].clone()).collect();
    assert_eq!(kinds, [json!("Secret"), json!("Secret")]);
}

#[test]
fn the_source_is_never_deleted_even_if_it_is_one_of_our_copies() {
    // The spec now points at what was a copy: it stays (every other copy follows it).
    let mut cs = config_sync("ConfigMap", prod());
    cs["spec"]["source"]["namespace"] = json!("team-a");
    let out = reconcile(&cs, cluster().with(owned(config_map("team-a", json!({ "level": "info" })))));
    assert!(out.deletes().is_empty(), "{:?}", out.deletes());
    assert_eq!(namespaces_of(&out), ["platform", "team-b"]);
}

#[test]
fn a_steady_ready_condition_keeps_its_transition_time() {
    let first = reconcile(&config_sync("ConfigMap", prod()), with_source(cluster()));
    let mut cs = config_sync("ConfigMap", prod());
    cs["status"] = first.status_json().unwrap_or_default();
    let later =
        testing::reconcile_at::<ConfigSyncPlugin>(&cs, with_source(cluster()), Time::from_seconds(1_800_000_000));
    let later = later.unwrap_or_else(|f| panic!("{f:?}"));
    assert_eq!(later.status_json(), first.status_json(), "in sync: the same status, nothing to write");
}

#[test]
fn finalize_deletes_every_copy_wherever_it_is() {
    let mut cs = config_sync("ConfigMap", prod());
    cs["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let cache = with_source(cluster())
        .with(owned(config_map("team-a", json!({}))))
        .with(owned(config_map("team-c", json!({}))))
        .with(owned(
            json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "old", "namespace": "team-b" } }),
        ))
        .with(config_map("team-b", json!({})));
    let f: Finalize = testing::finalize::<ConfigSyncPlugin>(&cs, cache).unwrap_or_else(|f| panic!("{f:?}"));
    assert!(f.is_done());
    let got: Vec<(String, String, String)> = f
        .deletes()
        .iter()
        .map(|d| (d.gvk.kind.clone(), d.namespace.clone().unwrap_or_default(), d.name.clone()))
        .collect();
    let want =
        [("ConfigMap", "team-a", "app-config"), ("ConfigMap", "team-c", "app-config"), ("Secret", "team-b", "old")];
    assert_eq!(got, want.map(|(k, n, m)| (k.to_string(), n.to_string(), m.to_string())));
    assert_eq!(f.events(), [Event::normal("Cleaned", "deleted 3 copies")]);
    assert_eq!(f.status_json(), None);
}

#[test]
fn info_declares_the_kinds_and_finalizes() {
    use kwop_guest::Reconciler;
    let info = ConfigSyncPlugin::info();
    assert_eq!(info.name(), "config-sync");
    assert_eq!(info.owned_kinds(), [(Gvk::new("", "v1", "ConfigMap"), true), (Gvk::new("", "v1", "Secret"), true)]);
}
