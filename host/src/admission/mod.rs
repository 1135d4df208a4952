//! Admission: plugins that validate their primaries (`plugin-info.validates`), served to the API
//! server as a validating webhook — `admission.k8s.io/v1` AdmissionReviews over HTTPS, for CREATE
//! and UPDATE (of the object and of its `/scale`), answered by the plugin's `validate` in the same
//! sandbox, limits and hot swap as its reconciles.
//!
//! Parts: [`Registry`] holds the plugins that validate now (fed by the supervisor, on every
//! replica: each one serves admission, the Service spreads requests); [`server`] is the HTTPS
//! endpoint; [`decide`] turns a plugin's answer, or its failure under the failure policy, into a
//! response; [`scale`] turns a `/scale` request into the primary as it would be; [`certs`] owns
//! the serving certificate (a self-signed CA kept in a Secret, rotated, or a certificate someone
//! else — cert-manager — writes there); [`webhooks`] keeps the ValidatingWebhookConfiguration and
//! its `caBundle` current (the leader only). Conversion: `convert` serves `/convert/<plugin>`,
//! [`roundtrip`] checks what a plugin returns, and [`conversion`] keeps the granted CRDs'
//! `spec.conversion` (the leader only).
//!
//! Floor 10 of 0–15 (`docs/ARCHITECTURE.md`). May use: `leader`, `outcome`, `plugin`, `report`,
//! `shadow`, `telemetry`, `vocab`, `watch`. Used by: `cli`, `controller`, `hotswap`, `offline`.

pub mod certs;
pub mod conversion;
mod convert;
pub mod decide;
mod mutate;
pub mod mutation;
mod review;
pub mod roundtrip;
pub mod scale;
pub mod server;
mod validate;
pub mod webhooks;

use crate::plugin::LoadedPlugin;
use crate::vocab::FailurePolicy;
use crate::watch::{Caches, Pool, Resolved};
use arc_swap::ArcSwap;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How the API server reaches the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A Service in the cluster (`namespace/name`, its port 443): in-cluster installs.
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// An URL base (`https://host:port`): a host outside the cluster (development, tests).
    Url(String),
}

/// Where the serving certificate comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertSource {
    /// The host's own CA, kept in the Secret, rotated before expiry; the host sets `caBundle`.
    SelfSigned,
    /// Someone else writes the Secret (`tls.crt`, `tls.key`; cert-manager) and the `caBundle`
    /// (cert-manager's CA injector): the host only reads and reloads it.
    External,
}

/// `--webhook-*`.
#[derive(Debug, Clone)]
pub struct AdmissionConfig {
    /// Where to listen.
    pub bind: std::net::SocketAddr,
    /// How the API server reaches this host.
    pub endpoint: Endpoint,
    /// Default failure policy (a ReconcilerPlugin may set its own).
    pub failure_policy: FailurePolicy,
    /// The webhook's timeout (1–30 s); `validate` gets at most this minus a margin.
    pub timeout: Duration,
    /// Namespace of the Secret (the host's own).
    pub namespace: String,
    /// The Secret holding the serving certificate.
    pub secret: String,
    /// The ValidatingWebhookConfiguration the host keeps.
    pub configuration: String,
    /// Validity of a serving certificate (renewed at two thirds).
    pub cert_validity: Duration,
    /// Self-signed or external.
    pub certs: CertSource,
    /// The one namespace the host watches (`--namespace`): its webhooks are limited to it.
    pub only_namespace: Option<String>,
    /// CA certificates a caller's client certificate must chain to (`--webhook-client-ca`):
    /// a connection without one is refused in the TLS handshake. `None`: callers are not
    /// authenticated.
    pub client_ca: Option<Vec<rustls::pki_types::CertificateDer<'static>>>,
}

impl AdmissionConfig {
    /// What `validate` may take: the webhook's timeout less what the request needs besides.
    pub fn call_deadline(&self) -> Duration {
        self.timeout.saturating_sub(Duration::from_millis(500)).max(Duration::from_millis(100))
    }
}

