//! A cached object in its compact form: the JSON a plugin is given, plus the few typed fields the
//! host itself reads (key, uid, resourceVersion, labels, controller, deletion), and the store of
//! them for one kind.
//!
//! Why not kube-runtime's `Store<DynamicObject>`: a `DynamicObject` is a `serde_json::Value`
//! tree, ~11 KB and 163 allocations for a Deployment whose JSON is ~1.7 KB (measured, see
//! BENCHMARKS.md), and every reconcile serialised it again for the plugin. Here the JSON is kept
//! as text, handed to plugins as it is, and parsed only when a write needs the whole object.

use super::ObjectKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::DynamicObject;
use kube::ResourceExt;
use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, RwLock};

/// The reference of an object to its controller (the owner reference with `controller: true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerRef {
    /// `apiVersion` of the controller.
    pub api_version: Box<str>,
    /// `kind` of the controller.
    pub kind: Box<str>,
    /// Its name.
    pub name: Box<str>,
    /// Its uid.
    pub uid: Box<str>,
}

/// One cached object.
#[derive(Debug)]
pub struct Cached {
    key: ObjectKey,
    uid: Box<str>,
    resource_version: Box<str>,
    /// Sorted by key.
    labels: Box<[(Box<str>, Box<str>)]>,
    controller: Option<Box<ControllerRef>>,
    /// The primary named by the host's tracking annotation (`vocab::tracking`), when the object
    /// carries the tracking labels: written for a kind owned across namespaces.
    tracked_owner: Option<Box<str>>,
    deleting: bool,
    /// `metadata.finalizers` (usually none).
    finalizers: Box<[Box<str>]>,
    /// The `managedFields` entries kept by the watch (kwop's own status entries, for the
    /// applier), as JSON text: parsed, each `fieldsV1` is a tree of maps (~3.2 KB per Foo with
    /// two conditions, measured in BENCHMARKS.md's memory figure), and only writes read them.
    /// Not part of what plugins see.
    managed_fields: Option<Box<str>>,
    json: Box<str>,
}

impl Cached {
    /// The compact form of `o` (whose `managedFields` are kept aside, not in the JSON).
    pub fn new(mut o: DynamicObject) -> Self {
        let managed_fields =
            o.metadata.managed_fields.take().and_then(|m| serde_json::to_string(&m).ok()).map(String::into_boxed_str);
        let json = serde_json::to_string(&o).unwrap_or_default().into_boxed_str();
        let mut labels: Vec<(Box<str>, Box<str>)> =
            o.labels().iter().map(|(k, v)| (k.as_str().into(), v.as_str().into())).collect();
        labels.sort();
        let controller = o.owner_references().iter().find(|r| r.controller == Some(true)).map(|r| {
            Box::new(ControllerRef {
                api_version: r.api_version.as_str().into(),
                kind: r.kind.as_str().into(),
                name: r.name.as_str().into(),
                uid: r.uid.as_str().into(),
            })
        });
        use crate::vocab::tracking;
        let tracked_owner = match labels.binary_search_by(|(k, _)| (**k).cmp(tracking::OWNER_UID)) {
            Ok(_) => o.annotations().get(tracking::OWNER).map(|a| a.as_str().into()),
            Err(_) => None,
        };
        let finalizers = o.finalizers().iter().map(|f| f.as_str().into()).collect();
        Cached {
            key: ObjectKey::of(&o),
            tracked_owner,
            finalizers,
            uid: o.metadata.uid.unwrap_or_default().into_boxed_str(),
            resource_version: o.metadata.resource_version.unwrap_or_default().into_boxed_str(),
            labels: labels.into_boxed_slice(),
            controller,
            deleting: o.metadata.deletion_timestamp.is_some(),
            managed_fields,
            json,
        }
    }

    /// Namespace and name.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// The namespace (`None` when cluster-scoped).
    pub fn namespace(&self) -> Option<&str> {
        self.key.namespace.as_deref()
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.key.name
    }

