//! The owner index of a cache: which cached objects may belong to which primary, by uid.

use super::object::Cached;
use super::ObjectKey;
use std::collections::HashMap;

/// owner uid → keys of the objects that may belong to it (by controller reference or by the
/// host's tracking label, see `Cached::owner_uids`). Kept in step with the store by the watch
/// task alone (each change is given the version it replaces), so a key is at most once in a list.
#[derive(Default)]
pub(super) struct OwnerIndex {
    by_owner: HashMap<Box<str>, Vec<ObjectKey>>,
}

impl OwnerIndex {
    /// `new` replaced `old` in the store.
    pub(super) fn replaced(&mut self, old: Option<&Cached>, new: &Cached) {
        if let Some(o) = old {
            if o.owner_uids().eq(new.owner_uids()) {
                return;
            }
            self.removed(o);
        }
        for uid in new.owner_uids() {
            self.by_owner.entry(uid.into()).or_default().push(new.key().clone());
        }
    }

    /// `old` left the store.
    pub(super) fn removed(&mut self, old: &Cached) {
        for uid in old.owner_uids() {
            if let Some(keys) = self.by_owner.get_mut(uid) {
                if let Some(i) = keys.iter().position(|k| k == old.key()) {
                    keys.swap_remove(i);
                }
                if keys.is_empty() {
                    self.by_owner.remove(uid);
                }
            }
        }
    }

    /// The keys of what may belong to `uid`.
    pub(super) fn of(&self, uid: &str) -> Vec<ObjectKey> {
        self.by_owner.get(uid).cloned().unwrap_or_default()
    }

    /// Everything again, from a new list.
    pub(super) fn rebuild<'a>(&mut self, objects: impl Iterator<Item = &'a Cached>) {
        *self = OwnerIndex::default();
        for o in objects {
            self.replaced(None, o);
        }
        self.by_owner.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str, owner: Option<&str>) -> Cached {
        let mut v = serde_json::json!({ "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": name, "namespace": "ns" } });
        if let Some(uid) = owner {
            v["metadata"]["ownerReferences"] = serde_json::json!([
                { "apiVersion": "v1", "kind": "X", "name": "x", "uid": "other", "controller": false },
                { "apiVersion": "v1", "kind": "Foo", "name": "f", "uid": uid, "controller": true }
            ]);
        }
        Cached::new(serde_json::from_value(v).expect("object"))
    }

    fn owned(ix: &OwnerIndex, uid: &str) -> Vec<String> {
        let mut v: Vec<String> = ix.by_owner.get(uid).into_iter().flatten().map(|k| k.name.clone()).collect();
        v.sort();
        v
    }

    #[test]
    fn the_owner_index_follows_changes_of_controller_and_deletions() {
        let mut ix = OwnerIndex::default();
        let (a, b, c) = (obj("a", Some("u1")), obj("b", Some("u1")), obj("c", None));
        for o in [&a, &b, &c] {
            ix.replaced(None, o);
        }
        assert_eq!(owned(&ix, "u1"), ["a", "b"]);
        assert!(!ix.by_owner.contains_key("other"), "only the controller reference counts");
        // A change that keeps the controller changes nothing; b moves to another, then loses it.
        ix.replaced(Some(&a), &obj("a", Some("u1")));
        assert_eq!(owned(&ix, "u1"), ["a", "b"]);
        let b2 = obj("b", Some("u2"));
        ix.replaced(Some(&b), &b2);
        assert_eq!((owned(&ix, "u1"), owned(&ix, "u2")), (vec!["a".to_string()], vec!["b".to_string()]));
        ix.replaced(Some(&b2), &obj("b", None));
        assert!(!ix.by_owner.contains_key("u2"));
        ix.removed(&a);
        assert!(ix.by_owner.is_empty());
        // A relist replaces everything.
        let world = [obj("d", Some("u3"))];
        ix.rebuild(world.iter());
        assert_eq!(owned(&ix, "u3"), ["d"]);
        assert_eq!(ix.by_owner.len(), 1);
    }
}
