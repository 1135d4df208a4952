//! Decoder and fence tests, plus a property test: arbitrary input never panics and never yields
//! an intent without apiVersion, kind and name.

use super::*;
use crate::outcome::fence::{fence, FenceContext};
use crate::vocab::grants::Namespaces as Granted;
use crate::vocab::PluginInfo;
use proptest::prelude::*;
use serde_json::json;

fn raw(apply: Vec<String>) -> wit::Outcome {
    wit::Outcome { apply, delete: vec![], status: None, events: vec![], requeue_after_ms: None }
}

fn deployment(name: &str) -> String {
    json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":name},"spec":{"replicas":1}}).to_string()
}

#[test]
fn a_valid_outcome_decodes() {
    let mut r = raw(vec![deployment("d")]);
    r.status = Some(r#"{"availableReplicas":1}"#.into());
    r.requeue_after_ms = Some(5);
    let o = decode(r, &OutcomeLimits::default()).expect("valid");
    assert_eq!(o.apply[0].gvk, Gvk::new("apps", "v1", "Deployment"));
    assert_eq!(o.apply[0].name, "d");
    assert_eq!(o.requeue_after, Some(MIN_REQUEUE), "requeue hints are clamped");
}

#[test]
fn malformed_objects_are_rejected() {
    for (bad, why) in [
        ("not json", RejectReason::Malformed),
        ("[1,2]", RejectReason::Malformed),
        (r#"{"kind":"Deployment","metadata":{"name":"x"}}"#, RejectReason::Malformed),
        (r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{}}"#, RejectReason::Malformed),
        (
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x","namespace":3}}"#,
            RejectReason::Malformed,
        ),
        (
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x","ownerReferences":[]}}"#,
            RejectReason::Forbidden,
        ),
        (
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x","resourceVersion":"1"}}"#,
            RejectReason::Forbidden,
        ),
    ] {
        let e = decode(raw(vec![bad.into()]), &OutcomeLimits::default()).expect_err(bad);
        assert_eq!(e.reason, why, "{bad}: {e}");
    }
    let dup = decode(raw(vec![deployment("a"), deployment("a")]), &OutcomeLimits::default()).expect_err("dup");
    assert_eq!(dup.reason, RejectReason::Malformed);
    let mut r = raw(vec![]);
    r.status = Some("[]".into());
    assert!(decode(r, &OutcomeLimits::default()).is_err());
}

#[test]
fn absurd_outcomes_are_rejected() {
    let limits = OutcomeLimits::default();
    let many = (0..101).map(|i| deployment(&format!("d{i}"))).collect();
    assert_eq!(decode(raw(many), &limits).expect_err("many").reason, RejectReason::TooLarge);
    let big = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"k":"x".repeat(2 << 20)}})
        .to_string();
    assert_eq!(decode(raw(vec![big]), &limits).expect_err("big").reason, RejectReason::TooLarge);
    let mut r = raw(vec![]);
    r.events = (0..17)
        .map(|_| wit::Event { severity: wit::EventType::Normal, reason: "R".into(), message: "m".into() })
        .collect();
    assert_eq!(decode(r, &limits).expect_err("events").reason, RejectReason::TooLarge);
    let mut r = raw(vec![]);
    r.events =
        vec![wit::Event { severity: wit::EventType::Normal, reason: "not a reason!".into(), message: "m".into() }];
    assert!(decode(r, &limits).is_err());
}

#[test]
fn long_messages_are_cut_not_rejected() {
    let mut r = raw(vec![]);
    r.events = vec![wit::Event { severity: wit::EventType::Warning, reason: "R".into(), message: "é".repeat(2000) }];
    let o = decode(r, &OutcomeLimits::default()).expect("valid");
    assert!(o.events[0].message.len() <= MAX_MESSAGE);
}

fn info() -> PluginInfo {
    PluginInfo {
        name: "foo".into(),
        version: "1".into(),
        primary: Gvk::new("example.com", "v1", "Foo"),
        owns: vec![Gvk::new("apps", "v1", "Deployment"), Gvk::new("", "v1", "Namespace")],
        across: vec![],
        reads: vec![],
        finalizes: false,
        validates: false,
        mutates: vec![],
        converts: vec![],
    }
}

/// A plugin that owns ConfigMaps across namespaces (and finalizes).
fn across_info() -> PluginInfo {
    let cm = Gvk::new("", "v1", "ConfigMap");
    PluginInfo { name: "sync".into(), owns: vec![cm.clone()], across: vec![cm], finalizes: true, ..info() }
}

