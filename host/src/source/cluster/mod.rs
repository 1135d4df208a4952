//! The ReconcilerPlugin source (`kwop run --reconciler-plugins`): watches ReconcilerPlugin
//! objects, fetches each one's component (OCI registry or ConfigMap), offers them to the
//! supervisor as catalogs, and writes each one's status from what the supervisor reports.
//!
//! Nothing is lost on bad input: a spec that does not parse keeps the last valid grants and
//! limits, a source that cannot be fetched keeps the last good component, and both say why in
//! the status (Degraded) while the fetch is retried with backoff. A tag is pinned to its digest
//! in `status.source.pinned`, and a restarted host pulls that digest while the spec is unchanged.

pub mod fetch;
pub mod status;
mod writer;

use super::oci::OciConfig;
use super::report::{Report, State};
use super::{CandidateSource, Catalog, Command, Entry, LimitOverride};
use crate::leader::Leadership;
use crate::shadow::stats::Registry;
use crate::telemetry::Health;
use crate::vocab::crd::{ReconcilerPlugin, ReconcilerPluginStatus};
use crate::vocab::grants::Grants;
use fetch::{FetchError, Fetched};
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, ResourceExt};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Where the source looks.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// The host's own namespace: ConfigMap sources and pull Secrets are read there only.
    pub namespace: String,
    /// Registries.
    pub oci: OciConfig,
    /// Only ReconcilerPlugins with these labels.
    pub selector: Option<String>,
}

/// The supervisor's key for a ReconcilerPlugin.
pub fn key_of(name: &str) -> String {
    format!("reconcilerplugin/{name}")
}

/// A ReconcilerPlugin's candidate is fetched as a plugin of its own under this name (`#` is not
/// allowed in object names, so it never collides with one).
fn candidate_of(name: &str) -> String {
    format!("{name}{CANDIDATE}")
}

const CANDIDATE: &str = "#candidate";

fn is_candidate(name: &str) -> bool {
    name.ends_with(CANDIDATE)
}

/// ConfigMap sources are read again this often (a changed key hot-swaps the plugin).
const CONFIGMAP_POLL: Duration = Duration::from_secs(10);
/// First retry of a failed fetch; doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// The first catalog waits at most this long for the first fetches.
const INITIAL_WAIT: Duration = Duration::from_secs(90);

#[derive(Default)]
struct Plugin {
    obj: Option<Arc<ReconcilerPlugin>>,
    key: Option<String>,
    /// The last valid grants and limits.
    valid: Option<(Arc<Grants>, LimitOverride)>,
    invalid: Option<String>,
    fetched: Option<Fetched>,
    fetching: Option<(String, AbortHandle)>,
    fetch_error: Option<FetchError>,
    retry_at: Option<Instant>,
    /// The digest fetched for `key` instead of its tag (after a restart).
    pin: Option<String>,
    backoff: Duration,
    last_fetch: Option<Instant>,
    report: Option<Report>,
    written: Option<ReconcilerPluginStatus>,
}

/// Reads `spec.grants` and `spec.limits`.
fn parse_spec(rp: &ReconcilerPlugin) -> Result<(Arc<Grants>, LimitOverride), String> {
    let grants = Grants::from_spec(&rp.spec.grants)?;
    let mut limits = LimitOverride::default();
    if let Some(l) = &rp.spec.limits {
        if let Some(m) = &l.memory {
            limits.memory = Some(crate::vocab::units::bytes(m).map_err(|e| format!("spec.limits.memory: {e}"))?);
        }
        if let Some(t) = &l.timeout {
            limits.timeout = Some(crate::vocab::units::duration(t).map_err(|e| format!("spec.limits.timeout: {e}"))?);
        }
        if let Some(c) = l.concurrency {
            if c == 0 || c > 64 {
                return Err(format!("spec.limits.concurrency {c} is not within 1..=64"));
            }
            limits.concurrency = Some(c as usize);
        }
    }
    Ok((Arc::new(grants), limits))
}

type Done = (String, String, Result<Fetched, FetchError>);

/// The source's task.
pub struct ClusterSource {
    client: Client,
    cfg: ClusterConfig,
    leadership: Arc<Leadership>,
    health: Arc<Health>,
    candidates: Arc<Registry>,
    plugins: BTreeMap<String, Plugin>,
    done: (mpsc::UnboundedSender<Done>, mpsc::UnboundedReceiver<Done>),
    events: crate::report::events::Publisher,
}

impl ClusterSource {
    /// A source reading with `client` (the host's gated client: status is written only while
    /// leading).
    pub fn new(
        client: Client,
        cfg: ClusterConfig,
        leadership: Arc<Leadership>,
        health: Arc<Health>,
        candidates: Arc<Registry>,
    ) -> Self {
        let (plugins, done) = (BTreeMap::new(), mpsc::unbounded_channel());
        let reporter = kube::runtime::events::Reporter { controller: "kwop".into(), instance: None };
        let events = crate::report::events::Publisher::new(client.clone(), reporter);
        ClusterSource { client, cfg, leadership, health, candidates, plugins, done, events }
    }

