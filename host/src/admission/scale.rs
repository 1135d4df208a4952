//! Scale requests: `kubectl scale` (a `PUT`/`PATCH` of `<plural>/scale`) sends the webhook an
//! autoscaling/v1 `Scale`, not the primary. A plugin validates its primary, so the host composes
//! the primary as it would be: the stored one, read fresh from the API server (the cache may lag),
//! with the Scale's `spec.replicas` written where the CustomResourceDefinition's
//! `subresources.scale.specReplicasPath` says. The plugin gets an UPDATE of that object, the
//! stored one as the old object. A write racing the scale makes the API server's update
//! conflict and retry, which asks again: no answer stands on a state older than the one stored.
//!
//! The path is read from the CustomResourceDefinition `<plural>.<group>` and kept
//! [`PATH_TTL`] per CRD and version: a CRD edited to move the field is followed within that
//! time. A kind without a CRD is built in; the built-in kinds with a scale subresource
//! (Deployment, ReplicaSet, StatefulSet, ReplicationController) keep it at `.spec.replicas`.

use crate::watch::Resolved;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::core::DynamicObject;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a CRD's `specReplicasPath` is kept before it is read again.
pub const PATH_TTL: Duration = Duration::from_secs(15);

/// Why a scale request could not be put to the plugin.
#[derive(Debug, thiserror::Error)]
pub enum ScaleError {
    /// The stored primary could not be read.
    #[error("cannot read the stored {kind} {object}: {why}")]
    Read {
        /// Its kind.
        kind: String,
        /// `namespace/name`.
        object: String,
        /// What the API server said (its message), or why it could not be asked.
        why: String,
    },
    /// The CustomResourceDefinition could not be read.
    #[error("cannot read the CustomResourceDefinition {crd}: {why}")]
    Crd {
        /// Its name, `<plural>.<group>`.
        crd: String,
        /// What the API server said (its message), or why it could not be asked.
        why: String,
    },
    /// The CRD has no scale subresource for the primary's version.
    #[error("the CustomResourceDefinition {crd} has no scale subresource (subresources.scale.specReplicasPath) for version {version}")]
    NoScale {
        /// Its name.
        crd: String,
        /// The version looked at.
        version: String,
    },
    /// `specReplicasPath` is not a path the host can write.
    #[error("specReplicasPath {path:?} is not a path of fields under .spec ({why})")]
    Path {
        /// The path as written.
        path: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The Scale's `spec.replicas` is not an integer.
    #[error("the Scale's spec.replicas is not an integer: {0}")]
    Replicas(String),
    /// The stored object holds something other than an integer (or an object on the way) where
    /// the replicas go.
    #[error("the stored object has {found} at {at}, where {path} needs {wants}")]
    Shape {
        /// The path written.
        path: String,
        /// Where along it.
        at: String,
        /// What was found there (as JSON, shortened).
        found: String,
        /// What was needed.
        wants: &'static str,
    },
}

/// A parsed `specReplicasPath`: the field names from `spec` down, e.g. `.spec.replicas`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicasPath(Vec<String>);

impl ReplicasPath {
    /// Parses a path as the API server allows it for `specReplicasPath`: dot-separated field
    /// names under `.spec`, no array or filter notation.
    pub fn parse(path: &str) -> Result<Self, ScaleError> {
        let bad = |why| Err(ScaleError::Path { path: path.to_string(), why });
        let Some(rest) = path.strip_prefix('.') else { return bad("it must start with '.'") };
        let fields: Vec<String> = rest.split('.').map(str::to_string).collect();
        if fields.iter().any(String::is_empty) {
            return bad("a field name is empty");
        }
        if fields.iter().any(|f| f.chars().any(|c| "[]*@$?()'\" \\".contains(c) || c.is_control())) {
            return bad("only plain field names, no array, filter or quoted notation");
        }
        if fields.len() < 2 || fields[0] != "spec" {
            return bad("it must name a field under .spec");
        }
        Ok(ReplicasPath(fields))
    }

    /// The path as written in the CRD.
    pub fn text(&self) -> String {
        format!(".{}", self.0.join("."))
    }