fn check(apply: Vec<String>, observed: Option<Value>) -> Result<(), crate::outcome::Rejection> {
    let o = decode(raw(apply), &OutcomeLimits::default())?;
    let info = info();
    let namespaced = |g: &Gvk| g.kind != "Namespace";
    let obs = move |_: &Gvk, _: Option<&str>, _: &str| observed.clone();
    let ctx = FenceContext {
        info: &info,
        primary_namespace: Some("ns"),
        primary_uid: "uid-1",
        granted: &Granted::All,
        namespaced: &namespaced,
        observed: &obs,
    };
    fence(&o, &ctx).map(|_| ())
}

/// The fence for [`across_info`] with a primary in `primary_ns`, within `granted`.
fn check_across(
    apply: Vec<String>,
    primary_ns: Option<&str>,
    granted: &Granted,
    observed: Option<Value>,
) -> Result<Vec<Option<String>>, crate::outcome::Rejection> {
    let o = decode(raw(apply), &OutcomeLimits::default())?;
    let info = across_info();
    let namespaced = |_: &Gvk| true;
    let obs = move |_: &Gvk, _: Option<&str>, _: &str| observed.clone();
    let ctx = FenceContext {
        info: &info,
        primary_namespace: primary_ns,
        primary_uid: "uid-1",
        granted,
        namespaced: &namespaced,
        observed: &obs,
    };
    fence(&o, &ctx).map(|n| n.apply)
}

fn cm(ns: Option<&str>) -> String {
    let mut v = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"copy"}});
    if let Some(ns) = ns {
        v["metadata"]["namespace"] = json!(ns);
    }
    v.to_string()
}

fn tracked(uid: &str, plugin: &str) -> Value {
    json!({"metadata":{"name":"copy","labels":{"kwop.dev/owner-uid": uid, "kwop.dev/plugin": plugin}}})
}

#[test]
fn a_kind_owned_across_namespaces_goes_where_the_grants_allow_and_only_over_its_own_objects() {
    let all = Granted::All;
    // Any namespace; none given means the primary's; a cluster-scoped primary must name one.
    assert_eq!(check_across(vec![cm(Some("b"))], Some("a"), &all, None), Ok(vec![Some("b".into())]));
    assert_eq!(check_across(vec![cm(None)], Some("a"), &all, None), Ok(vec![Some("a".into())]));
    assert_eq!(check_across(vec![cm(Some("b"))], None, &all, None), Ok(vec![Some("b".into())]));
    assert_eq!(check_across(vec![cm(None)], None, &all, None).expect_err("no ns").reason, RejectReason::WrongNamespace);
    // Listed namespaces bound it.
    let listed = Granted::Listed(["a".to_string(), "b".to_string()].into());
    assert!(check_across(vec![cm(Some("b"))], Some("a"), &listed, None).is_ok());
    let e = check_across(vec![cm(Some("c"))], Some("a"), &listed, None).expect_err("c not granted");
    assert_eq!(e.reason, RejectReason::WrongNamespace);
    assert!(e.message.contains("not among the namespaces the plugin is granted"), "{}", e.message);
    // Its own copy (labels for this primary and plugin) is fine; anything else is refused, by name.
    assert!(check_across(vec![cm(Some("b"))], Some("a"), &all, Some(tracked("uid-1", "sync"))).is_ok());
    for other in [tracked("uid-2", "sync"), tracked("uid-1", "other"), json!({"metadata":{"name":"copy"}})] {
        let e = check_across(vec![cm(Some("b"))], Some("a"), &all, Some(other)).expect_err("not ours");
        assert_eq!(e.reason, RejectReason::NotControlled);
    }
}

#[test]
fn finalizers_and_the_hosts_labels_are_the_hosts() {
    let with = |meta: Value| {
        let mut d: Value = serde_json::from_str(&deployment("d")).expect("json");
        for (k, v) in meta.as_object().expect("map") {
            d["metadata"][k] = v.clone();
        }
        decode(raw(vec![d.to_string()]), &OutcomeLimits::default()).map(|_| ())
    };
    let e = with(json!({"finalizers": ["example.com/mine"]})).expect_err("finalizers");
    assert_eq!(e.reason, RejectReason::Forbidden);
    assert!(e.message.contains("metadata.finalizers"), "{}", e.message);
    let e = with(json!({"labels": {"kwop.dev/owner-uid": "someone-else"}})).expect_err("a host label");
    assert!(e.message.contains("labels.kwop.dev/owner-uid"), "{}", e.message);
    let e = with(json!({"annotations": {"kwop.dev/intent-hash": "x"}})).expect_err("a host annotation");
    assert_eq!(e.reason, RejectReason::Forbidden);
    assert!(with(json!({"labels": {"kwop.dev.example/x": "fine", "app": "x"}})).is_ok());
}