/// Starts serving admission: the registry (fed by the supervisor through [`Registry::offer`]),
/// the certificate keeper, the webhook configuration keeper (acting while `leadership` allows
/// writes) and the HTTPS server, all until `stop`. Fails at once if the address is taken.
pub async fn start(
    config: AdmissionConfig,
    client: kube::Client,
    pool: Arc<Pool>,
    metrics: Arc<crate::telemetry::Metrics>,
    leadership: Arc<crate::leader::Leadership>,
    health: Arc<crate::telemetry::Health>,
    stop: tokio_util::sync::CancellationToken,
) -> anyhow::Result<Arc<Registry>> {
    // Taken now, or said now (the server binds again in its task).
    drop(
        tokio::net::TcpListener::bind(config.bind)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.bind))?,
    );
    certs::ensure_namespace(&client, &config.namespace).await?;
    let registry = Registry::new(config.clone(), pool, client.clone());
    let resolver = Arc::new(certs::Resolver::default());
    // Not ready without a certificate: the Service sends the API server's requests (conversions
    // above all, which no failure policy covers) to replicas that can answer.
    let r = resolver.clone();
    health.attach_webhook(Arc::new(move || {
        (!r.has_certificate()).then(|| "the webhook has no serving certificate yet".to_string())
    }));
    let (ca_tx, ca_rx) = tokio::sync::watch::channel(None);
    tokio::spawn(certs::run(config.clone(), client.clone(), resolver.clone(), leadership.clone(), ca_tx, stop.clone()));
    tokio::spawn(conversion::run(
        config.clone(),
        client.clone(),
        registry.clone(),
        ca_rx.clone(),
        leadership.clone(),
        stop.clone(),
    ));
    tokio::spawn(webhooks::run(config.clone(), client, registry.clone(), ca_rx, leadership, stop.clone()));
    tokio::spawn(registry.clone().follow(stop.clone()));
    let router = server::router(registry.clone(), metrics);
    tokio::spawn(async move {
        if let Err(e) =
            server::serve(
                config.bind,
                router,
                resolver,
                config.client_ca.clone(),
                async move { stop.cancelled().await },
            )
            .await
        {
            tracing::error!("admission webhook server: {e:#}");
        }
    });
    Ok(registry)
}

/// One plugin admission serves (it validates, mutates or converts), as admission sees it.
pub struct Validating {
    /// The file or `reconcilerplugin/<name>` it came from.
    pub key: String,
    /// The active version (a hot swap replaces it).
    pub plugin: Arc<LoadedPlugin>,
    /// Its primary kind, resolved (group, version, plural, scope).
    pub primary: Resolved,
    /// The caches it may read (held, not subscribed: admission is not woken by changes).
    pub caches: Arc<Caches>,
    /// Its failure policy.
    pub failure_policy: FailurePolicy,
    _holds: Vec<crate::watch::pool::Hold>,
}

/// What the supervisor offers: the plugins that validate now, with their failure policy.
#[derive(Clone)]
pub struct Offer {
    /// Key of the plugin (file or ReconcilerPlugin).
    pub key: String,
    /// The active version.
    pub plugin: Arc<LoadedPlugin>,
    /// Its failure policy (the host's default unless its ReconcilerPlugin sets one).
    pub failure_policy: Option<FailurePolicy>,
}

/// The plugins that validate, by plugin name (the path `/validate/<name>`).
pub struct Registry {
    config: AdmissionConfig,
    pool: Arc<Pool>,
    client: kube::Client,
    plugins: ArcSwap<BTreeMap<String, Arc<Validating>>>,
    changed: tokio::sync::watch::Sender<u64>,
    update: tokio::sync::Mutex<()>,
    offers: tokio::sync::watch::Sender<Vec<Offer>>,
    paths: scale::ReplicasPaths,
}

impl Registry {
    /// An empty registry.
    pub fn new(config: AdmissionConfig, pool: Arc<Pool>, client: kube::Client) -> Arc<Self> {
        let (changed, _) = tokio::sync::watch::channel(0);
        let (offers, _) = tokio::sync::watch::channel(Vec::new());
        Arc::new(Registry {
            config,
            pool,
            client,
            plugins: ArcSwap::from_pointee(BTreeMap::new()),
            changed,
            update: tokio::sync::Mutex::new(()),
            offers,
            paths: scale::ReplicasPaths::default(),
        })
    }