    /// Runs until `stop`: feeds `sup` with catalogs, takes the supervisor's `reports`.
    pub async fn run(
        mut self,
        sup: mpsc::Sender<Command>,
        mut reports: mpsc::UnboundedReceiver<Report>,
        stop: CancellationToken,
    ) {
        let api: Api<ReconcilerPlugin> = Api::all(self.client.clone());
        let mut wc = watcher::Config::default();
        if let Some(sel) = &self.cfg.selector {
            wc = wc.labels(sel);
        }
        let stream = watcher(api, wc).default_backoff();
        let mut stream = std::pin::pin!(stream);
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let started = Instant::now();
        let (mut listed, mut sent_first, mut dirty) = (false, false, false);
        let mut init: BTreeMap<String, Arc<ReconcilerPlugin>> = BTreeMap::new();
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                ev = stream.next() => match ev {
                    Some(Ok(watcher::Event::Apply(o))) => { self.on_apply(Arc::new(o)); dirty = true; }
                    Some(Ok(watcher::Event::Delete(o))) => { self.on_delete(&o.name_any()); dirty = true; }
                    Some(Ok(watcher::Event::Init)) => init.clear(),
                    Some(Ok(watcher::Event::InitApply(o))) => { init.insert(o.name_any(), Arc::new(o)); }
                    Some(Ok(watcher::Event::InitDone)) => {
                        let gone: Vec<String> = self.plugins.keys().filter(|n| !init.contains_key(*n)).cloned().collect();
                        gone.iter().for_each(|n| self.on_delete(n));
                        std::mem::take(&mut init).into_values().for_each(|o| self.on_apply(o));
                        listed = true;
                        dirty = true;
                    }
                    Some(Err(e)) => tracing::warn!("watching ReconcilerPlugins: {e}"),
                    None => break,
                },
                Some(d) = self.done.1.recv() => { let (name, key, r): Done = d; self.on_fetched(&name, &key, r); dirty = true; }
                Some(r) = reports.recv() => self.on_report(r),
                _ = tick.tick() => {
                    self.retry_due();
                    self.write_statuses().await;
                }
            }
            let fetching = self.plugins.values().any(|p| p.fetching.is_some() && p.fetched.is_none());
            let first_ready = listed && (!fetching || started.elapsed() > INITIAL_WAIT);
            if dirty && (sent_first || first_ready) {
                dirty = false;
                sent_first = true;
                if sup.send(Command::Catalog(self.catalog())).await.is_err() {
                    break;
                }
            }
        }
    }

    fn on_apply(&mut self, rp: Arc<ReconcilerPlugin>) {
        let name = rp.name_any();
        // The candidate is fetched like a plugin of its own, with the same grants and limits.
        match &rp.spec.candidate {
            Some(c) => {
                let mut shadow = (*rp).clone();
                shadow.spec.source = c.clone();
                shadow.spec.candidate = None;
                shadow.status = None;
                self.apply_one(candidate_of(&name), Arc::new(shadow));
            }
            None => {
                self.forget(&candidate_of(&name));
            }
        }
        self.apply_one(name, rp);
    }

    fn apply_one(&mut self, name: String, rp: Arc<ReconcilerPlugin>) {
        let p = self.plugins.entry(name.clone()).or_default();
        let key = fetch::source_key(&rp.spec.source);
        let spec = parse_spec(&rp);
        p.invalid = match (&key, &spec) {
            (Err(e), _) | (_, Err(e)) => Some(e.clone()),
            _ => None,
        };
        if let Ok(v) = spec {
            p.valid = Some(v);
        }
        if let Some(m) = &p.invalid {
            tracing::error!(reconcilerplugin = %name, "invalid spec (the last valid one stays in force): {m}");
        }
        p.obj = Some(rp.clone());
        let Ok(key) = key else { return };
        if p.key.as_deref() != Some(key.as_str()) {
            p.key = Some(key.clone());
            p.pin = None;
            p.fetch_error = None;
            p.backoff = FIRST_BACKOFF;
            p.retry_at = None;
        }
        let have = p.fetched.as_ref().is_some_and(|f| f.key == key);
        let under_way = p.fetching.as_ref().is_some_and(|(k, _)| *k == key);
        if !have && !under_way {
            // After a restart, run what ran: the digest the status pinned for this same source
            // (checked: `fetch::pinned_of`), retried as pinned until the spec moves on.
            if p.fetched.is_none() {
                p.pin = fetch::pinned_of(&self.client, &rp, &key);
            }
            self.start_fetch(&name);
        }
    }

    fn on_delete(&mut self, name: &str) {
        self.forget(&candidate_of(name));
        if self.forget(name) {
            tracing::info!(reconcilerplugin = %name, "ReconcilerPlugin deleted; its controller stops, nothing is deleted in the cluster");
        }
    }

    fn forget(&mut self, name: &str) -> bool {
        let Some(p) = self.plugins.remove(name) else { return false };
        if let Some((_, h)) = p.fetching {
            h.abort();
        }
        true
    }

    fn start_fetch(&mut self, name: &str) {
        let Some(p) = self.plugins.get_mut(name) else { return };
        let pinned = p.pin.clone();
        let (Some(rp), Some(key)) = (p.obj.clone(), p.key.clone()) else { return };
        if let Some((_, h)) = p.fetching.take() {
            h.abort();
        }
        let (client, cfg, tx, n, k) =
            (self.client.clone(), self.cfg.clone(), self.done.0.clone(), name.to_string(), key.clone());
        // A ConfigMap source is read again every CONFIGMAP_POLL: only the first read is news.
        if p.fetched.as_ref().is_some_and(|f| f.key == key) {
            tracing::debug!(reconcilerplugin = %name, source = %fetch::reference_of(&key), "reading the plugin's source again");
        } else {
            tracing::info!(reconcilerplugin = %name, source = %fetch::reference_of(&key), pinned = ?pinned, "fetching plugin");
        }
        let task = tokio::spawn(async move {
            let r = fetch::traced(&n, &k, &client, &cfg.namespace, &cfg.oci, &rp.spec.source, pinned.as_deref()).await;
            let _ = tx.send((n, k, r));
        });
        p.fetching = Some((key, task.abort_handle()));
        p.last_fetch = Some(Instant::now());
        p.retry_at = None;
    }

    fn on_fetched(&mut self, name: &str, key: &str, r: Result<Fetched, FetchError>) {
        let Some(p) = self.plugins.get_mut(name) else { return };
        if p.key.as_deref() != Some(key) {
            return; // the spec moved on meanwhile
        }
        p.fetching = None;
        match r {
            Ok(f) => {
                if p.fetched.as_ref().is_none_or(|old| old.sha256 != f.sha256) {
                    tracing::info!(reconcilerplugin = %name, sha256 = %f.sha256, pinned = ?f.pinned, "plugin fetched");
                }
                p.fetched = Some(f);
                p.fetch_error = None;
                p.backoff = FIRST_BACKOFF;
            }
            Err(e) => {
                let kept = p.fetched.as_ref().map(|f| f.sha256.as_str()).unwrap_or("none");
                tracing::error!(reconcilerplugin = %name, reason = e.reason, kept_sha256 = kept,
                    retry_in = ?p.backoff, "cannot fetch the plugin: {}", e.message);
                let cap = if e.retry { MAX_BACKOFF } else { MAX_BACKOFF * 5 };
                p.retry_at = Some(Instant::now() + p.backoff);
                p.backoff = (p.backoff * 2).min(cap);
                p.fetch_error = Some(e);
            }
        }
    }

    fn retry_due(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self
            .plugins
            .iter()
            .filter(|(_, p)| p.fetching.is_none() && p.key.is_some())
            .filter(|(_, p)| {
                let retry = p.retry_at.is_some_and(|t| t <= now);
                let poll = p.key.as_deref().is_some_and(|k| k.starts_with("configmap:"))
                    && p.fetch_error.is_none()
                    && p.last_fetch.is_none_or(|t| now.duration_since(t) >= CONFIGMAP_POLL);
                retry || poll
            })
            .map(|(n, _)| n.clone())
            .collect();
        due.iter().for_each(|n| self.start_fetch(n));
    }

    fn on_report(&mut self, r: Report) {
        let Some(name) = r.key.strip_prefix("reconcilerplugin/") else { return };
        if let Some(p) = self.plugins.get_mut(name) {
            p.report = if r.state == State::Removed { None } else { Some(r) };
        }
    }

    fn catalog(&self) -> Catalog {
        let mut entries = BTreeMap::new();
        for (name, p) in self.plugins.iter().filter(|(n, _)| !is_candidate(n)) {
            let (Some(rp), Some(f), Some((grants, limits))) = (&p.obj, &p.fetched, &p.valid) else { continue };
            let candidate = match (&rp.spec.candidate, self.plugins.get(&candidate_of(name))) {
                (Some(_), Some(c)) => c.fetched.as_ref().map(|f| CandidateSource {
                    origin: fetch::reference_of(&f.key).into(),
                    sha256: f.sha256.clone(),
                    bytes: f.bytes.clone(),
                }),
                _ => None,
            };
            let created = rp.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()).unwrap_or_default();
            let key = key_of(name);
            entries.insert(
                key.clone(),
                Entry {
                    key,
                    origin: fetch::reference_of(&f.key).into(),
                    sha256: f.sha256.clone(),
                    bytes: f.bytes.clone(),
                    grants: Some(grants.clone()),
                    limits: limits.clone(),
                    suspend: rp.spec.suspend,
                    rank: format!("{created}/{name}"),
                    candidate,
                    failure_policy: rp.spec.admission.as_ref().and_then(|a| a.failure_policy),
                },
            );
        }
        Catalog { entries, errors: Vec::new() }
    }
}