    /// `metadata.uid` (empty if the API server sent none).
    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> &str {
        &self.resource_version
    }

    /// The value of one label.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.binary_search_by(|(k, _)| (**k).cmp(key)).ok().map(|i| &*self.labels[i].1)
    }

    /// The controller reference, if any.
    pub fn controller(&self) -> Option<&ControllerRef> {
        self.controller.as_deref()
    }

    /// The uid of the controller, if any.
    pub fn controller_uid(&self) -> Option<&str> {
        self.controller.as_deref().map(|c| &*c.uid)
    }

    /// Whether `metadata.deletionTimestamp` is set.
    pub fn deleting(&self) -> bool {
        self.deleting
    }

    /// `metadata.finalizers`.
    pub fn finalizers(&self) -> impl Iterator<Item = &str> {
        self.finalizers.iter().map(|f| &**f)
    }

    /// Whether `metadata.finalizers` has `f`.
    pub fn has_finalizer(&self, f: &str) -> bool {
        self.finalizers().any(|x| x == f)
    }

    /// The uid in the tracking label `kwop.dev/owner-uid`, if any.
    pub fn tracked_uid(&self) -> Option<&str> {
        self.label(crate::vocab::tracking::OWNER_UID)
    }

    /// The primary the tracking annotation names (`<namespace>/<name>` or `<name>`), when the
    /// object carries the tracking labels.
    pub fn tracked_owner(&self) -> Option<&str> {
        self.tracked_owner.as_deref()
    }

    /// The uids of the primaries this object may belong to: its controller's, and the one in its
    /// tracking label (at most two, distinct).
    pub fn owner_uids(&self) -> impl Iterator<Item = &str> {
        let c = self.controller_uid();
        let t = self.tracked_uid().filter(|t| Some(*t) != c);
        c.into_iter().chain(t)
    }

    /// The object as plugins see it (no `managedFields`).
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The whole object, `managedFields` kept by the watch included (for writes, which compare
    /// with it). Parsing text this process serialised itself cannot fail but for memory; an
    /// empty object then, which makes any comparison write rather than skip.
    pub fn object(&self) -> DynamicObject {
        let mut o: DynamicObject = serde_json::from_str(&self.json).unwrap_or_else(|e| {
            tracing::error!(object = %self.key, "cached object does not parse: {e}");
            DynamicObject { types: None, metadata: Default::default(), data: serde_json::Value::Null }
        });
        o.metadata.managed_fields = self.managed_fields.as_deref().and_then(|m| {
            serde_json::from_str::<Vec<ManagedFieldsEntry>>(m)
                .map_err(|e| tracing::error!(object = %self.key, "cached managedFields do not parse: {e}"))
                .ok()
        });
        o
    }
}

/// A cached object in a set keyed by its [`ObjectKey`] (the key is not stored twice).
struct Entry(Arc<Cached>);

impl Hash for Entry {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.0.key.hash(h)
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.0.key == other.0.key
    }
}

impl Eq for Entry {}

impl Borrow<ObjectKey> for Entry {
    fn borrow(&self) -> &ObjectKey {
        &self.0.key
    }
}

type Objects = HashSet<Entry>;

/// The cached objects of one kind. A (re)list is buffered and swapped in whole, as
/// kube-runtime's reflector does, so readers never see half a list.
#[derive(Default)]
pub struct Store {
    objects: RwLock<Objects>,
    relist: std::sync::Mutex<Option<Objects>>,
}

impl Store {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Objects> {
        self.objects.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Objects> {
        self.objects.write().unwrap_or_else(|p| p.into_inner())
    }

    fn buffer(&self) -> std::sync::MutexGuard<'_, Option<Objects>> {
        self.relist.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One object.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<Cached>> {
        self.read().get(key).map(|e| e.0.clone())
    }