    /// Writes `replicas` into `object` (the primary's JSON, without `metadata`) at this path,
    /// making the objects on the way that are missing.
    pub fn write(&self, object: &mut Map<String, Value>, replicas: i64) -> Result<(), ScaleError> {
        let shape = |at: &[String], found: &Value, wants| ScaleError::Shape {
            path: self.text(),
            at: format!(".{}", at.join(".")),
            found: shown(found),
            wants,
        };
        let (last, parents) = self.0.split_last().ok_or_else(|| shape(&[], &Value::Null, "a field"))?;
        let mut here = object;
        for (i, field) in parents.iter().enumerate() {
            let next = here.entry(field.clone()).or_insert_with(|| Value::Object(Map::new()));
            if next.is_null() {
                *next = Value::Object(Map::new());
            }
            here = match next {
                Value::Object(m) => m,
                other => return Err(shape(&self.0[..=i], other, "an object")),
            };
        }
        match here.get(last) {
            None | Some(Value::Null) => {}
            Some(v) if v.is_i64() || v.is_u64() => {}
            Some(other) => return Err(shape(&self.0, other, "an integer")),
        }
        here.insert(last.clone(), Value::from(replicas));
        Ok(())
    }
}

/// The replicas a Scale asks for (an absent `spec.replicas` is 0: autoscaling/v1 omits zero).
pub fn replicas_of(scale: &DynamicObject) -> Result<i64, ScaleError> {
    match scale.data.pointer("/spec/replicas") {
        None | Some(Value::Null) => Ok(0),
        Some(v) => v.as_i64().ok_or_else(|| ScaleError::Replicas(shown(v))),
    }
}

/// What the API server said: its message (`... is forbidden: User ... cannot get ...`), not the
/// whole Status; any other failure as it is.
fn said(e: kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({})", s.message, s.code),
        e => e.to_string(),
    }
}

/// A value in a message: its JSON, at most 100 characters.
fn shown(v: &Value) -> String {
    crate::outcome::decode::truncate(&v.to_string(), 100)
}

/// The stored primary with `replicas` written at `path`.
pub fn compose(stored: &DynamicObject, path: &ReplicasPath, replicas: i64) -> Result<DynamicObject, ScaleError> {
    let mut object = stored.clone();
    if !object.data.is_object() {
        object.data = Value::Object(Map::new());
    }
    if let Value::Object(m) = &mut object.data {
        path.write(m, replicas)?;
    }
    Ok(object)
}

/// `specReplicasPath` of each CRD and version, kept [`PATH_TTL`].
#[derive(Default)]
pub struct ReplicasPaths {
    kept: Mutex<HashMap<(String, String), (Instant, ReplicasPath)>>,
}

impl ReplicasPaths {
    /// The path of `primary`'s replicas: kept, or read from its CRD. Only a path found is kept:
    /// a CRD without a scale subresource is asked again next time.
    pub async fn get(&self, client: &kube::Client, primary: &Resolved) -> Result<ReplicasPath, ScaleError> {
        let crd = format!("{}.{}", primary.resource.plural, primary.gvk.group);
        let key = (crd.clone(), primary.gvk.version.clone());
        if let Ok(kept) = self.kept.lock() {
            if let Some((at, p)) = kept.get(&key).filter(|(at, _)| at.elapsed() < PATH_TTL) {
                tracing::trace!(%crd, age = ?at.elapsed(), "specReplicasPath kept");
                return Ok(p.clone());
            }
        }
        // The built-in groups with scale subresources have no CRD (see the module's doc).
        let found = if matches!(primary.gvk.group.as_str(), "" | "apps") {
            Some(".spec.replicas".to_string())
        } else {
            let api: Api<CustomResourceDefinition> = Api::all(client.clone());
            let c = api.get_opt(&crd).await.map_err(|e| ScaleError::Crd { crd: crd.clone(), why: said(e) })?;
            c.and_then(|c| {
                let v = c.spec.versions.into_iter().find(|v| v.name == primary.gvk.version)?;
                Some(v.subresources?.scale?.spec_replicas_path)
            })
        };
        let text = found.ok_or_else(|| ScaleError::NoScale { crd, version: primary.gvk.version.clone() })?;
        let path = ReplicasPath::parse(&text)?;
        if let Ok(mut kept) = self.kept.lock() {
            kept.insert(key, (Instant::now(), path.clone()));
        }
        Ok(path)
    }
}

/// Reads the stored primary `ns/name` fresh from the API server.
pub async fn stored(
    client: &kube::Client,
    primary: &Resolved,
    ns: Option<&str>,
    name: &str,
) -> Result<DynamicObject, ScaleError> {
    let api: Api<DynamicObject> = match (primary.namespaced, ns) {
        (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &primary.resource),
        _ => Api::all_with(client.clone(), &primary.resource),
    };
    api.get(name).await.map_err(|e| ScaleError::Read {
        kind: primary.gvk.kind.clone(),
        object: format!("{}/{name}", ns.unwrap_or("")),
        why: said(e),
    })
}

#[cfg(test)]
#[path = "scale_tests.rs"]
mod tests;
