//! `kwop plugin rbac`: the Role/ClusterRole (and bindings to the host's service account) the host
//! needs for one plugin's grants — from a component's `info()`, a ReconcilerPlugin in a file, or
//! one on the cluster — as YAML to review and apply; with `--reconciler-plugin-skeleton`, a
//! ReconcilerPlugin granting what the component's `info()` asks for. The rules are
//! `vocab::rbac`'s (the Helm chart renders the same).

use super::{load, SandboxArgs};
use crate::vocab::crd::{self, ReconcilerPlugin};
use crate::vocab::grants::{Grants, Namespaces};
use crate::vocab::rbac::{self, Declares, Resources};
use crate::vocab::PluginInfo;
use anyhow::{anyhow, bail, Context};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// After `--help`: what the rules are and where they apply.
pub const HELP: &str = "\
The rules: get, list and watch on the primary and on every owned and read kind (cluster-wide: the \
host watches each kind in every namespace, or in `kwop run --namespace`, and the grants filter); \
patch on the primary's /status (and on the primary itself with --finalizes: its finalizer); \
create, patch and delete on the owned kinds — in a Role per namespace when the grants list \
namespaces, else in the ClusterRole; get on the primary's CustomResourceDefinition (by name) \
when the plugin validates (--validates). What every plugin needs (events, leases, ReconcilerPlugins, \
the webhook) is the install's own RBAC (deploy/base/rbac.yaml, the Helm chart).

Examples:
  kwop plugin rbac guest_foo.wasm --crd crds/foo.yaml | kubectl apply --server-side -f -
  kwop plugin rbac -f deploy/plugins/guest-foo.yaml --crd crds/foo.yaml
  kwop plugin rbac --reconciler-plugin guest-foo        # uses the current kubeconfig
  kwop plugin rbac guest_foo.wasm --reconciler-plugin-skeleton > guest-foo.yaml";