    /// Every object (in no particular order).
    pub fn state(&self) -> Vec<Arc<Cached>> {
        self.read().iter().map(|e| e.0.clone()).collect()
    }

    /// How many objects.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// An object was added or changed; returns the version it replaces.
    pub fn apply(&self, o: Arc<Cached>) -> Option<Arc<Cached>> {
        self.write().replace(Entry(o)).map(|e| e.0)
    }

    /// An object was deleted; returns what was cached.
    pub fn delete(&self, key: &ObjectKey) -> Option<Arc<Cached>> {
        self.write().take(key).map(|e| e.0)
    }

    /// A (re)list starts.
    pub fn relist_start(&self) {
        *self.buffer() = Some(HashSet::new());
    }

    /// An object of the (re)list.
    pub fn relist_object(&self, o: Arc<Cached>) {
        self.buffer().get_or_insert_with(HashSet::new).replace(Entry(o));
    }

    /// The (re)list is complete: it replaces the store (a completion without a start, which the
    /// watcher never sends, leaves the store as it is rather than emptying it).
    pub fn relist_done(&self) {
        if let Some(mut listed) = self.buffer().take() {
            listed.shrink_to_fit();
            *self.write() = listed;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                "labels": {"b": "2", "a": "1"},
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "X", "name": "x", "uid": "other"},
                    {"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "f", "uid": "fu", "controller": true}
                ],
                "managedFields": [{"manager": "kwop-foo", "operation": "Apply", "subresource": "status",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:availableReplicas": {}}}}]
            },
            "spec": {"replicas": 2}
        }))
        .expect("object")
    }

    #[test]
    fn the_compact_form_keeps_what_the_host_reads_and_gives_plugins_no_managed_fields() {
        let c = Cached::new(deployment());
        assert_eq!((c.namespace(), c.name(), c.uid(), c.resource_version()), (Some("ns"), "web", "u1", "7"));
        assert_eq!((c.label("a"), c.label("b"), c.label("c")), (Some("1"), Some("2"), None));
        assert_eq!(c.controller().map(|r| (&*r.kind, &*r.name, &*r.uid)), Some(("Foo", "f", "fu")));
        assert!(!c.deleting());
        let plugin_sees: serde_json::Value = serde_json::from_str(c.json()).expect("json");
        assert!(plugin_sees["metadata"].get("managedFields").is_none());
        assert_eq!(plugin_sees["spec"]["replicas"], 2);
        let whole = c.object();
        let kept = whole.metadata.managed_fields.unwrap_or_default();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].manager.as_deref(), Some("kwop-foo"));
        let fields = kept[0].fields_v1.as_ref().map(|f| f.0.clone());
        assert_eq!(fields, Some(serde_json::json!({"f:status": {"f:availableReplicas": {}}})));
        assert_eq!(whole.data["spec"]["replicas"], 2);
    }

    #[test]
    fn a_relist_replaces_the_store_only_when_done() {
        let s = Store::default();
        let a = Arc::new(Cached::new(deployment()));
        assert!(s.apply(a.clone()).is_none());
        assert!(s.apply(a.clone()).is_some_and(|old| Arc::ptr_eq(&old, &a)), "a change replaces");
        s.relist_start();
        let mut other = deployment();
        other.metadata.name = Some("db".into());
        s.relist_object(Arc::new(Cached::new(other)));
        assert!(s.get(a.key()).is_some(), "the old list is served until the new one is complete");
        s.relist_done();
        assert!(s.get(a.key()).is_none());
        assert_eq!(s.len(), 1);
        s.relist_done();
        assert_eq!(s.len(), 1, "a completion without a start changes nothing");
        let gone = s.delete(&ObjectKey { namespace: Some("ns".into()), name: "db".into() });
        assert_eq!(gone.map(|o| o.name().to_string()).as_deref(), Some("db"));
        assert!(s.is_empty());
    }
}
