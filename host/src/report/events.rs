//! Writing `events.k8s.io/v1` Events, as kube-runtime's `Recorder` does (a repeat within six
//! minutes counts on the first event's `series` instead of creating another), with two
//! differences that are why it is not used here: an event whose note changed is a new event
//! (the Recorder folds it into the old series, so `kubectl describe` showed the old message), and
//! an event can carry the trace id of the reconcile that wrote it (annotation
//! `kwop.dev/trace-id`), so an event leads to its trace.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Reporter};
use kube::Client;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a repeat counts on the first event (kube-runtime's and client-go's value).
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// Series remembered at most (the oldest are forgotten first).
const MAX_SERIES: usize = 10_000;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    warning: bool,
    reason: String,
    note: Option<String>,
    action: String,
    regarding: (Option<String>, Option<String>, Option<String>, Option<String>),
}

struct Series {
    name: String,
    namespace: String,
    count: i32,
    last: Instant,
}

/// Publishes events as one reporting controller.
pub struct Publisher {
    client: Client,
    reporter: Reporter,
    series: Mutex<HashMap<Key, Series>>,
}

impl Publisher {
    /// A publisher reporting as `reporter`.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Publisher { client, reporter, series: Mutex::new(HashMap::new()) }
    }

    /// Writes `ev` about `reference`: a new Event, or the next count of the same event (same
    /// type, reason, note and object) written within six minutes.
    pub async fn publish(
        &self,
        ev: &Event,
        reference: &ObjectReference,
        annotations: &[(&str, &str)],
    ) -> Result<(), kube::Error> {
        let key = Key {
            warning: matches!(ev.type_, EventType::Warning),
            reason: ev.reason.clone(),
            note: ev.note.clone(),
            action: ev.action.clone(),
            regarding: (
                reference.kind.clone(),
                reference.namespace.clone(),
                reference.name.clone(),
                reference.uid.clone(),
            ),
        };
        let repeat = {
            let mut s = self.series.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            s.retain(|_, v| now.duration_since(v.last) < SERIES_WINDOW);
            s.get_mut(&key).map(|v| {
                v.count += 1;
                v.last = now;
                (v.name.clone(), v.namespace.clone(), v.count)
            })
        };
        if let Some((name, namespace, count)) = repeat {
            let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
            let patch = serde_json::json!({
                "series": EventSeries { count, last_observed_time: MicroTime(Timestamp::now()) }
            });
            match api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => return Ok(()),
                // Expired or deleted meanwhile: a new event.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let event = self.event(ev, reference, annotations);
        let namespace = event.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
        let created = api.create(&PostParams::default(), &event).await?;
        let mut s = self.series.lock().unwrap_or_else(|p| p.into_inner());
        if s.len() >= MAX_SERIES {
            if let Some(oldest) = s.iter().min_by_key(|(_, v)| v.last).map(|(k, _)| k.clone()) {
                s.remove(&oldest);
            }
        }
        let name = created.metadata.name.unwrap_or_default();
        s.insert(key, Series { name, namespace, count: 1, last: Instant::now() });
        Ok(())
    }

    fn event(&self, ev: &Event, reference: &ObjectReference, annotations: &[(&str, &str)]) -> K8sEvent {
        let now = Timestamp::now();
        let annotations: BTreeMap<String, String> =
            annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        K8sEvent {
            action: Some(ev.action.clone()),
            reason: Some(ev.reason.clone()),
            event_time: Some(MicroTime(now)),
            regarding: Some(reference.clone()),
            note: ev.note.clone(),
            metadata: ObjectMeta {
                // Cluster-scoped objects' events go to "default", as client-go does.
                namespace: Some(reference.namespace.clone().unwrap_or_else(|| "default".into())),
                name: Some(format!(
                    "{}.{:x}",
                    reference.name.as_deref().unwrap_or(&self.reporter.controller),
                    now.as_nanosecond()
                )),
                annotations: (!annotations.is_empty()).then_some(annotations),
                ..Default::default()
            },
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter.instance.clone().unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            type_: Some(match ev.type_ {
                EventType::Normal => "Normal".into(),
                EventType::Warning => "Warning".into(),
            }),
            related: ev.secondary.clone(),
            ..Default::default()
        }
    }
}
