//! The ReconcilerPlugin custom resource (`kwop.dev/v1alpha1`, cluster-scoped): where a plugin
//! comes from, what the cluster admin grants it, and what the host reports back in its status.
//!
//! `crds/reconcilerplugin.yaml` is generated from these types (`kwop crd`); a unit test keeps the
//! two equal.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A reconcile plugin the host runs: its component, and the authority the cluster admin gives it.
/// The plugin's own `info()` may ask for less than `grants`, never more.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kwop.dev",
    version = "v1alpha1",
    kind = "ReconcilerPlugin",
    plural = "reconcilerplugins",
    shortname = "rp",
    status = "ReconcilerPluginStatus",
    printcolumn = r#"{"name":"Primary","type":"string","jsonPath":".spec.grants.primary.kind"}"#,
    printcolumn = r#"{"name":"Plugin","type":"string","jsonPath":".status.plugin.name"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.plugin.version"}"#,
    printcolumn = r#"{"name":"Component","type":"string","jsonPath":".status.activeDigest","priority":1}"#,
    printcolumn = r#"{"name":"Manifest","type":"string","jsonPath":".status.source.pinned","priority":1}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ReconcilerPluginSpec {
    /// Where the component comes from. Editing it hot-swaps the plugin between reconciles; a
    /// source that cannot be fetched or loaded keeps the last good version running.
    pub source: PluginSource,
    /// What the plugin may touch. A plugin whose `info()` declares a kind beyond these is not
    /// started (condition reason Forbidden).
    pub grants: Grants,
    /// Sandbox and concurrency limits; unset fields take the host's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<PluginLimits>,
    /// Stop reconciling (the plugin stays loaded; nothing is deleted in the cluster).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
    /// A second component run in shadow: on every reconcile of the active version it gets the
    /// same request (same primary, owned objects, clock and cache), never writes anything, and
    /// `status.candidate` counts how often its outcome differs. Its kinds must be among the
    /// active version's, and it runs under the same grants and limits. Promote it by moving it
    /// into `source` (and removing `candidate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<PluginSource>,
    /// Admission, for a plugin that validates (`info().validates`) on a host that serves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<AdmissionSpec>,
}

/// How the plugin's validating webhook behaves.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionSpec {
    /// `Fail` (default: the host's `--webhook-failure-policy`): a request the plugin cannot
    /// answer (a trap, its deadline, the host unreachable) is refused. `Ignore`: it is allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<super::FailurePolicy>,
}

/// Exactly one of `oci` and `configMap`.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct PluginSource {
    /// An OCI artifact in the WebAssembly layout (`kwop plugin push`): `registry/repo:tag` or
    /// `registry/repo@sha256:...`. A tag is resolved once and pinned in `status.source.pinned`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<String>,
    /// A key of a ConfigMap in the host's own namespace (binaryData), for small plugins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapSource>,
    /// A Secret of type kubernetes.io/dockerconfigjson in the host's own namespace, with the
    /// registry's credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret: Option<String>,
}

/// A ConfigMap key holding a component.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct ConfigMapSource {
    /// The ConfigMap's name (in the host's namespace).
    pub name: String,
    /// The key under `binaryData` (`kubectl create configmap --from-file` puts a .wasm there).
    pub key: String,
}

/// A kind, as in an object's `apiVersion` and `kind`.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KindRef {
    /// e.g. `apps/v1`, or `v1` for the core group. Grants match group and kind; any version.
    pub api_version: String,
    /// e.g. `Deployment`.
    pub kind: String,
}

/// A kind a plugin may write, and whether beyond its primaries' namespaces.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OwnedKindRef {
    /// The kind.
    #[serde(flatten)]
    pub kind: KindRef,
    /// Objects of this kind may be written (and read) in any namespace in `namespaces` (every
    /// namespace when unset), not only their primary's, or be cluster-scoped. The host tracks them by the
    /// labels `kwop.dev/owner-uid` and `kwop.dev/plugin` instead of owner references, and the
    /// plugin must finalize (delete them when their primary goes).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub across_namespaces: bool,
}

