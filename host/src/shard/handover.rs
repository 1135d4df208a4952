//! Who reconciles which part of the hash space, and how a part changes hands without ever being
//! reconciled by two replicas at once.
//!
//! The assignment — member → the ranges it holds — lives in one object (the ring Lease), changed
//! only by compare-and-swap on its resourceVersion: two members can never both claim a range,
//! since the second write is refused and re-planned on the new version. The argument:
//! - A member reconciles an object only if the object's hash is in its ranges in the last
//!   assignment it wrote or read in the present term of its member Lease, that term confirmed
//!   (below), and its Lease was renewed within the renew deadline (as the leader's write gate: a
//!   member cut off stops before anyone may consider it gone). Its holding is derived anew from
//!   that assignment at every step, so nothing it is assigned stays unheld after a lapse or a
//!   swap that failed on the way back though the API server applied it.
//! - A member gives a range up by first shrinking what it reconciles (no new reconcile starts
//!   there), waiting for its reconciles in flight to end, and only then writing the smaller
//!   assignment.
//! - A member takes a range only if, in the assignment it swaps, no live member holds it. A
//!   member is gone when its Lease has not changed for a lease duration, as observed on the
//!   taker's own clock — longer than the renew deadline after which the gone member stopped —
//!   in a list of the Leases read after the assignment it swaps.
//! - A member whose Lease lapsed (renewed again after the deadline: a new term of its Lease)
//!   holds nothing and writes nothing until it has confirmed its part in the new term: written
//!   the assignment it read back, by compare-and-swap (with a mark, so the version moves).
//!   While it was out, another may have judged it gone; if that one's swap came first, the
//!   confirmation is refused and the next read shows the part gone; if the confirmation came
//!   first, the taker's swap is refused, and its next list of Leases (read after the
//!   confirmation, so after the renewal) shows the member alive. A read alone confirms nothing:
//!   the taker's swap could land just after it.
//! - A member that takes a range, or holds its own again in a new term, relists its caches
//!   before reconciling there — those kept whole (kinds owned across namespaces) too, whose live
//!   watch may lag or have been cut off: the list is read after its assignment write, so after
//!   every write of the previous holder (or its own whose answers it lost).
//!
//! So between any two holders of a range there is a written assignment in which neither holds it,
//! and the second starts from what the first wrote.

use super::ring::Ranges;
use std::collections::{BTreeMap, BTreeSet};

/// The assignment, as the ring object holds it.
pub type Assignment = BTreeMap<String, Ranges>;

/// One step of a member towards its target.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Ranges it holds and must give up (shrink and drain first, then write).
    pub release: Ranges,
    /// Ranges it may take now (write, then reconcile).
    pub take: Ranges,
    /// Members whose entries go: gone (their ranges are free).
    pub forget: Vec<String>,
}

impl Plan {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.release.is_empty() && self.take.is_empty() && self.forget.is_empty()
    }

    /// The assignment after this plan (for the compare-and-swap).
    pub fn apply(&self, me: &str, assignment: &Assignment) -> Assignment {
        let mut next: Assignment =
            assignment.iter().filter(|(m, _)| !self.forget.contains(m)).map(|(m, r)| (m.clone(), r.clone())).collect();
        let mine = next.get(me).cloned().unwrap_or_default().minus(&self.release).union(&self.take);
        if mine.is_empty() {
            next.remove(me);
        } else {
            next.insert(me.to_string(), mine);
        }
        next
    }
}

/// What `me` should do, given its `target`, the current `assignment`, and the members alive.
pub fn plan(me: &str, target: &Ranges, assignment: &Assignment, live: &BTreeSet<String>) -> Plan {
    let mine = assignment.get(me).cloned().unwrap_or_default();
    let forget: Vec<String> = assignment.keys().filter(|m| m.as_str() != me && !live.contains(*m)).cloned().collect();
    let taken_by_others = assignment
        .iter()
        .filter(|(m, _)| m.as_str() != me && live.contains(*m))
        .fold(Ranges::empty(), |acc, (_, r)| acc.union(r));
    Plan { release: mine.minus(target), take: target.minus(&mine).minus(&taken_by_others), forget }
}

/// The assignment from the ring object's annotation (JSON: member → `lo-hi,...`).
pub fn parse(text: &str) -> Result<Assignment, String> {
    if text.trim().is_empty() {
        return Ok(Assignment::new());
    }
    let raw: BTreeMap<String, String> = serde_json::from_str(text).map_err(|e| e.to_string())?;
    raw.into_iter().map(|(m, r)| Ok((m, Ranges::parse(&r)?))).collect()
}

/// The annotation of an assignment.
pub fn render(a: &Assignment) -> String {
    let raw: BTreeMap<&String, String> = a.iter().map(|(m, r)| (m, r.to_annotation())).collect();
    serde_json::to_string(&raw).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::super::ring::{target, Ranges};
    use super::*;

    fn members(m: &[&str]) -> Vec<String> {
        m.iter().map(|s| s.to_string()).collect()
    }

    /// Runs members' plans in turn (each a compare-and-swap on the latest assignment) until
    /// nothing changes; checks after every step that no range is held twice.
    fn settle(all: &[&str], live: &[&str], mut a: Assignment) -> Assignment {
        let live_set: BTreeSet<String> = live.iter().map(|s| s.to_string()).collect();
        for _ in 0..20 {
            let mut changed = false;
            for me in live {
                let p = plan(me, &target(&members(live), me), &a, &live_set);
                if !p.is_empty() {
                    a = p.apply(me, &a);
                    changed = true;
                }
                let held: Vec<&Ranges> = a.iter().filter(|(m, _)| live_set.contains(*m)).map(|(_, r)| r).collect();
                for (i, x) in held.iter().enumerate() {
                    for y in &held[i + 1..] {
                        assert!(x.intersect(y).is_empty(), "a range held twice: {a:?}");
                    }
                }
            }
            if !changed {
                return a;
            }
        }
        let _ = all;
        panic!("did not settle: {a:?}");
    }

    fn covers_all(a: &Assignment) -> bool {
        a.values().fold(Ranges::empty(), |acc, r| acc.union(r)) == Ranges::all()
    }

    #[test]
    fn members_join_leave_and_crash_without_a_range_held_twice() {
        // One member takes everything.
        let a = settle(&["a"], &["a"], Assignment::new());
        assert_eq!(a.get("a"), Some(&Ranges::all()));
        // Two more join: the first gives up two thirds before they take them.
        let a = settle(&["a", "b", "c"], &["a", "b", "c"], a);
        assert!(covers_all(&a) && a.len() == 3);
        assert_eq!(a.get("b"), Some(&target(&members(&["a", "b", "c"]), "b")));
        // b crashes: once gone, a and c share its part.
        let a = settle(&["a", "c"], &["a", "c"], a);
        assert!(covers_all(&a) && !a.contains_key("b"));
        // A plan never takes what a live member holds, even one that is not its target.
        let live: BTreeSet<String> = ["a", "c"].iter().map(|s| s.to_string()).collect();
        let p = plan("c", &Ranges::all(), &a, &live);
        assert!(p.take.intersect(a.get("a").unwrap_or(&Ranges::empty())).is_empty());
    }

    #[test]
    fn the_assignment_round_trips_through_its_annotation() {
        let a = settle(&["a", "b"], &["a", "b"], Assignment::new());
        assert_eq!(parse(&render(&a)), Ok(a));
        assert_eq!(parse(""), Ok(Assignment::new()));
        assert!(parse("{\"a\": \"nope\"}").is_err());
    }
}
