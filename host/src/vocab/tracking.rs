//! Which objects belong to a primary: a controller owner reference to it (the garbage collector's
//! way), or — for kinds owned across namespaces, where owner references cannot reach — the
//! labels and annotation the host sets on everything it applies for them.

use serde_json::{json, Map, Value};

/// Label holding the uid of the primary an object belongs to.
pub const OWNER_UID: &str = "kwop.dev/owner-uid";
/// Label holding the name of the plugin that wrote the object.
pub const PLUGIN: &str = "kwop.dev/plugin";
/// Annotation naming the primary: `<namespace>/<name>`, or `<name>` when cluster-scoped (label
/// values are too short for names).
pub const OWNER: &str = "kwop.dev/owner";
/// Labels and annotations under this prefix are the host's: intents may not set them.
pub const HOST_PREFIX: &str = "kwop.dev/";

/// A primary, as the objects that belong to it name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner<'a> {
    /// Its uid.
    pub uid: &'a str,
    /// Its namespace (`None`: cluster-scoped).
    pub namespace: Option<&'a str>,
    /// Its name.
    pub name: &'a str,
    /// The plugin reconciling it.
    pub plugin: &'a str,
}

impl Owner<'_> {
    /// The annotation value naming this primary.
    pub fn annotation(&self) -> String {
        match self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.to_string(),
        }
    }

    /// Sets the tracking labels and annotation on an object about to be applied.
    pub fn mark(&self, body: &mut Value) {
        let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        let mut put = |field: &str, k: &str, v: String| {
            let m = meta.entry(field).or_insert_with(|| json!({}));
            if !m.is_object() {
                *m = Value::Object(Map::new());
            }
            if let Some(m) = m.as_object_mut() {
                m.insert(k.into(), json!(v));
            }
        };
        put("labels", OWNER_UID, self.uid.to_string());
        put("labels", PLUGIN, self.plugin.to_string());
        put("annotations", OWNER, self.annotation());
    }
}

/// The controller owner reference's UID of an object, if it has one.
pub fn controller_uid(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?
        .get("uid")?
        .as_str()
}

/// `(namespace, name)` of the primary an `kwop.dev/owner` annotation names.
pub fn parse_owner(annotation: &str) -> (Option<&str>, &str) {
    match annotation.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, annotation),
    }
}

fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/labels")?.get(key)?.as_str()
}

/// Whether an existing object belongs to the primary `uid` of `plugin`: its controller owner
/// reference is the primary, or it carries both tracking labels for it.
pub fn belongs(obj: &Value, uid: &str, plugin: &str) -> bool {
    if controller_uid(obj) == Some(uid) {
        return true;
    }
    label(obj, OWNER_UID) == Some(uid) && label(obj, PLUGIN) == Some(plugin)
}

/// Says whom an object belongs to, for a refusal.
pub fn describe(obj: &Value) -> String {
    if let (Some(uid), Some(p)) = (label(obj, OWNER_UID), label(obj, PLUGIN)) {
        let owner = obj.pointer(&format!("/metadata/annotations/{}", OWNER.replace('/', "~1"))).and_then(Value::as_str);
        return format!("tracked by plugin {p:?} for {} (uid {uid})", owner.unwrap_or("another primary"));
    }
    let refs = obj.pointer("/metadata/ownerReferences").and_then(Value::as_array);
    match refs.into_iter().flatten().find(|r| r.get("controller").and_then(Value::as_bool) == Some(true)) {
        Some(r) => format!(
            "controlled by {} {:?}",
            r.get("kind").and_then(Value::as_str).unwrap_or("?"),
            r.get("name").and_then(Value::as_str).unwrap_or("?")
        ),
        None => "not controlled by anyone (kwop does not adopt objects)".into(),
    }
}

/// The first label or annotation key of `meta` under [`HOST_PREFIX`], as `labels.<key>`.
pub fn host_key(meta: &Map<String, Value>) -> Option<String> {
    ["labels", "annotations"].iter().find_map(|field| {
        let m = meta.get(*field)?.as_object()?;
        m.keys().find(|k| k.starts_with(HOST_PREFIX)).map(|k| format!("{field}.{k}"))
    })
}

/// The first label or annotation key under [`HOST_PREFIX`] in a `metadata` nested anywhere
/// below the top of `body` (pod templates, `volumeClaimTemplates`, a CronJob's `jobTemplate`...:
/// the objects made from them inherit that metadata), as its path: `spec.template.metadata.labels.<key>`.
pub fn nested_host_key(body: &Value) -> Option<String> {
    // Depth is bounded by the JSON parser's recursion limit (128).
    fn walk(v: &Value, path: &str) -> Option<String> {
        let join = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
        match v {
            Value::Object(m) => m.iter().find_map(|(k, child)| {
                if k == "metadata" {
                    if path.is_empty() {
                        return None; // the top's: checked on its own
                    }
                    if let Some(key) = child.as_object().and_then(host_key) {
                        return Some(format!("{}.{key}", join(k)));
                    }
                }
                walk(child, &join(k))
            }),
            Value::Array(items) => items.iter().enumerate().find_map(|(i, c)| walk(c, &format!("{path}[{i}]"))),
            _ => None,
        }
    }
    walk(body, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_objects_belong_to_their_primary_and_plugin_only() {
        let owner = Owner { uid: "u1", namespace: Some("team-a"), name: "sync", plugin: "config-sync" };
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"x": "1"}}});
        owner.mark(&mut cm);
        assert_eq!(cm["metadata"]["labels"]["x"], "1", "the intent's own labels stay");
        assert_eq!(cm["metadata"]["annotations"][OWNER], "team-a/sync");
        assert!(belongs(&cm, "u1", "config-sync"));
        assert!(!belongs(&cm, "u2", "config-sync"), "another primary");
        assert!(!belongs(&cm, "u1", "other-plugin"), "another plugin");
        assert!(describe(&cm).contains("config-sync") && describe(&cm).contains("team-a/sync"));
        let cluster = Owner { namespace: None, ..owner };
        assert_eq!(parse_owner(&cluster.annotation()), (None, "sync"));
        assert_eq!(parse_owner("ns/n"), (Some("ns"), "n"));
    }

    #[test]
    fn an_owner_reference_still_counts_and_unowned_objects_are_described() {
        let owned =
            json!({"metadata": {"ownerReferences": [{"kind": "Foo", "name": "f", "uid": "u1", "controller": true}]}});
        assert!(belongs(&owned, "u1", "any"));
        assert_eq!(describe(&json!({"metadata": {}})), "not controlled by anyone (kwop does not adopt objects)");
        let meta = json!({"labels": {"app": "x"}, "annotations": {"kwop.dev/owner": "forged"}});
        assert_eq!(host_key(meta.as_object().expect("map")).as_deref(), Some("annotations.kwop.dev/owner"));
        assert_eq!(host_key(json!({"labels": {"a": "b"}}).as_object().expect("map")), None);
    }
}
