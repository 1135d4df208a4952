//! The words of `kwop explain` on synthetic Explanations: every verdict, a primary and a child,
//! an unknown object; and the argument forms.

use super::words::explain;
use super::{kind_of, object, ExplainArgs, Output};
use crate::telemetry::flight::{Explanation, Flight, Input, Obj, Verdict, WriteNote};
use std::time::{Duration, SystemTime};

const URL: &str = "http://127.0.0.1:8081";

fn obj(kind: &str, name: &str) -> Obj {
    Obj { kind: kind.into(), namespace: Some("demo".into()), name: name.into() }
}

/// 19:21:15 UTC on the day the flights below happened.
fn now() -> SystemTime {
    humantime::parse_rfc3339("2026-12-07T19:21:15Z").expect("static time")
}

fn flight(at: &str, verdict: Verdict) -> Flight {
    let mut f = Flight::start("guest-foo", "0.2.0", Some(format!("sha256:{}", "4bf9".repeat(16))), obj("Foo", "web"));
    f.at = format!("2026-12-07T{at}.250Z");
    f.verdict = verdict;
    f.duration_ms = 3.2;
    f
}

fn write(kind: &str, name: &str, verb: &str, result: &str, why: Option<&str>) -> WriteNote {
    WriteNote { verb: verb.into(), object: obj(kind, name), result: result.into(), why: why.map(Into::into) }
}

fn as_primary(flights: Vec<Flight>) -> String {
    let e = Explanation { object: Some(obj("Foo", "web")), as_primary: flights, written_by: vec![] };
    explain(&e, &obj("Foo", "web"), URL, now())
}

fn synced_at(at: &str) -> Flight {
    let mut f = flight(at, Verdict::Synced);
    f.trace_id = Some("4bf92f3577b34da6a3ce929d0e0e4736".into());
    f.inputs = vec![
        Input { object: obj("Foo", "web"), resource_version: Some("812".into()), how: "primary".into() },
        Input { object: obj("Deployment", "web"), resource_version: Some("815".into()), how: "owned".into() },
        Input { object: obj("ConfigMap", "settings"), resource_version: None, how: "get".into() },
        Input { object: obj("Secret", "[app=web] → 1 found: db"), resource_version: None, how: "query".into() },
    ];
    f.writes = vec![
        write("Deployment", "web", "apply", "updated", Some("spec.replicas")),
        write("Foo", "web", "status", "unchanged", None),
    ];
    f.events = vec!["Normal Synced: Foo synced successfully".into()];
    f.shadow = Some("candidate guest-foo 0.3.0 agreed".into());
    f
}

