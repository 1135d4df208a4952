//! The write fence: what a plugin may write, checked against its declaration and the cluster.
//!
//! Rules (any violation rejects the whole outcome):
//! - apply and delete only kinds listed in `owns`;
//! - a namespaced primary writes only in its own namespace (a missing namespace means its own);
//!   a cluster-scoped kind cannot be owned by a namespaced primary (the API has no such owner
//!   reference) — except for kinds owned across namespaces, tracked by labels;
//! - a kind owned across namespaces is written in any namespace the grants allow (a missing
//!   namespace means the primary's), or cluster-scoped;
//! - nothing is written in a namespace outside the plugin's granted namespaces (a listed grant);
//! - an existing object is written or deleted only if it belongs to this primary: its controller
//!   owner reference is the primary (by UID), or it carries the host's tracking labels for the
//!   primary and this plugin (`tracking`). No adoption of unowned objects, never anything that
//!   belongs to another owner.

use super::{reject, Outcome, RejectReason, Rejection};
use crate::vocab::grants::Namespaces as Granted;
use crate::vocab::{tracking, Gvk, PluginInfo};
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
    /// Where the plugin is granted to act.
    pub granted: &'a Granted,
    /// Whether a kind is namespaced.
    pub namespaced: &'a (dyn Fn(&Gvk) -> bool + Sync),
    /// The observed object, if it exists (kind, namespace, name).
    pub observed: &'a ObservedFn<'a>,
}

/// Resolves the namespace an object of `gvk` will be written to, or refuses.
pub fn resolve_namespace(
    ctx: &FenceContext<'_>,
    gvk: &Gvk,
    given: Option<&str>,
    what: &str,
) -> Result<Option<String>, Rejection> {
    let ns = place(ctx, gvk, given, what)?;
    match &ns {
        Some(n) if !ctx.granted.writes_in(n) => Err(reject(
            RejectReason::WrongNamespace,
            format!("{what}: namespace {n:?} is not among the namespaces the plugin is granted"),
        )),
        _ => Ok(ns),
    }
}

fn place(ctx: &FenceContext<'_>, gvk: &Gvk, given: Option<&str>, what: &str) -> Result<Option<String>, Rejection> {
    let namespaced = (ctx.namespaced)(gvk);
    if ctx.info.owns_across(gvk) {
        return match (namespaced, given, ctx.primary_namespace) {
            (true, Some(n), _) | (true, None, Some(n)) => Ok(Some(n.to_string())),
            (true, None, None) => {
                Err(reject(RejectReason::WrongNamespace, format!("{what}: a namespaced kind needs metadata.namespace")))
            }
            (false, None, _) => Ok(None),
            (false, Some(_), _) => Err(reject(
                RejectReason::WrongNamespace,
                format!("{what}: {gvk} is cluster-scoped; remove the namespace"),
            )),
        };
    }
    match (ctx.primary_namespace, namespaced, given) {
        (Some(_), false, _) => Err(reject(
            RejectReason::WrongNamespace,
            format!("{what}: {gvk} is cluster-scoped and cannot be owned by a namespaced primary"),
        )),
        (Some(p), true, None) => Ok(Some(p.to_string())),
        (Some(p), true, Some(n)) if n == p => Ok(Some(p.to_string())),
        (Some(p), true, Some(n)) => Err(reject(
            RejectReason::WrongNamespace,
            format!(
                "{what}: namespace {n:?} is outside the primary's namespace {p:?} (a kind owned across namespaces may be \
                 elsewhere; this one is not)"
            ),
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
            if !tracking::belongs(&obj, ctx.primary_uid, &ctx.info.name) {
                return Err(reject(
                    RejectReason::NotControlled,
                    format!("{what} exists and is {}", tracking::describe(&obj)),
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
            if !tracking::belongs(&obj, ctx.primary_uid, &ctx.info.name) {
                return Err(reject(
                    RejectReason::NotControlled,
                    format!(
                        "{what} is {}; only objects that belong to this primary can be deleted",
                        tracking::describe(&obj)
                    ),
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