/// `kwop plugin rbac` arguments.
#[derive(Debug, clap::Args)]
pub struct RbacArgs {
    /// A plugin component: what its info() declares is what is granted (every namespace unless
    /// --namespaces).
    #[arg(conflicts_with_all = ["reconciler_plugin", "filename"])]
    pub file: Option<PathBuf>,
    /// A ReconcilerPlugin on the cluster (current kubeconfig): its spec.grants. Kinds are
    /// resolved by the API server's discovery.
    #[arg(long, value_name = "NAME", conflicts_with = "filename")]
    pub reconciler_plugin: Option<String>,
    /// A ReconcilerPlugin in a file (YAML or JSON, - for stdin): its spec.grants.
    #[arg(short = 'f', long, value_name = "FILE")]
    pub filename: Option<PathBuf>,
    /// Print a ReconcilerPlugin granting what FILE's info() asks for, instead of the RBAC.
    #[arg(long, requires = "file")]
    pub reconciler_plugin_skeleton: bool,
    /// With --reconciler-plugin-skeleton: the component's OCI reference [default: a key of the
    /// kwop-plugins ConfigMap named as FILE].
    #[arg(long, requires = "reconciler_plugin_skeleton")]
    pub oci: Option<String>,
    /// The host's service account the roles are bound to.
    #[arg(long, default_value = "kwop")]
    pub service_account: String,
    /// Its namespace.
    #[arg(long, default_value = "kwop-system")]
    pub service_account_namespace: String,
    /// Name of the roles and bindings [default: kwop-plugin-<plugin>].
    #[arg(long)]
    pub name: Option<String>,
    /// The plugin finalizes (the host patches its primary's finalizer). Read from info() for a
    /// FILE; say it for a ReconcilerPlugin.
    #[arg(long)]
    pub finalizes: bool,
    /// The plugin validates (admission of /scale reads its primary's CRD). Read from info() for
    /// a FILE; say it for a ReconcilerPlugin.
    #[arg(long)]
    pub validates: bool,
    /// With FILE: the namespaces granted (comma-separated) [default: all].
    #[arg(long, value_delimiter = ',')]
    pub namespaces: Vec<String>,
    /// CustomResourceDefinition files: the plural and scope of custom kinds (else guessed from
    /// the kind, namespaced, with a warning).
    #[arg(long = "crd", value_name = "FILE")]
    pub crds: Vec<PathBuf>,
    /// Sandbox limits (loading FILE).
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// Runs `kwop plugin rbac`.
pub fn run(a: RbacArgs) -> anyhow::Result<ExitCode> {
    let mut resources = Resources::builtin();
    resources.add_crds(&super::all_objects(&a.crds)?);
    let flags = Declares { finalizes: a.finalizes, validates: a.validates };
    let (plugin, grants, declares) = match (&a.file, &a.filename, &a.reconciler_plugin) {
        (Some(file), _, _) => {
            let p = load(file, &a.sandbox)?;
            if a.reconciler_plugin_skeleton {
                return skeleton(&p.info, file, a.oci.as_deref());
            }
            let mut g = Grants::from_info(&p.info);
            // What the component asks for: the conversion of its primary's CRD if it converts
            // (folder mode never converts; a ReconcilerPlugin granting it needs these rules).
            g.conversion = p.info.converts();
            if !a.namespaces.is_empty() {
                for n in &a.namespaces {
                    if !crate::vocab::is_dns_label(n) {
                        bail!("--namespaces: {n:?} is not a namespace name");
                    }
                }
                g.namespaces = Namespaces::Listed(a.namespaces.iter().cloned().collect());
            }
            let declares =
                Declares { finalizes: p.info.finalizes || a.finalizes, validates: p.info.validates || a.validates };
            (p.info.name.clone(), g, declares)
        }
        (None, Some(f), _) => {
            let o = super::first_object(f)?;
            let rp: ReconcilerPlugin = serde_json::from_value(o)
                .with_context(|| format!("{}: not a ReconcilerPlugin (kwop.dev/v1alpha1)", f.display()))?;
            from_rp(&rp, flags)?
        }
        (None, None, Some(name)) => {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let (rp, found) = rt.block_on(fetch(name))?;
            for (group, kind, plural, namespaced) in found {
                resources.add(&group, &kind, &plural, namespaced);
            }
            from_rp(&rp, flags)?
        }
        (None, None, None) => bail!("give FILE.wasm, -f RECONCILERPLUGIN.yaml or --reconciler-plugin NAME"),
    };
    let computed = rbac::plugin_rbac(&grants, declares, &resources);
    for g in &computed.guessed {
        let r = resources.get(g);
        eprintln!("kwop: {g}: resource assumed to be {:?}, namespaced (give its CRD with --crd to be sure)", r.plural);
    }
    let name = a.name.clone().unwrap_or_else(|| format!("kwop-plugin-{plugin}"));
    let objects = rbac::objects(&computed, &name, &plugin, &a.service_account, &a.service_account_namespace);
    print_yaml(&objects)?;
    Ok(ExitCode::SUCCESS)
}

fn from_rp(rp: &ReconcilerPlugin, declares: Declares) -> anyhow::Result<(String, Grants, Declares)> {
    let name = rp.metadata.name.clone().ok_or_else(|| anyhow!("the ReconcilerPlugin has no metadata.name"))?;
    let g = Grants::from_spec(&rp.spec.grants).map_err(|e| anyhow!("ReconcilerPlugin {name}: {e}"))?;
    Ok((name, g, declares))
}

type Found = Vec<(String, String, String, bool)>;

/// A ReconcilerPlugin from the cluster, and its kinds' resources as discovery says.
async fn fetch(name: &str) -> anyhow::Result<(ReconcilerPlugin, Found)> {
    let client = kube::Client::try_default().await.context("cannot reach the cluster (kubeconfig)")?;
    let rp = kube::Api::<ReconcilerPlugin>::all(client.clone())
        .get(name)
        .await
        .with_context(|| format!("cannot read ReconcilerPlugin {name}"))?;
    let g = Grants::from_spec(&rp.spec.grants).map_err(|e| anyhow!("ReconcilerPlugin {name}: {e}"))?;
    let mut found = Vec::new();
    for k in std::iter::once(&g.primary).chain(&g.owns).chain(&g.reads) {
        let (r, caps) = kube::discovery::pinned_kind(&client, &k.to_kube())
            .await
            .with_context(|| format!("the API server does not serve {k}"))?;
        found.push((k.group.clone(), k.kind.clone(), r.plural, caps.scope == kube::discovery::Scope::Namespaced));
    }
    Ok((rp, found))
}

/// A ReconcilerPlugin granting exactly what `info` asks for.
fn skeleton(info: &PluginInfo, file: &std::path::Path, oci: Option<&str>) -> anyhow::Result<ExitCode> {
    let kind = |g: &crate::vocab::Gvk| crd::KindRef { api_version: g.api_version(), kind: g.kind.clone() };
    let source = match oci {
        Some(r) => crd::PluginSource { oci: Some(r.to_string()), ..Default::default() },
        None => {
            let key = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let config_map = Some(crd::ConfigMapSource { name: "kwop-plugins".into(), key });
            crd::PluginSource { config_map, ..Default::default() }
        }
    };
    let grants = crd::Grants {
        primary: kind(&info.primary),
        owns: info
            .owns
            .iter()
            .map(|g| crd::OwnedKindRef { kind: kind(g), across_namespaces: info.owns_across(g) })
            .collect(),
        reads: info.reads.iter().map(kind).collect(),
        namespaces: None,
        conversion: info.converts(),
    };
    let spec =
        crd::ReconcilerPluginSpec { source, grants, limits: None, suspend: false, candidate: None, admission: None };
    let rp = ReconcilerPlugin::new(&info.name, spec);
    let mut v = serde_json::to_value(&rp)?;
    if let Some(m) = v["metadata"].as_object_mut() {
        m.retain(|k, _| k == "name");
    }
    print_yaml(&[v])?;
    Ok(ExitCode::SUCCESS)
}

fn print_yaml(objects: &[serde_json::Value]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    for (i, o) in objects.iter().enumerate() {
        if i > 0 {
            writeln!(out, "---")?;
        }
        out.write_all(serde_yaml::to_string(o)?.as_bytes())?;
    }
    Ok(())
}