fn owned_by(uid: &str) -> Value {
    json!({"metadata":{"name":"d","ownerReferences":[{"kind":"Foo","name":"f","uid":uid,"controller":true}]}})
}

#[test]
fn fence_allows_declared_kinds_in_the_primary_namespace() {
    assert!(check(vec![deployment("d")], None).is_ok());
    assert!(check(vec![deployment("d")], Some(owned_by("uid-1"))).is_ok());
}

#[test]
fn fence_rejects_undeclared_kinds_other_namespaces_and_foreign_objects() {
    let cm = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}).to_string();
    assert_eq!(check(vec![cm], None).expect_err("cm").reason, RejectReason::UndeclaredKind);
    let other = json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"kube-system"}})
        .to_string();
    assert_eq!(check(vec![other], None).expect_err("ns").reason, RejectReason::WrongNamespace);
    let ns = json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n"}}).to_string();
    assert_eq!(check(vec![ns], None).expect_err("scope").reason, RejectReason::WrongNamespace);
    assert_eq!(
        check(vec![deployment("d")], Some(owned_by("uid-2"))).expect_err("foreign").reason,
        RejectReason::NotControlled
    );
    let unowned = json!({"metadata":{"name":"d"}});
    assert_eq!(check(vec![deployment("d")], Some(unowned)).expect_err("unowned").reason, RejectReason::NotControlled);
}

proptest! {
    #[test]
    fn arbitrary_apply_text_never_panics(texts in proptest::collection::vec(".{0,200}", 0..5)) {
        let _ = decode(raw(texts), &OutcomeLimits::default());
    }

    #[test]
    fn arbitrary_json_objects_decode_only_with_identity(
        api in proptest::option::of("[a-z/0-9]{0,10}"),
        kind in proptest::option::of("[A-Za-z]{0,10}"),
        name in proptest::option::of("[a-z0-9.-]{0,10}"),
        extra in proptest::collection::btree_map("[a-zA-Z]{1,8}", any::<i64>(), 0..4),
    ) {
        let mut obj = serde_json::Map::new();
        if let Some(a) = &api { obj.insert("apiVersion".into(), json!(a)); }
        if let Some(k) = &kind { obj.insert("kind".into(), json!(k)); }
        let mut meta = serde_json::Map::new();
        if let Some(n) = &name { meta.insert("name".into(), json!(n)); }
        obj.insert("metadata".into(), Value::Object(meta));
        for (k, v) in extra { obj.entry(k).or_insert(json!(v)); }
        let text = Value::Object(obj).to_string();
        if let Ok(o) = decode(raw(vec![text]), &OutcomeLimits::default()) {
            let i = &o.apply[0];
            prop_assert!(!i.gvk.kind.is_empty() && !i.gvk.version.is_empty() && !i.name.is_empty());
        }
    }
}

proptest! {
    /// Whatever the plugin returns, an outcome the fence accepts only writes declared kinds, in the
    /// primary's namespace, to objects that do not exist or that the primary controls.
    #[test]
    fn the_fence_never_lets_through_a_forbidden_write(
        intents in proptest::collection::vec(
            (
                prop::sample::select(vec!["apps/v1", "v1", "batch/v1", "apps/v2"]),
                prop::sample::select(vec!["Deployment", "ConfigMap", "Namespace", "Job"]),
                proptest::option::of(prop::sample::select(vec!["ns", "other", ""])),
                prop::sample::select(vec!["a", "b", "c"]),
            ),
            0..6,
        ),
        owner in prop::sample::select(vec![None, Some("uid-1"), Some("uid-2")]),
    ) {
        let texts: Vec<String> = intents
            .iter()
            .map(|(api, kind, ns, name)| {
                let mut meta = serde_json::Map::new();
                meta.insert("name".into(), json!(name));
                if let Some(ns) = ns { meta.insert("namespace".into(), json!(ns)); }
                json!({ "apiVersion": api, "kind": kind, "metadata": meta }).to_string()
            })
            .collect();
        let observed = owner.map(owned_by);
        let Ok(o) = decode(raw(texts), &OutcomeLimits::default()) else { return Ok(()) };
        let info = info();
        let namespaced = |g: &Gvk| g.kind != "Namespace";
        let obs = move |_: &Gvk, _: Option<&str>, _: &str| observed.clone();
        let ctx = FenceContext { info: &info, primary_namespace: Some("ns"), primary_uid: "uid-1", granted: &Granted::All, namespaced: &namespaced, observed: &obs };
        if let Ok(ns) = fence(&o, &ctx) {
            for (i, n) in o.apply.iter().zip(&ns.apply) {
                prop_assert!(info.owns.contains(&i.gvk), "undeclared {}", i.gvk);
                prop_assert_eq!(n.as_deref(), Some("ns"));
            }
            if !o.apply.is_empty() {
                prop_assert!(owner.is_none() || owner == Some("uid-1"), "wrote over an object controlled by {:?}", owner);
            }
        }
    }
}

