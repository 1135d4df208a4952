//! Memoized reconciles: a primary whose last reconcile was in sync is not given to the plugin
//! again until something that reconcile depended on changed.
//!
//! Why this is sound. A reconcile is a function of exactly these inputs, and nothing else:
//! - the plugin: its code, limits and grants (one [`LoadedPlugin`]; a swap, a new grant or a new
//!   limit makes a new one);
//! - its request: the primary and the objects it controls, each fixed by its resourceVersion;
//! - what it read through the cache imports: each object got by name (or its absence) and each
//!   query's answer, fixed by the objects' keys and resourceVersions ([`Reads`]);
//! - its WASI: the random bytes are seeded by the plugin, the primary's uid and resourceVersion
//!   (all above); the monotonic clock stands still; the wall clock is the reconcile's start, so a
//!   call that reads it is never memoized.
//!
//! The same inputs give the same outcome (`plugin::wasi`), so the same writes would be compared
//! against the same observed objects and again found to change nothing. Drift always changes a
//! resourceVersion: a hand edit of an owned object or of the primary's status, a deletion (the
//! object leaves the request or a get finds nothing), an object entering or leaving a query.
//! So an entry is kept only after a successful reconcile that wrote nothing, asked for no requeue,
//! read a complete record and did not read the clock — and it is used only if every version is
//! still the same. Anything else calls the plugin. Shadowed and recorded reconciles are never
//! skipped (the candidate and the recorder want every call).

use crate::watch::view::{Reads, RecordingCache};
use super::seen::Seen;
use crate::vocab::Gvk;
use crate::plugin::LoadedPlugin;
use crate::watch::Cached;
use crate::watch::ObjectKey;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// What a request was made of: the primary's and every owned object's resourceVersion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestVersions {
    primary: String,
    owned: Vec<(Gvk, ObjectKey, String)>,
}

impl RequestVersions {
    pub(crate) fn of(primary: &Cached, seen: &Seen<'_>) -> Self {
        RequestVersions {
            primary: primary.resource_version().to_string(),
            owned: seen
                .objects()
                .map(|(g, o)| (g.clone(), o.key().clone(), o.resource_version().to_string()))
                .collect(),
        }
    }
}

struct Entry {
    /// The plugin that decided (a weak pointer: an entry never keeps a swapped-out plugin
    /// alive, and its allocation cannot be reused while the pointer exists).
    plugin: Weak<LoadedPlugin>,
    request: RequestVersions,
    reads: Reads,
}

/// The in-sync reconciles of one controller, by primary.
#[derive(Default)]
pub(crate) struct Memo {
    entries: Mutex<HashMap<ObjectKey, Entry>>,
}

impl Memo {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `key`'s last reconcile, by this `plugin`, was in sync on exactly these inputs.
    /// A miss forgets the entry (the plugin is called, and decides anew).
    pub(crate) fn unchanged(
        &self,
        key: &ObjectKey,
        plugin: &Arc<LoadedPlugin>,
        request: &RequestVersions,
        view: &RecordingCache,
    ) -> bool {
        let Some(e) = self.lock().remove(key) else {
            return false;
        };
        let same_plugin = Weak::ptr_eq(&e.plugin, &Arc::downgrade(plugin)) && e.plugin.strong_count() > 0;
        if !(same_plugin && e.request == *request && view.answers_unchanged(&e.reads)) {
            return false;
        }
        self.lock().insert(key.clone(), e);
        true
    }

    /// Remembers an in-sync reconcile of `key`.
    pub(crate) fn keep(&self, key: &ObjectKey, plugin: &Arc<LoadedPlugin>, request: RequestVersions, reads: Reads) {
        self.lock().insert(key.clone(), Entry { plugin: Arc::downgrade(plugin), request, reads });
    }

    /// Drops `key`'s entry (the primary is gone).
    pub(crate) fn forget(&self, key: &ObjectKey) {
        self.lock().remove(key);
    }
}
