//! The only writer: server-side apply of intents, the status subresource, deletions.
//!
//! Every write is skipped when the observed object already satisfies the intent (see
//! [`covers`]), so a resync of an in-sync world costs zero writes. Each applied object carries
//! an annotation with the hash of the intent it came from, so an intent that *drops* a field
//! (which a subset comparison cannot see) still gets applied, and server-side apply removes it.
//!
//! Every field and list the intent sets converges, keyed list items included: when a hand edit
//! left an item that server-side apply merges with instead of replacing (see [`lists`]), the
//! applier replaces those lists with the intent's and applies again, within the same write.

pub mod compare;
mod finalizers;
pub mod lists;

pub use compare::covers;

use crate::vocab::Gvk;
use crate::outcome::Intent;
use crate::watch::Resolved;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::Client;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Mutex;

/// Annotation holding the hash of the intent an object was last applied from.
pub const INTENT_HASH: &str = "kwop.dev/intent-hash";

type MemoKey = (Gvk, Option<String>, String);

/// What we last wrote to an object (an applied intent, or a primary's status).
///
/// The object still matches that write if it carries the resourceVersion our write produced, or
/// the one we saw just before writing — the latter is a cache that has not caught up with our own
/// write yet, which would otherwise cause a second, identical write.
struct Applied {
    uid: String,
    before: Option<String>,
    after: String,
    hash: String,
}

impl Applied {
    fn matches(&self, observed: &DynamicObject, hash: &str) -> bool {
        let rv = observed.metadata.resource_version.as_ref();
        self.hash == hash
            && observed.metadata.uid.as_ref() == Some(&self.uid)
            && (rv == Some(&self.after) || (rv.is_some() && rv == self.before.as_ref()))
    }
}

/// How an applied object is tied to its primary.
pub enum Belonging<'a> {
    /// A controller owner reference (in the primary's namespace, or under a cluster-scoped one).
    Reference(&'a OwnerReference),
    /// The host's tracking labels (a kind owned across namespaces).
    Labels(&'a crate::vocab::tracking::Owner<'a>),
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// A request was sent.
    Written,
    /// Nothing to do: the object already matched.
    Skipped,
}

/// Writes for one plugin, with its field manager.
pub struct Applier {
    client: Client,
    field_manager: String,
    /// (kind, namespace, name) → our last apply: if the object has not changed since, it still
    /// matches, even when the API server normalised a value (e.g. a quantity) so that a plain
    /// comparison would say it differs.
    memo: Mutex<HashMap<MemoKey, Applied>>,
    /// The same for the status of primaries.
    status_memo: Mutex<HashMap<MemoKey, Applied>>,
}

fn hash_of(v: &Value) -> String {
    use sha2::{Digest, Sha256};
    let mut text = Vec::new();
    canonical(v, &mut text);
    hex::encode(&Sha256::digest(&text)[..12])
}

/// JSON with object keys sorted. Maps keep insertion order (the host enables serde_json's
/// `preserve_order`: smaller cached objects, see BENCHMARKS.md), and the same intent written in
/// another key order must hash the same — and as it did when maps were sorted.
fn canonical(v: &Value, out: &mut Vec<u8>) {
    // Keys and scalars use serde_json's own escaping; writing into a Vec cannot fail.
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, x)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let _ = serde_json::to_writer(&mut *out, k);
                out.push(b':');
                canonical(x, out);
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(x, out);
            }
            out.push(b']');
        }
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

impl Applier {
    /// An applier writing as `field_manager`.
    pub fn new(client: Client, field_manager: String) -> Self {
        Applier { client, field_manager, memo: Mutex::new(HashMap::new()), status_memo: Mutex::new(HashMap::new()) }
    }

