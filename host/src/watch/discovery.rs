//! Resolving a GVK to its API resource (plural, scope) through discovery.

use crate::vocab::Gvk;
use kube::core::ApiResource;
use kube::discovery::Scope;
use kube::Client;

/// A kind the API server serves.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The kind.
    pub gvk: Gvk,
    /// Its resource (plural name etc.).
    pub resource: ApiResource,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
}

/// Failure to find a kind.
#[derive(Debug, thiserror::Error)]
#[error("the API server does not serve {gvk} (is its CRD installed?): {source}")]
pub struct DiscoveryError {
    gvk: Gvk,
    #[source]
    source: kube::Error,
}

impl DiscoveryError {
    /// A kind that discovery did not return.
    pub fn missing(gvk: &Gvk) -> Self {
        DiscoveryError {
            gvk: gvk.clone(),
            source: kube::Error::Discovery(kube::error::DiscoveryError::MissingKind(gvk.kind.clone())),
        }
    }
}

/// Looks a kind up on the API server.
pub async fn resolve(client: &Client, gvk: &Gvk) -> Result<Resolved, DiscoveryError> {
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk.to_kube())
        .await
        .map_err(|source| DiscoveryError { gvk: gvk.clone(), source })?;
    Ok(Resolved { gvk: gvk.clone(), resource, namespaced: caps.scope == Scope::Namespaced })
}