    /// Offers the plugins that validate now (the supervisor, after every change): the latest
    /// offer is taken up by [`Registry::follow`], in order.
    pub fn offer(&self, offers: Vec<Offer>) {
        self.offers.send_replace(offers);
    }

    /// Takes up offers until `stop`.
    pub async fn follow(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let mut rx = self.offers.subscribe();
        loop {
            let latest = rx.borrow_and_update().clone();
            self.set(latest).await;
            tokio::select! {
                _ = stop.cancelled() => return,
                r = rx.changed() => if r.is_err() { return },
            }
        }
    }

    /// The settings.
    pub fn config(&self) -> &AdmissionConfig {
        &self.config
    }

    /// The host's client (a scale request reads the stored primary and its CRD with it).
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Where each primary's `/scale` keeps its replicas.
    pub fn replicas_paths(&self) -> &scale::ReplicasPaths {
        &self.paths
    }

    /// The plugin answering `/validate/<name>`.
    pub fn get(&self, name: &str) -> Option<Arc<Validating>> {
        self.plugins.load().get(name).cloned()
    }

    /// Every plugin that validates now.
    pub fn all(&self) -> Arc<BTreeMap<String, Arc<Validating>>> {
        self.plugins.load_full()
    }

    /// Told whenever the set of plugins (or one's version or policy) changes.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Replaces the set with `offers` (only plugins that validate, mutate or convert are kept). A new
    /// version of a plugin with the same kinds keeps its caches; new kinds are resolved and held
    /// first, so a request never meets a plugin without its caches. Kinds that cannot be resolved
    /// leave that plugin out (logged) until the next offer.
    pub async fn set(&self, offers: Vec<Offer>) {
        let _one = self.update.lock().await;
        let old = self.plugins.load_full();
        let mut next = BTreeMap::new();
        let served = |i: &crate::vocab::PluginInfo| i.validates || i.mutates() || i.converts();
        for o in offers.into_iter().filter(|o| served(&o.plugin.info)) {
            let name = o.plugin.info.name.clone();
            let policy = o.failure_policy.unwrap_or(self.config.failure_policy);
            let same = old.get(&name).filter(|v| v.plugin.info.same_kinds(&o.plugin.info));
            let entry = match same {
                Some(v) if Arc::ptr_eq(&v.plugin, &o.plugin) && v.failure_policy == policy => v.clone(),
                Some(v) => Arc::new(Validating {
                    key: o.key,
                    plugin: o.plugin,
                    primary: v.primary.clone(),
                    caches: v.caches.clone(),
                    failure_policy: policy,
                    _holds: v._holds.clone(),
                }),
                None => match self.resolve(&o.key, o.plugin, policy).await {
                    Ok(v) => Arc::new(v),
                    Err(e) => {
                        tracing::warn!(plugin = %name, "cannot serve admission for it yet: {e}");
                        continue;
                    }
                },
            };
            next.insert(name, entry);
        }
        let differs =
            next.len() != old.len() || next.iter().any(|(k, v)| old.get(k).is_none_or(|o| !Arc::ptr_eq(o, v)));
        if differs {
            let names: Vec<&String> = next.keys().collect();
            tracing::info!(plugins = ?names, "admission: plugins served (validate, mutate, convert)");
            self.plugins.store(Arc::new(next));
            self.changed.send_modify(|n| *n += 1);
        }
    }

    async fn resolve(&self, key: &str, plugin: Arc<LoadedPlugin>, policy: FailurePolicy) -> anyhow::Result<Validating> {
        let mut caches = Caches::default();
        let mut holds = Vec::new();
        let mut primary = None;
        for gvk in plugin.info.readable() {
            let r = crate::watch::resolve(&self.client, gvk).await?;
            if *gvk == plugin.info.primary {
                primary = Some(r.clone());
            }
            let h = self.pool.hold(r);
            caches.insert(h.cache.clone());
            holds.push(h);
        }
        let primary = primary.ok_or_else(|| anyhow::anyhow!("the primary kind did not resolve"))?;
        Ok(Validating {
            key: key.to_string(),
            plugin,
            primary,
            caches: Arc::new(caches),
            failure_policy: policy,
            _holds: holds,
        })
    }
}