    fn api(&self, r: &Resolved, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) if r.namespaced => Api::namespaced_with(self.client.clone(), ns, &r.resource),
            _ => Api::all_with(self.client.clone(), &r.resource),
        }
    }

    /// The object that will be applied: the intent, its namespace, how it belongs to its primary
    /// (the controller reference, or for a kind owned across namespaces the tracking labels) and
    /// the intent hash.
    pub fn desired(intent: &Intent, namespace: Option<&str>, owner: &Belonging<'_>) -> Value {
        let mut body = intent.body.clone();
        if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            if let Some(ns) = namespace {
                meta.insert("namespace".into(), json!(ns));
            }
            if let Belonging::Reference(r) = owner {
                meta.insert("ownerReferences".into(), json!([r]));
            }
        }
        if let Belonging::Labels(o) = owner {
            o.mark(&mut body);
        }
        let hash = hash_of(&body);
        if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            let ann = meta.entry("annotations").or_insert_with(|| json!({}));
            if let Some(a) = ann.as_object_mut() {
                a.insert(INTENT_HASH.into(), json!(hash));
            }
        }
        body
    }

    fn memo_matches(
        memo: &Mutex<HashMap<MemoKey, Applied>>,
        key: &MemoKey,
        observed: &DynamicObject,
        hash: &str,
    ) -> bool {
        memo.lock().unwrap_or_else(|p| p.into_inner()).get(key).is_some_and(|a| a.matches(observed, hash))
    }

    fn remember(
        memo: &Mutex<HashMap<MemoKey, Applied>>,
        key: MemoKey,
        before: Option<&DynamicObject>,
        written: &DynamicObject,
        hash: String,
    ) {
        if let (Some(uid), Some(after)) = (written.metadata.uid.clone(), written.metadata.resource_version.clone()) {
            let before = before.and_then(|b| b.metadata.resource_version.clone());
            memo.lock().unwrap_or_else(|p| p.into_inner()).insert(key, Applied { uid, before, after, hash });
        }
    }

    /// Whether `rv` is the version a primary had just before this applier's last status write on
    /// it: the cache has not caught up with our own write yet. A reconcile now would decide on
    /// stale input (a condition's transition time would move for nothing, and be written again);
    /// the watch event of our write reconciles it anyway.
    pub fn behind_own_status(&self, gvk: &Gvk, namespace: Option<&str>, name: &str, rv: &str) -> bool {
        let key = (gvk.clone(), namespace.map(str::to_string), name.to_string());
        let memo = self.status_memo.lock().unwrap_or_else(|p| p.into_inner());
        memo.get(&key).is_some_and(|a| a.before.as_deref() == Some(rv) && a.after != rv)
    }

    /// Forgets what was applied for objects of a deleted primary's namespace/name (memory bound).
    pub fn forget(&self, gvk: &Gvk, namespace: Option<&str>, name: &str) {
        let key = (gvk.clone(), namespace.map(str::to_string), name.to_string());
        self.memo.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
        self.status_memo.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
    }

    /// Applies one desired object unless `observed` already satisfies it.
    pub async fn apply(
        &self,
        r: &Resolved,
        namespace: Option<&str>,
        name: &str,
        desired: &Value,
        observed: Option<&DynamicObject>,
    ) -> Result<Write, kube::Error> {
        let hash = desired
            .pointer(&format!("/metadata/annotations/{}", INTENT_HASH.replace('/', "~1")))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let key = (r.gvk.clone(), namespace.map(str::to_string), name.to_string());
        if let Some(o) = observed {
            if Self::memo_matches(&self.memo, &key, o, &hash) {
                return Ok(Write::Skipped);
            }
            if serde_json::to_value(o).is_ok_and(|ov| covers(&ov, desired)) {
                return Ok(Write::Skipped);
            }
        }
        let api = self.api(r, namespace);
        let pp = PatchParams::apply(&self.field_manager).force();
        let written = match api.patch(name, &pp, &Patch::Apply(desired)).await {
            Ok(w) => {
                let foreign = serde_json::to_value(&w).map(|v| lists::with_foreign_items(&v, desired));
                match foreign {
                    Ok(paths) if !paths.is_empty() => self.take_back(&api, name, &w, desired, &paths).await?,
                    _ => w,
                }
            }
            // The merged object was refused, perhaps because of an item someone else keyed by
            // hand (two unnamed Service ports): replace the lists the intent sets, then apply.
            Err(kube::Error::Api(s)) if names_object_fault(s.code, &s.message) => {
                let paths = observed
                    .and_then(|o| serde_json::to_value(o).ok())
                    .map(|ov| lists::differing(&ov, desired))
                    .unwrap_or_default();
                match observed {
                    Some(o) if !paths.is_empty() => self.take_back(&api, name, o, desired, &paths).await?,
                    _ => return Err(kube::Error::Api(s)),
                }
            }
            Err(e) => return Err(e),
        };
        Self::remember(&self.memo, key, observed, &written, hash);
        Ok(Write::Written)
    }

    /// Replaces the lists at `paths` with the intent's (a merge patch pinned to `current`'s
    /// resourceVersion: a conflict if the object moved on), then applies the intent again so this
    /// field manager owns what it set.
    async fn take_back(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        current: &DynamicObject,
        desired: &Value,
        paths: &[lists::Path],
    ) -> Result<DynamicObject, kube::Error> {
        tracing::info!(object = name, lists = %lists::display(paths),
            "lists hold items another manager set (a hand edit); replacing them with the intent's");
        let patch = lists::replace_patch(desired, paths, current.metadata.resource_version.as_deref());
        let mp = PatchParams { field_manager: Some(self.field_manager.clone()), ..PatchParams::default() };
        api.patch(name, &mp, &Patch::Merge(&patch)).await?;
        api.patch(name, &PatchParams::apply(&self.field_manager).force(), &Patch::Apply(desired)).await
    }

    /// Writes the primary's status through the status subresource unless it already matches:
    /// every desired field is there, and no field this plugin set before (its status entry in
    /// `managedFields`, which the primary's cache keeps) is missing from the desired status —
    /// such a field is one the plugin dropped, and applying removes it.
    pub async fn status(&self, r: &Resolved, primary: &DynamicObject, status: &Value) -> Result<Write, kube::Error> {
        if primary.data.get("status").is_some_and(|s| covers(s, status))
            && !compare::owns_fields_beyond(primary, &self.field_manager, "status", status)
        {
            return Ok(Write::Skipped);
        }
        let name = primary.metadata.name.clone().unwrap_or_default();
        let key = (r.gvk.clone(), primary.metadata.namespace.clone(), name.clone());
        let hash = hash_of(status);
        if Self::memo_matches(&self.status_memo, &key, primary, &hash) {
            return Ok(Write::Skipped);
        }
        let body = json!({
            "apiVersion": r.resource.api_version,
            "kind": r.resource.kind,
            "metadata": { "name": name, "namespace": primary.metadata.namespace },
            "status": status,
        });
        let pp = PatchParams::apply(&self.field_manager).force();
        let written =
            self.api(r, primary.metadata.namespace.as_deref()).patch_status(&name, &pp, &Patch::Apply(&body)).await?;
        Self::remember(&self.status_memo, key, Some(primary), &written, hash);
        Ok(Write::Written)
    }

    /// Deletes an object if it still is the one observed: same UID and resourceVersion (the
    /// version the plugin saw, see `controller::seen`; one changed by someone since is a 409 and
    /// a retry, never a delete decided on stale data). Already gone is fine.
    pub async fn delete(
        &self,
        r: &Resolved,
        namespace: Option<&str>,
        name: &str,
        observed: Option<&DynamicObject>,
    ) -> Result<Write, kube::Error> {
        let Some(o) = observed else {
            return Ok(Write::Skipped);
        };
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: o.metadata.uid.clone(),
                resource_version: o.metadata.resource_version.clone(),
            }),
            propagation_policy: Some(kube::api::PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        match self.api(r, namespace).delete(name, &dp).await {
            Ok(_) => {
                self.forget(&r.gvk, namespace, name);
                Ok(Write::Written)
            }
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(Write::Skipped),
            Err(e) => Err(e),
        }
    }

    /// Reads an object from the API server (used when the cache has not seen it, so the fence
    /// judges what really exists, not a cache that may lag behind).
    pub async fn get_live(
        &self,
        r: &Resolved,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<DynamicObject>, kube::Error> {
        self.api(r, namespace).get_opt(name).await
    }
}