/// The authority a cluster admin grants a plugin. The host's own RBAC must also allow it: a grant
/// the host's service account lacks shows reason Forbidden in status.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Grants {
    /// The kind reconciled. One active plugin per primary kind per host.
    pub primary: KindRef,
    /// Kinds it may create, patch and delete (only objects that belong to its primary).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owns: Vec<OwnedKindRef>,
    /// Kinds it may only read through the cache.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reads: Vec<KindRef>,
    /// Namespaces it acts in. Unset: primaries in every namespace the host watches, each
    /// reconcile reading and writing only in its primary's own namespace (kinds owned
    /// `acrossNamespaces` are written anywhere). Set: only primaries in these namespaces are
    /// reconciled, reads may reach any of them, and writes stay in the primary's namespace
    /// (kinds owned `acrossNamespaces`: in any of these).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    /// The plugin may convert its primary's CRD between versions: a plugin whose `info()`
    /// declares `converts` gets the CRD's `spec.conversion` (a webhook to this host) written and
    /// kept. The host's RBAC must allow `get` and `patch` on that CustomResourceDefinition.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub conversion: bool,
}

/// Limits of one plugin.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct PluginLimits {
    /// Memory of one instance, e.g. `64Mi` (at most the host's `--plugin-memory-max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// Wall-clock budget of one call, e.g. `1s`, `500ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Concurrent reconciles (the host's `--workers` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
}

/// What the host reports.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct ReconcilerPluginStatus {
    /// The generation these conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready (the plugin runs and its caches are synced) and Degraded (something is wrong; the
    /// last good version, if any, keeps running). Reasons: Pulling, Loading, Running, Suspended,
    /// NotFound, DigestMismatch, Unauthorized, Unreachable, NotAComponent, TooLarge,
    /// InvalidReference, InvalidSpec, Invalid, Forbidden, Conflict, Renamed, Starting, Swapping
    /// (a new version loads while the previous one keeps serving: Ready stays True).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Ready's reason, and Degraded's when something is wrong beside it (`Running, Degraded:
    /// NotFound`): what `kubectl get rp` shows in its Reason column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The source as resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<ResolvedSource>,
    /// sha256 of the component (the `.wasm` layer) that runs (`sha256:<hex>`); the manifest
    /// digest an OCI reference is pinned to is `source.pinned`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_digest: Option<String>,
    /// What the running component's `info()` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<PluginIdentity>,
    /// The last error, if the newest source or version could not be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The shadow run of `spec.candidate`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<CandidateStatus>,
}

/// How a candidate compares with the active version, counted since it was loaded.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct CandidateStatus {
    /// `spec.candidate` as written.
    pub reference: String,
    /// sha256 of the candidate component (`sha256:<hex>`), once fetched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Its `info().version`, once loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Pulling, Running, or why it does not run (a fetch reason, Invalid, Forbidden, Mismatch).
    pub state: String,
    /// Details of `state`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Reconciles run by both versions.
    pub reconciled: u64,
    /// Of those, with the same outcome.
    pub identical: u64,
    /// With another outcome (applies, deletes, status, events or requeue).
    pub differing: u64,
    /// Where the candidate failed (trap, deadline, failure, rejected outcome) and the active did
    /// not.
    pub failing: u64,
    /// Reconciles not shadowed because the candidate was still busy (its concurrency is bounded).
    pub skipped: u64,
    /// The most recent differences, newest last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<CandidateDifference>,
}

/// One reconcile where the candidate's outcome differed.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct CandidateDifference {
    /// The primary, `namespace/name`.
    pub object: String,
    /// Field paths, as `kwop plugin test` prints them (`.apply.Deployment ns/name.metadata…`:
    /// expected what the active version returned, got the candidate's).
    pub paths: Vec<String>,
}

/// A source as resolved by the host.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedSource {
    /// `spec.source` as written (OCI reference, or `configmap/<name>/<key>`).
    pub reference: String,
    /// For OCI: the manifest digest the reference resolved to, as `repo@sha256:...`. The host
    /// pulls this digest again after a restart while the spec is unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<String>,
}

/// A plugin's self-description.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct PluginIdentity {
    /// `info().name` (also the field manager `kwop-<name>`).
    pub name: String,
    /// `info().version`.
    pub version: String,
    /// `info().primary`, as `group/version/Kind`.
    pub primary: String,
    /// The contract version it implements, e.g. `kwop:reconciler@0.2.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
    /// `info().finalizes`: the host keeps the finalizer `kwop.dev/<name>` on its primaries.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub finalizes: bool,
}

/// The CRD as YAML (what `crds/reconcilerplugin.yaml` holds).
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    use kube::CustomResourceExt;
    let head = "# Generated by `kwop crd` from host/src/vocab/crd.rs; do not edit by hand.\n";
    Ok(format!("{head}{}", serde_yaml::to_string(&ReconcilerPlugin::crd())?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_crd_file_matches_the_types() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../crds/reconcilerplugin.yaml");
        let want = super::crd_yaml().expect("serializable");
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(have == want, "crds/reconcilerplugin.yaml is stale: run `kwop crd > crds/reconcilerplugin.yaml`");
    }
}
