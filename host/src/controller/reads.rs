//! Reads that trigger: which primaries a change to a cached object must wake, from what each
//! primary's last reconcile read through the cache imports (recorded by `watch::view`).
//!
//! After each call the record replaces that primary's previous one in the [`ReadIndex`]. A watch
//! event then wakes every primary that got the object by name, and every primary whose query
//! matches the object now or returned it last time (so a label removed, or an object deleted,
//! wakes the query's readers too).
//!
//! The same record is what a memoized reconcile needs to know that nothing it depends on changed.

use crate::vocab::selector::Selector;
use crate::vocab::Gvk;
use crate::watch::view::{ReadKey, Reads};
use crate::watch::{Cached, ObjectKey};
use std::collections::{HashMap, HashSet};

type QueryKey = (Option<String>, Selector);

#[derive(Default)]
struct QueryGroup {
    primaries: HashSet<ObjectKey>,
    /// Objects the query matched when last evaluated (by a reconcile or a watch event).
    members: HashSet<ObjectKey>,
}

/// Which primaries read which objects, for one controller.
#[derive(Default)]
pub struct ReadIndex {
    gets: HashMap<ReadKey, HashSet<ObjectKey>>,
    queries: HashMap<Gvk, HashMap<QueryKey, QueryGroup>>,
    by_primary: HashMap<ObjectKey, Reads>,
}

impl ReadIndex {
    /// Replaces what `primary` read with `reads` (its latest reconcile).
    pub fn record(&mut self, primary: &ObjectKey, reads: Reads) {
        self.forget(primary);
        if reads.gets.is_empty() && reads.queries.is_empty() {
            return;
        }
        for g in &reads.gets {
            self.gets.entry(g.clone()).or_default().insert(primary.clone());
        }
        for (kind, ns, sel, found) in &reads.queries {
            let group = self.queries.entry(kind.clone()).or_default().entry((ns.clone(), sel.clone())).or_default();
            group.primaries.insert(primary.clone());
            group.members.extend(found.iter().cloned());
        }
        self.by_primary.insert(primary.clone(), reads);
    }

    /// Drops what `primary` read (it was deleted, or read again).
    pub fn forget(&mut self, primary: &ObjectKey) {
        let Some(old) = self.by_primary.remove(primary) else {
            return;
        };
        for g in old.gets {
            if let Some(set) = self.gets.get_mut(&g) {
                set.remove(primary);
                if set.is_empty() {
                    self.gets.remove(&g);
                }
            }
        }
        for (kind, ns, sel, _) in old.queries {
            let Some(groups) = self.queries.get_mut(&kind) else {
                continue;
            };
            let key = (ns, sel);
            if let Some(g) = groups.get_mut(&key) {
                g.primaries.remove(primary);
                if g.primaries.is_empty() {
                    groups.remove(&key);
                }
            }
            if groups.is_empty() {
                self.queries.remove(&kind);
            }
        }
    }

    /// Primaries to wake because `obj` of `kind` changed (or was deleted).
    pub fn triggered(&mut self, kind: &Gvk, obj: &Cached, deleted: bool) -> HashSet<ObjectKey> {
        let key = obj.key().clone();
        let mut out = HashSet::new();
        if let Some(p) = self.gets.get(&(kind.clone(), key.namespace.clone(), key.name.clone())) {
            out.extend(p.iter().cloned());
        }
        if let Some(groups) = self.queries.get_mut(kind) {
            for ((ns, sel), g) in groups.iter_mut() {
                if ns.is_some() && ns != &key.namespace {
                    continue;
                }
                let matches = !deleted && sel.matches_with(|l| obj.label(l));
                let was = if matches { !g.members.insert(key.clone()) } else { g.members.remove(&key) };
                if matches || was {
                    out.extend(g.primaries.iter().cloned());
                }
            }
        }
        out
    }

    /// Primaries that read anything of `kind` (after a relist, when changes may have gone unseen).
    pub fn readers_of(&self, kind: &Gvk) -> HashSet<ObjectKey> {
        let mut out: HashSet<ObjectKey> =
            self.gets.iter().filter(|((g, _, _), _)| g == kind).flat_map(|(_, p)| p.iter().cloned()).collect();
        if let Some(groups) = self.queries.get(kind) {
            out.extend(groups.values().flat_map(|g| g.primaries.iter().cloned()));
        }
        out
    }