proptest! {
    /// For a kind owned across namespaces: whatever the plugin returns and whatever exists, an
    /// accepted outcome writes only in granted namespaces and only over objects tracked for this
    /// primary by this plugin.
    #[test]
    fn the_fence_never_lets_a_copy_land_outside_its_grants_or_over_another_owner(
        targets in proptest::collection::vec(proptest::option::of(prop::sample::select(vec!["a", "b", "c", ""])), 0..5),
        label in prop::sample::select(vec![None, Some(("uid-1", "sync")), Some(("uid-2", "sync")), Some(("uid-1", "other"))]),
        primary_ns in prop::sample::select(vec![None, Some("a")]),
    ) {
        let listed = Granted::Listed(["a".to_string(), "b".to_string()].into());
        let texts = targets.iter().enumerate().map(|(i, ns)| {
            let mut v = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name": format!("c{i}")}});
            if let Some(ns) = ns { v["metadata"]["namespace"] = json!(ns); }
            v.to_string()
        }).collect();
        let observed = label.map(|(u, p)| tracked(u, p));
        if let Ok(placed) = check_across(texts, primary_ns, &listed, observed) {
            for ns in &placed {
                prop_assert!(matches!(ns.as_deref(), Some("a") | Some("b")), "written in {:?}", ns);
            }
            if !placed.is_empty() {
                prop_assert!(label.is_none() || label == Some(("uid-1", "sync")), "wrote over {:?}", label);
            }
        }
    }
}

#[test]
fn the_hosts_labels_are_refused_nested_anywhere_in_an_intent() {
    // Issue 35 (9): templates hand their metadata to the objects the API server's controllers
    // make (PVCs from volumeClaimTemplates, Pods, Jobs); a kwop.dev/ key there forges tracking.
    let ss = |meta: Value| {
        json!({"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"s"},
            "spec":{"template":{"metadata":{"labels":{"app":"s"}}},
                    "volumeClaimTemplates":[{"metadata":{"name":"data"}}, {"metadata": meta}]}})
    };
    let forged = json!({"name":"d2","labels":{"kwop.dev/owner-uid":"u1","kwop.dev/plugin":"p"}});
    let e = decode(raw(vec![ss(forged).to_string()]), &OutcomeLimits::default()).expect_err("nested host label");
    assert_eq!(e.reason, RejectReason::Forbidden);
    assert!(e.message.contains("spec.volumeClaimTemplates[1].metadata.labels.kwop.dev/owner-uid"), "{}", e.message);
    let ann = json!({"name":"d2","annotations":{"kwop.dev/owner":"ns/f"}});
    assert!(decode(raw(vec![ss(ann).to_string()]), &OutcomeLimits::default()).is_err(), "nested host annotation");
    let cron = json!({"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"c"},"spec":{"jobTemplate":{
        "metadata":{"labels":{"a":"b"}},
        "spec":{"template":{"metadata":{"annotations":{"kwop.dev/owner":"x"}}}}}}});
    let e = decode(raw(vec![cron.to_string()]), &OutcomeLimits::default()).expect_err("pod template in a job template");
    assert!(e.message.contains("spec.jobTemplate.spec.template.metadata.annotations.kwop.dev/owner"), "{}", e.message);
    // Other keys nested are fine, and so is a kwop.dev/ string that is a value, not a key.
    assert!(decode(
        raw(vec![ss(json!({"name":"d2","labels":{"app":"kwop.dev/x"}})).to_string()]),
        &OutcomeLimits::default()
    )
    .is_ok());
}