#[test]
fn a_synced_primary_names_its_plugin_inputs_writes_and_events() {
    let text = as_primary(vec![synced_at("19:21:03")]);
    for want in [
        "Foo demo/web is reconciled by plugin guest-foo 0.2.0 (sha256:4bf94bf94bf9…).",
        "Last reconcile 11s ago (at 19:21:03 UTC, trace 4bf92f3577b34da6a3ce929d0e0e4736, took 3 ms): synced: the \
         plugin ran and kwop wrote its outcome (1 updated, 1 unchanged).",
        "inputs: Foo demo/web@812 (primary), Deployment demo/web@815 (owned), ConfigMap demo/settings (get, not \
         found), Secret demo/[app=web] → 1 found: db (query)\n",
        "writes: apply Deployment demo/web: updated (spec.replicas); status Foo demo/web: unchanged",
        "events: Normal Synced: Foo synced successfully",
        "shadow: candidate guest-foo 0.3.0 agreed",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

#[test]
fn a_synced_reconcile_that_sent_nothing_says_so() {
    let mut f = flight("19:21:03", Verdict::Synced);
    f.writes = vec![write("Deployment", "web", "apply", "unchanged", None)];
    let text = as_primary(vec![f]);
    assert!(text.contains("everything already matched what it wants — nothing was sent"), "{text}");
    let text = as_primary(vec![flight("19:21:03", Verdict::Synced)]);
    assert!(text.contains("synced: the plugin ran and asked for no writes."), "{text}");
}

#[test]
fn a_memoized_primary_says_since_when_how_many_checks_and_the_reconcile_it_repeats() {
    let memo = flight("19:20:01", Verdict::Memoized { since: "2026-12-07T19:20:01.250Z".into(), checks: 14 });
    let text = as_primary(vec![synced_at("19:19:58"), memo]);
    assert!(
        text.contains(
            "Last reconcile: nothing to do — memoized since 19:20:01 UTC (1m 13s ago, 14 checks): nothing it \
             depends on changed, so the plugin was not called."
        ),
        "{text}"
    );
    assert!(text.contains("The plugin last ran 1m 16s ago (at 19:19:58 UTC"), "{text}");
    assert!(!text.contains("Earlier"), "both flights are told already:\n{text}");
    let one = flight("19:20:01", Verdict::Memoized { since: "2026-12-07T19:20:01.250Z".into(), checks: 1 });
    assert!(as_primary(vec![one]).contains(" ago, 1 check)"));
}

#[test]
fn a_failed_call_and_a_failure_the_plugin_reported_read_differently() {
    let call = Verdict::Failed { stage: "call".into(), message: "plugin trapped: unreachable executed".into() };
    let text = as_primary(vec![flight("19:21:03", call)]);
    assert!(
        text.contains(
            "failed: the plugin call was ended: plugin trapped: unreachable executed — kwop retries with backoff."
        ),
        "{text}"
    );
    let said = Verdict::Failed {
        stage: "plugin".into(),
        message: "Resource \"web\" already exists and is not managed by Foo".into(),
    };
    let text = as_primary(vec![flight("19:21:03", said.clone())]);
    assert!(
        text.contains(
            "failed: the plugin reported a failure: Resource \"web\" already exists and is not managed by Foo"
        ),
        "{text}"
    );
    assert!(text.contains("if the plugin asked for a retry, else when the object changes"), "{text}");
    let mut again = flight("19:21:03", said);
    again.requeue_after_ms = Some(30_000);
    let text = as_primary(vec![again]);
    assert!(text.contains("kwop tries again in 30s.") && text.contains("next: again in 30s"), "{text}");
}

#[test]
fn refusals_write_failures_deletions_and_deferrals_each_have_their_words() {
    let cases = [
        (
            Verdict::Rejected {
                reason: "NotControlled".into(),
                message: "apply Deployment \"web\" is not ours".into(),
            },
            "refused: kwop's write fence rejected the plugin's outcome (NotControlled): apply Deployment \"web\" is \
             not ours — nothing was written",
        ),
        (
            Verdict::WriteFailed { message: "422 spec.replicas: Invalid value".into() },
            "a write failed: 422 spec.replicas: Invalid value — the writes after it were not sent",
        ),
        (Verdict::Finalizing { message: "finalize said done".into() }, "being deleted: finalize said done."),
        (
            Verdict::Deferred { message: "another replica holds it".into() },
            "not reconciled then: another replica holds it.",
        ),
    ];
    for (v, want) in cases {
        let text = as_primary(vec![flight("19:21:03", v)]);
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
        assert!(text.contains("is reconciled by plugin guest-foo"), "{text}");
    }
}

#[test]
fn a_primary_outside_the_grants_is_left_alone() {
    let v = Verdict::OutsideGrants { message: "namespace \"other\" is not among the namespaces granted".into() };
    let text = as_primary(vec![flight("19:21:03", v)]);
    assert!(
        text.contains(
            "Foo demo/web is outside what plugin guest-foo 0.2.0 (sha256:4bf94bf94bf9…) is granted, and kwop leaves \
             it alone (last seen 19:21:03 UTC (11s ago)): namespace \"other\" is not among the namespaces granted."
        ),
        "{text}"
    );
    assert!(!text.contains("is reconciled by"), "{text}");
}

#[test]
fn earlier_reconciles_are_listed_newest_first_one_line_per_run_of_alike_ones() {
    let mut created = flight("19:10:00", Verdict::Synced);
    created.writes = vec![write("Deployment", "web", "apply", "created", None)];
    let failed = flight("19:15:00", Verdict::Failed { stage: "call".into(), message: "deadline 1s exceeded".into() });
    let again = flight("19:16:00", Verdict::Failed { stage: "call".into(), message: "deadline 1s exceeded".into() });
    let text = as_primary(vec![created, failed, again, synced_at("19:21:03")]);
    let earlier = text.split("Earlier (newest first):\n").nth(1).unwrap_or_default();
    assert_eq!(
        earlier,
        "  19:15:00 UTC to 19:16:00 UTC (2 times): failed: deadline 1s exceeded\n  19:10:00 UTC: synced (1 created)\n",
        "{text}"
    );
}

fn as_child(flights: Vec<Flight>) -> String {
    let e = Explanation { object: Some(obj("Deployment", "web")), as_primary: vec![], written_by: flights };
    explain(&e, &obj("Deployment", "web"), URL, now())
}

#[test]
fn a_healed_child_names_its_plugin_its_primary_and_the_field_that_differed() {
    let mut created = flight("19:10:00", Verdict::Synced);
    created.writes = vec![write("Deployment", "web", "apply", "created", None)];
    let text = as_child(vec![created, synced_at("19:21:03")]);
    for want in [
        "Deployment demo/web is written by plugin guest-foo for Foo demo/web.",
        "Last change 11s ago (at 19:21:03 UTC, trace 4bf92f3577b34da6a3ce929d0e0e4736, took 3 ms): kwop re-applied it: \
         spec.replicas differed from what the plugin wants (a hand edit, or a change of the Foo web) — healed.",
        "Earlier writes of it (newest first):\n  19:10:00 UTC: apply created",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(!text.contains("is reconciled by"), "a child is not a primary:\n{text}");
}

#[test]
fn a_heal_stays_the_headline_when_later_checks_found_the_child_in_place() {
    let mut checked = flight("19:21:10", Verdict::Synced);
    checked.writes = vec![write("Deployment", "web", "apply", "unchanged", None)];
    let text = as_child(vec![synced_at("19:21:03"), checked]);
    assert!(text.contains("Last change 11s ago (at 19:21:03 UTC") && text.contains("— healed."), "{text}");
    assert!(
        text.contains(
            "Since then kwop checked it 1 time, last 19:21:10 UTC (4s ago): it matched what the plugin wants."
        ),
        "{text}"
    );
}

#[test]
fn every_write_result_of_a_child_has_its_words() {
    let cases = [
        ("created", None, "kwop created it."),
        ("unchanged", None, "kwop checked it: it already matched what the plugin wants, nothing was sent."),
        ("deleted", None, "kwop deleted it: the plugin no longer wants it."),
        ("failed", Some("403 forbidden"), "kwop tried to apply it and failed: 403 forbidden"),
        ("not-sent", None, "kwop did not send its apply: an earlier write of that reconcile failed."),
        (
            "updated",
            Some("spec.replicas differed from the plugin's intent"),
            "kwop re-applied it: spec.replicas differed from the plugin's intent (a hand edit, or a change of the Foo \
             web) — healed.",
        ),
        ("updated", None, "kwop re-applied it: it differed from what the plugin wants (a hand edit"),
    ];
    for (result, why, want) in cases {
        let mut f = flight("19:21:03", Verdict::Synced);
        f.writes = vec![write("Deployment", "web", "apply", result, why)];
        let text = as_child(vec![f]);
        assert!(text.contains(want), "{result}: missing {want:?} in:\n{text}");
    }
}

#[test]
fn a_child_whose_reconcile_went_wrong_says_how() {
    let mut f = flight("19:21:03", Verdict::WriteFailed { message: "422 Invalid".into() });
    f.writes = vec![write("Deployment", "web", "apply", "failed", Some("422 Invalid"))];
    let text = as_child(vec![f]);
    assert!(text.contains("That reconcile of Foo demo/web: a write failed: 422 Invalid"), "{text}");
}

#[test]
fn an_unknown_object_says_which_host_was_asked_and_what_to_check() {
    let e = Explanation { object: Some(obj("Foo", "nope")), ..Explanation::default() };
    let text = explain(&e, &obj("Foo", "nope"), URL, now());
    assert!(
        text.starts_with(
            "kwop at http://127.0.0.1:8081 has no record of Foo demo/nope: it has not reconciled or written it since \
             it started, or the record was evicted"
        ),
        "{text}"
    );
    assert!(!text.contains("no -n was given"), "{text}");
    let cluster = Obj { kind: "Foo".into(), namespace: None, name: "nope".into() };
    let text = explain(&Explanation::default(), &cluster, URL, now());
    assert!(text.contains("no record of Foo nope") && text.contains("no -n was given"), "{text}");
}

#[test]
fn a_status_write_of_the_primary_itself_is_not_told_twice_as_a_child() {
    let f = synced_at("19:21:03");
    let e = Explanation { object: Some(obj("Foo", "web")), as_primary: vec![f.clone()], written_by: vec![f] };
    let text = explain(&e, &obj("Foo", "web"), URL, now());
    assert!(!text.contains("is written by"), "{text}");
}

fn args(kind: &str, name: Option<&str>) -> ExplainArgs {
    ExplainArgs {
        kind: kind.into(),
        name: name.map(Into::into),
        namespace: Some("demo".into()),
        url: URL.into(),
        output: Output::Text,
        timeout: Duration::from_secs(1),
    }
}

#[test]
fn kinds_and_names_are_taken_as_kubectl_users_type_them() {
    assert_eq!(object(&args("Foo", Some("web"))).ok(), Some(obj("Foo", "web")));
    assert_eq!(object(&args("deploy/web", None)).ok(), Some(obj("Deployment", "web")));
    assert!(object(&args("deploy/web", Some("web"))).is_err());
    assert!(object(&args("Foo", None)).is_err());
    assert_eq!(kind_of("cm"), "ConfigMap");
    assert_eq!(kind_of("foo"), "Foo");
    assert_eq!(kind_of("Foo"), "Foo");
}

#[test]
fn the_binary_is_kubectl_kwop_only_by_that_file_name() {
    use crate::cli::program;
    assert_eq!(program(Some("/usr/local/bin/kubectl-kwop".as_ref())), "kubectl kwop");
    assert_eq!(program(Some("kwop".as_ref())), "kwop");
    assert_eq!(program(Some("/tmp/kubectl-kwop-old".as_ref())), "kwop");
    assert_eq!(program(None), "kwop");
}