/// Error texts of a server-side apply the API server could not type-check: the object's fault,
/// even when the API server answers 500 (e.g. a number where the schema wants a string).
const TYPED_ERRORS: &[&str] = &[
    "failed to create typed patch object",
    "failed to create typed live object",
    "field not declared in schema",
    "duplicate entries for key",
    ": expected ",
];

/// Whether a refusal names the object's content (invalid field, schema or typed-patch error), so
/// the same write would fail again: a 400 or 422, or a 500 whose message is a typing error.
pub fn names_object_fault(code: u16, message: &str) -> bool {
    match code {
        400 | 422 => true,
        500 => TYPED_ERRORS.iter().any(|t| message.contains(t)),
        _ => false,
    }
}

#[cfg(test)]
mod hash_tests {
    use super::*;

    #[test]
    fn the_intent_hash_ignores_key_order_and_equals_the_sorted_text() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":{"d":[1,{"z":"é\"","y":2.5}],"c":null}}"#).expect("json");
        let b: Value = serde_json::from_str(r#"{"a":{"c":null,"d":[1,{"y":2.5,"z":"é\""}]},"b":1}"#).expect("json");
        assert_eq!(hash_of(&a), hash_of(&b));
        // The same text as before maps kept their insertion order: hashes written by earlier
        // versions still match.
        use sha2::{Digest, Sha256};
        let sorted = r#"{"a":{"c":null,"d":[1,{"y":2.5,"z":"é\""}]},"b":1}"#;
        assert_eq!(hash_of(&a), hex::encode(&Sha256::digest(sorted.as_bytes())[..12]));
        let mut other = b.clone();
        other["b"] = serde_json::json!(2);
        assert_ne!(hash_of(&a), hash_of(&other));
    }

    #[test]
    fn typing_errors_are_the_objects_fault_whatever_the_code() {
        let typed = "failed to create typed patch object (/v1, Kind=ConfigMap) x: .data.replicas: expected string, got &value.valueUnstructured{Value:1}";
        assert!(names_object_fault(500, typed));
        assert!(names_object_fault(500, ".status.status: field not declared in schema"));
        assert!(names_object_fault(422, "spec.ports[0].name: Required value"));
        assert!(!names_object_fault(500, "etcdserver: request timed out"));
        assert!(!names_object_fault(503, "failed to create typed patch object"));
    }
}
