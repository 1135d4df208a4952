//! Unit tests of the flight recorder: runs of memo hits, eviction, children.

use super::*;

fn obj(kind: &str, name: &str) -> Obj {
    Obj { kind: kind.into(), namespace: Some("ns".into()), name: name.into() }
}

fn flight(name: &str, verdict: Verdict) -> Flight {
    let mut f = Flight::start("p", "1", None, obj("Foo", name));
    f.verdict = verdict;
    f
}

fn memo() -> Verdict {
    Verdict::Memoized { since: now(), checks: 1 }
}

#[test]
fn a_run_of_memo_hits_is_one_entry_with_a_count() {
    let r = FlightRecorder::new(3, 10);
    r.keep(flight("a", Verdict::Synced));
    for _ in 0..50 {
        r.keep(flight("a", memo()));
    }
    let e = r.explain(&obj("Foo", "a"));
    assert_eq!(e.as_primary.len(), 2);
    assert!(matches!(e.as_primary[1].verdict, Verdict::Memoized { checks: 50, .. }), "{:?}", e.as_primary[1]);
}

#[test]
fn memo_hits_of_the_resync_start_a_run_after_a_reconcile_and_count_on_it() {
    let r = FlightRecorder::new(3, 10);
    r.keep(flight("a", Verdict::Synced));
    for _ in 0..4 {
        r.memo_hit("p", obj("Foo", "a"), || None, "1");
    }
    r.keep(flight("a", memo())); // a reconcile's own memo hit joins the run
    let e = r.explain(&obj("Foo", "a")).as_primary;
    assert_eq!(e.len(), 2);
    assert!(matches!(e[1].verdict, Verdict::Memoized { checks: 5, .. }), "{:?}", e[1]);
}

#[test]
fn each_primary_keeps_its_last_few_and_the_oldest_primary_goes_first() {
    let r = FlightRecorder::new(2, 2);
    for v in ["1", "2", "3"] {
        let mut f = flight("a", Verdict::Synced);
        f.version = v.into();
        r.keep(f);
    }
    let a = r.explain(&obj("Foo", "a")).as_primary;
    assert_eq!(a.iter().map(|f| f.version.as_str()).collect::<Vec<_>>(), ["2", "3"]);
    r.keep(flight("b", Verdict::Synced));
    r.keep(flight("a", Verdict::Synced));
    r.keep(flight("c", Verdict::Synced)); // b is the least recently touched
    assert_eq!(r.len(), 2);
    assert!(r.explain(&obj("Foo", "b")).as_primary.is_empty());
    assert!(!r.explain(&obj("Foo", "a")).as_primary.is_empty());
}

#[test]
fn a_child_is_explained_by_the_reconciles_that_wrote_it() {
    let r = FlightRecorder::default();
    let mut f = flight("a", Verdict::Synced);
    f.writes.push(WriteNote {
        verb: "apply".into(),
        object: obj("Deployment", "a-web"),
        result: "updated".into(),
        why: Some("spec.replicas differed".into()),
    });
    r.keep(f);
    r.keep(flight("a", Verdict::Synced)); // wrote nothing: not about the child
    let e = r.explain(&obj("Deployment", "a-web"));
    assert!(e.as_primary.is_empty());
    assert_eq!(e.written_by.len(), 1);
    assert_eq!(e.written_by[0].writes[0].result, "updated");
}
