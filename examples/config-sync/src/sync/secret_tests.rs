//! Native tests that a Secret's data never leaves the apply intents: not in the status, the
//! events, a failure message or a log line, whatever the reconcile or finalize decides.

use crate::ConfigSyncPlugin;
use kwop_guest::testing::{self, FakeCache};
use kwop_guest::{Failure, Finalize, Outcome};
use serde_json::{json, Value};

/// A recognisable value, and its base64 form (how a Secret's `data` holds it).
const RAW: &str = "hunter2-s3cr3t-value";
const BASE64: &str = "aHVudGVyMi1zM2NyM3QtdmFsdWU=";
const UID: &str = "uid-sync";

fn config_sync(selector: Value) -> Value {
    json!({
        "apiVersion": "examples.kwop.dev/v1alpha1", "kind": "ConfigSync",
        "metadata": { "name": "db-credentials", "uid": UID, "generation": 1 },
        "spec": {
            "source": { "kind": "Secret", "namespace": "platform", "name": "db-credentials" },
            "namespaceSelector": selector,
        }
    })
}

fn secret(ns: &str, tracked: bool) -> Value {
    let mut s = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": { "name": "db-credentials", "namespace": ns, "annotations": {
            // What `kubectl apply` leaves on a Secret: the whole object, data included.
            "kubectl.kubernetes.io/last-applied-configuration":
                format!("{{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"data\":{{\"password\":\"{BASE64}\"}}}}"),
            "note": RAW,
        } },
        "data": { "password": BASE64 },
    });
    if tracked {
        s["metadata"]["labels"] = json!({ "kwop.dev/owner-uid": UID, "kwop.dev/plugin": "config-sync" });
    }
    s
}

fn namespace(name: &str, env: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name, "labels": { "env": env } } })
}

/// Namespaces team-a, team-b (prod) and team-c (dev); the source; our copy in team-c (to be
/// deleted) and a foreign Secret of the same name in team-b (a conflict).
fn cache(with_source: bool) -> FakeCache {
    let c = FakeCache::new()
        .with(namespace("platform", "prod"))
        .with(namespace("team-a", "prod"))
        .with(namespace("team-b", "prod"))
        .with(namespace("team-c", "dev"))
        .with(secret("team-c", true))
        .with(secret("team-b", false));
    if with_source {
        c.with(secret("platform", false))
    } else {
        c
    }
}

fn leaks(text: &str) -> bool {
    text.contains(RAW) || text.contains(BASE64)
}

fn assert_no_leak_in_outcome(what: &str, out: &Outcome) {
    let status = out.status_json().map(|s| s.to_string()).unwrap_or_default();
    assert!(!leaks(&status), "{what}: the status holds Secret data: {status}");
    for e in out.events() {
        assert!(!leaks(&e.reason) && !leaks(&e.message), "{what}: an event holds Secret data: {e:?}");
    }
    assert_no_leak_in_logs(what);
}

fn assert_no_leak_in_failure(what: &str, f: &Failure) {
    assert!(!leaks(&f.message), "{what}: the failure message holds Secret data");
    for e in &f.events {
        assert!(!leaks(&e.message), "{what}: a failure event holds Secret data");
    }
    assert_no_leak_in_logs(what);
}

fn assert_no_leak_in_logs(what: &str) {
    for (level, line) in testing::logs() {
        assert!(!leaks(&line), "{what}: a {level:?} log line holds Secret data: {line}");
    }
}

#[test]
fn secret_data_reaches_the_intents_and_nothing_else() {
    testing::logs();
    let out = match testing::reconcile::<ConfigSyncPlugin>(
        &config_sync(json!({ "matchLabels": { "env": "prod" } })),
        cache(true),
    ) {
        Ok(out) => out,
        Err(f) => {
            assert_no_leak_in_failure("reconcile", &f);
            panic!("reconcile failed: {}", f.message);
        }
    };
    assert_no_leak_in_outcome("reconcile", &out);
    // The data is in the one intent (team-a; team-b is a conflict), exactly as the source has
    // it, and nothing else of the source's metadata is.
    assert_eq!(out.applied().len(), 1);
    let intent: Value = out.applied_as(0).unwrap_or_default();
    assert_eq!(
        intent,
        json!({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": { "name": "db-credentials", "namespace": "team-a",
                "annotations": { "examples.kwop.dev/config-sync-source": "platform/db-credentials" } },
            "data": { "password": BASE64 },
        })
    );
    assert!(!intent.to_string().contains(RAW));
    // The deletion and the conflict are named by kind, namespace and name only.
    assert_eq!(out.deletes().len(), 1);
    assert_eq!(out.status_json().map(|s| s["conflicts"].clone()), Some(json!(["team-b"])));
}

#[test]
fn secret_data_is_nowhere_when_nothing_is_copied() {
    for (what, selector, with_source) in [
        ("source missing", json!({ "matchLabels": { "env": "prod" } }), false),
        (
            "invalid selector",
            json!({ "matchExpressions": [{ "key": "env", "operator": "Exists", "values": ["x"] }] }),
            true,
        ),
        ("nothing selected", json!({ "matchLabels": { "env": "none" } }), true),
    ] {
        testing::logs();
        match testing::reconcile::<ConfigSyncPlugin>(&config_sync(selector), cache(with_source)) {
            Ok(out) => {
                assert_no_leak_in_outcome(what, &out);
                assert!(out.applied().is_empty(), "{what}: nothing to copy");
            }
            Err(f) => assert_no_leak_in_failure(what, &f),
        }
    }
}

#[test]
fn secret_data_is_nowhere_in_finalize() {
    testing::logs();
    let mut cs = config_sync(json!({}));
    cs["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    match testing::finalize::<ConfigSyncPlugin>(&cs, cache(true)) {
        Ok(f) => {
            let f: Finalize = f;
            assert!(f.is_done() && f.deletes().len() == 1);
            let status = f.status_json().map(|s| s.to_string()).unwrap_or_default();
            assert!(!leaks(&status));
            for e in f.events() {
                assert!(!leaks(&e.message), "{e:?}");
            }
            assert_no_leak_in_logs("finalize");
        }
        Err(f) => assert_no_leak_in_failure("finalize", &f),
    }
}

#[test]
fn a_primary_that_does_not_parse_fails_without_data() {
    // The failure message quotes the primary's parse error: the ConfigSync holds no Secret data.
    testing::logs();
    let bad = json!({ "metadata": { "name": 5 } });
    if let Err(f) = testing::reconcile::<ConfigSyncPlugin>(&bad, cache(true)) {
        assert_no_leak_in_failure("unparsable primary", &f);
    }
}
