//! The write fence: what a plugin may write, checked against its declaration and the cluster.
//!
//! Rules (any violation rejects the whole outcome):
//! - apply and delete only kinds listed in `owns`;
//! - a namespaced primary writes only in its own namespace (a missing namespace means its own);
//!   a cluster-scoped kind cannot be owned by a namespaced primary (the API has no such owner
//!   reference);
//! - an existing object is written or deleted only if its controller owner reference is this
//!   primary (by UID). No adoption of unowned objects, never anything controlled by another owner.

use super::{reject, Outcome, RejectReason, Rejection};
use crate::kinds::Gvk;
use crate::plugin::PluginInfo;
use serde_json::Value;

/// Looks up the observed object (kind, namespace, name), if it exists.
pub type ObservedFn<'a> = dyn Fn(&Gvk, Option<&str>, &str) -> Option<Value> + Sync + 'a;

/// The namespace each apply intent and each deletion resolves to (same order as the outcome).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespaces {
    /// For `apply`.
    pub apply: Vec<Option<String>>,
    /// For `delete`.
    pub delete: Vec<Option<String>>,
}

/// What the fence needs to know about the world.
pub struct FenceContext<'a> {
    /// The plugin's declaration.
    pub info: &'a PluginInfo,
    /// The primary's namespace (`None` for a cluster-scoped primary).
    pub primary_namespace: Option<&'a str>,
    /// The primary's UID.
    pub primary_uid: &'a str,
    /// Whether a kind is namespaced.
    pub namespaced: &'a (dyn Fn(&Gvk) -> bool + Sync),
    /// The observed object, if it exists (kind, namespace, name).
    pub observed: &'a ObservedFn<'a>,
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

fn controller_desc(obj: &Value) -> String {
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

/// Resolves the namespace an object of `gvk` will be written to, or refuses.
pub fn resolve_namespace(
    ctx: &FenceContext<'_>,
    gvk: &Gvk,
    given: Option<&str>,
    what: &str,
) -> Result<Option<String>, Rejection> {
    let namespaced = (ctx.namespaced)(gvk);
    match (ctx.primary_namespace, namespaced, given) {
        (Some(_), false, _) => Err(reject(
            RejectReason::WrongNamespace,
            format!("{what}: {gvk} is cluster-scoped and cannot be owned by a namespaced primary"),
        )),
        (Some(p), true, None) => Ok(Some(p.to_string())),
        (Some(p), true, Some(n)) if n == p => Ok(Some(p.to_string())),
        (Some(p), true, Some(n)) => Err(reject(
            RejectReason::WrongNamespace,
            format!("{what}: namespace {n:?} is outside the primary's namespace {p:?}"),
        )),
        (None, true, Some(n)) => Ok(Some(n.to_string())),
        (None, true, None) => {
            Err(reject(RejectReason::WrongNamespace, format!("{what}: a namespaced kind needs metadata.namespace")))
        }
        (None, false, None) => Ok(None),
        (None, false, Some(_)) => {
            Err(reject(RejectReason::WrongNamespace, format!("{what}: {gvk} is cluster-scoped; remove the namespace")))
        }
    }
}

fn check_kind(ctx: &FenceContext<'_>, gvk: &Gvk, what: &str) -> Result<(), Rejection> {
    if ctx.info.owns.contains(gvk) {
        Ok(())
    } else {
        let declared: Vec<String> = ctx.info.owns.iter().map(ToString::to_string).collect();
        Err(reject(
            RejectReason::UndeclaredKind,
            format!("{what}: kind {gvk} is not declared in owns [{}]", declared.join(", ")),
        ))
    }
}

/// Checks a decoded outcome; on success returns the resolved namespace of every apply intent
/// and deletion (same order).
pub fn fence(outcome: &Outcome, ctx: &FenceContext<'_>) -> Result<Namespaces, Rejection> {
    let mut apply_ns = Vec::with_capacity(outcome.apply.len());
    for (i, intent) in outcome.apply.iter().enumerate() {
        let what = format!("apply[{i}] {} {:?}", intent.gvk.kind, intent.name);
        check_kind(ctx, &intent.gvk, &what)?;
        let ns = resolve_namespace(ctx, &intent.gvk, intent.namespace.as_deref(), &what)?;
        if let Some(obj) = (ctx.observed)(&intent.gvk, ns.as_deref(), &intent.name) {
            if controller_uid(&obj) != Some(ctx.primary_uid) {
                return Err(reject(
                    RejectReason::NotControlled,
                    format!("{what} exists and is {}", controller_desc(&obj)),
                ));
            }
        }
        apply_ns.push(ns);
    }
    let mut delete_ns = Vec::with_capacity(outcome.delete.len());
    for (i, d) in outcome.delete.iter().enumerate() {
        let what = format!("delete[{i}] {} {:?}", d.gvk.kind, d.name);
        check_kind(ctx, &d.gvk, &what)?;
        let ns = resolve_namespace(ctx, &d.gvk, d.namespace.as_deref(), &what)?;
        if let Some(obj) = (ctx.observed)(&d.gvk, ns.as_deref(), &d.name) {
            if controller_uid(&obj) != Some(ctx.primary_uid) {
                return Err(reject(
                    RejectReason::NotControlled,
                    format!("{what} is {}; only objects this primary controls can be deleted", controller_desc(&obj)),
                ));
            }
        }
        delete_ns.push(ns);
    }
    Ok(Namespaces { apply: apply_ns, delete: delete_ns })
}

/// Kinds known to be cluster-scoped, for offline runs without discovery.
pub fn well_known_cluster_scoped(gvk: &Gvk) -> bool {
    matches!(
        (gvk.group.as_str(), gvk.kind.as_str()),
        ("", "Namespace")
            | ("", "Node")
            | ("", "PersistentVolume")
            | ("rbac.authorization.k8s.io", "ClusterRole")
            | ("rbac.authorization.k8s.io", "ClusterRoleBinding")
            | ("storage.k8s.io", "StorageClass")
            | ("apiextensions.k8s.io", "CustomResourceDefinition")
            | ("admissionregistration.k8s.io", _)
            | ("scheduling.k8s.io", "PriorityClass")
            | ("networking.k8s.io", "IngressClass")
    )
}