    /// Primaries with a record (for tests and metrics).
    pub fn len(&self) -> usize {
        self.by_primary.len()
    }

    /// Whether no primary has a record.
    pub fn is_empty(&self) -> bool {
        self.by_primary.is_empty()
    }
}

/// The most reads one reconcile's note keeps for the flight recorder.
const NOTED_READS: usize = 32;

/// What a reconcile read, as the flight recorder notes it (a query by its selector, with the
/// objects it returned).
pub(super) fn inputs(reads: &Reads) -> Vec<crate::telemetry::flight::Input> {
    use crate::telemetry::flight::{Input, Obj};
    let gets = reads.gets.iter().zip(reads.versions.gets.iter().map(Some).chain(std::iter::repeat(None))).map(
        |((kind, ns, name), rv)| Input {
            object: Obj { kind: kind.kind.clone(), namespace: ns.clone(), name: name.clone() },
            resource_version: rv.cloned().flatten(),
            how: "get".into(),
        },
    );
    let queries = reads.queries.iter().flat_map(|(kind, ns, selector, keys)| {
        let found = keys.iter().map(|k| k.name.as_str()).collect::<Vec<_>>().join(", ");
        std::iter::once(Input {
            object: Obj {
                kind: kind.kind.clone(),
                namespace: ns.clone(),
                name: format!(
                    "[{selector}] → {} found{}",
                    keys.len(),
                    if found.is_empty() { String::new() } else { format!(": {found}") }
                ),
            },
            resource_version: None,
            how: "query".into(),
        })
    });
    gets.chain(queries).take(NOTED_READS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(ns: &str, name: &str, labels: serde_json::Value) -> Cached {
        Cached::new(
            serde_json::from_value(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": ns, "labels": labels}}))
            .expect("object"),
        )
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey { namespace: Some("ns".into()), name: name.into() }
    }

    fn dep() -> Gvk {
        Gvk::new("apps", "v1", "Deployment")
    }

    #[test]
    fn a_get_wakes_its_reader_even_for_an_object_created_later() {
        let mut ix = ReadIndex::default();
        let reads = Reads { gets: vec![(dep(), Some("ns".into()), "web".into())], ..Default::default() };
        ix.record(&key("foo-a"), reads);
        assert_eq!(ix.triggered(&dep(), &obj("ns", "web", json!({})), false), HashSet::from([key("foo-a")]));
        assert!(ix.triggered(&dep(), &obj("other", "web", json!({})), false).is_empty());
        assert!(ix.triggered(&Gvk::new("", "v1", "ConfigMap"), &obj("ns", "web", json!({})), false).is_empty());
        ix.forget(&key("foo-a"));
        assert!(ix.triggered(&dep(), &obj("ns", "web", json!({})), false).is_empty());
        assert!(ix.is_empty());
    }

    #[test]
    fn a_query_wakes_its_readers_on_match_and_on_leaving_the_match() {
        let mut ix = ReadIndex::default();
        let sel = Selector::parse("app=web").expect("selector");
        let reads = Reads { queries: vec![(dep(), Some("ns".into()), sel, vec![key("d1")])], ..Default::default() };
        ix.record(&key("foo-a"), reads.clone());
        ix.record(&key("foo-b"), reads);
        let both = HashSet::from([key("foo-a"), key("foo-b")]);
        // A new object that matches.
        assert_eq!(ix.triggered(&dep(), &obj("ns", "d2", json!({"app": "web"})), false), both);
        // d1 loses its label: it left the query's result, its readers must know.
        assert_eq!(ix.triggered(&dep(), &obj("ns", "d1", json!({})), false), both);
        // ...and once out, further changes to it wake nobody.
        assert!(ix.triggered(&dep(), &obj("ns", "d1", json!({"x": "y"})), false).is_empty());
        // A deleted member wakes its readers.
        assert_eq!(ix.triggered(&dep(), &obj("ns", "d2", json!({"app": "web"})), true), both);
        assert_eq!(ix.readers_of(&dep()), HashSet::from([key("foo-a"), key("foo-b")]));
        // A new record replaces the old one.
        ix.record(&key("foo-a"), Reads::default());
        ix.record(&key("foo-b"), Reads::default());
        assert!(ix.readers_of(&dep()).is_empty() && ix.queries.is_empty() && ix.gets.is_empty());
    }
}
