//! The writes of one reconcile: each applied, deleted or status write sent and counted, and what
//! a refused one means for the queue (a Warning event, a retry, or both).

use super::noting;
use super::reconcile::{warning, Fenced, Next};
use super::Inner;
use crate::apply::{compare, Applier, Belonging, Write};
use crate::outcome::{self, Outcome};
use crate::plugin::LoadedPlugin;
use crate::report::REASON_WRITE_FAILED;
use crate::telemetry::Metrics;
use crate::vocab::tracking::Owner;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::DynamicObject;
use tracing::Instrument;

/// One write sent: what it was and the API server's answer.
pub(super) struct Sent {
    kind: String,
    verb: &'static str,
    /// For messages: `apply Deployment "web"`.
    what: String,
    object: crate::telemetry::flight::Obj,
    /// Nothing was there before (a create).
    created: bool,
    /// The fields it changed.
    why: Option<String>,
    r: Result<Write, kube::Error>,
}

/// One write of an outcome, in the order they are sent: intents, deletions, then the status (as
/// sample-controller: status last). Namespaces and observed objects come from the fence.
pub(super) enum Op<'a> {
    Apply(&'a outcome::Intent, Option<&'a str>, Option<&'a DynamicObject>),
    Delete(&'a outcome::ObjRef, Option<&'a str>, Option<&'a DynamicObject>),
    Status(&'a serde_json::Value),
}

impl Inner {
    /// Sends a fenced outcome's writes in order: intents, then deletions, then the status (as
    /// sample-controller: status last). Whether anything was written, or what comes next when a
    /// write failed (the rest are not sent).
    pub(super) async fn write_all(
        &self,
        primary: &DynamicObject,
        plugin: &LoadedPlugin,
        owner: &Owner<'_>,
        outcome: &Outcome,
        f: &Fenced,
    ) -> Result<bool, Next> {
        let reference = OwnerReference {
            api_version: self.primary.resolved.resource.api_version.clone(),
            kind: self.primary.resolved.resource.kind.clone(),
            name: owner.name.to_string(),
            uid: owner.uid.to_string(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let applies = outcome.apply.iter().zip(&f.apply_ns).zip(&f.observed_apply);
        let deletes = outcome.delete.iter().zip(&f.delete_ns).zip(&f.observed_delete);
        let ops = applies
            .map(|((i, ns), o)| Op::Apply(i, ns.as_deref(), o.as_ref()))
            .chain(deletes.map(|((d, ns), o)| Op::Delete(d, ns.as_deref(), o.as_ref())))
            .chain(outcome.status.iter().map(Op::Status));
        let mut wrote = false;
        for op in ops {
            let belonging = match &op {
                Op::Apply(i, ..) if plugin.info.owns_across(&i.gvk) => Belonging::Labels(owner),
                _ => Belonging::Reference(&reference),
            };
            let span = tracing::debug_span!(
                "write",
                verb = tracing::field::Empty,
                kind = tracing::field::Empty,
                namespace = tracing::field::Empty,
                name = tracing::field::Empty,
                result = tracing::field::Empty,
                code = tracing::field::Empty
            );
            let Some(sent) = self.write(op, primary, &belonging).instrument(span.clone()).await else {
                continue;
            };
            let result = match (&sent.r, sent.verb) {
                (Ok(Write::Written), "delete") => "deleted",
                (Ok(Write::Written), _) if sent.created => "created",
                (Ok(Write::Written), _) => "updated",
                (Ok(Write::Skipped), _) => "unchanged",
                (Err(_), _) => "failed",
            };
            span.record("verb", sent.verb)
                .record("kind", sent.object.kind.as_str())
                .record("name", sent.object.name.as_str());
            span.record("namespace", sent.object.namespace.as_deref().unwrap_or("")).record("result", result);
            let why = match &sent.r {
                Err(kube::Error::Api(st)) => {
                    span.record("code", st.code);
                    Some(st.message.clone())
                }
                Err(e) => Some(e.to_string()),
                Ok(_) => sent.why,
            };
            noting::write(sent.verb, sent.object, result, why);
            wrote |= self.count_write(primary, &plugin.info.name, &sent.kind, sent.verb, || sent.what, sent.r).await?;
        }
        Ok(wrote)
    }

    /// Sends one write of an outcome: its kind, verb, description and result (`None` for a kind
    /// the controller does not watch, which the fence has already refused).
    pub(super) async fn write(&self, op: Op<'_>, primary: &DynamicObject, owner: &Belonging<'_>) -> Option<Sent> {
        Some(match op {
            Op::Apply(intent, ns, observed) => {
                let kind = self.caches.kind(&intent.gvk)?;
                let desired = Applier::desired(intent, ns, owner);
                let r = self.applier.apply(&kind.resolved, ns, &intent.name, &desired, observed).await;
                // What the write changed, for `kwop explain` (only when something was sent).
                let why = match (&r, observed) {
                    (Ok(Write::Written), Some(o)) => {
                        let fields = compare::uncovered(&serde_json::to_value(o).unwrap_or_default(), &desired, 5);
                        (!fields.is_empty()).then(|| format!("{} differed from the plugin's intent", fields.join(", ")))
                    }
                    _ => None,
                };
                Sent {
                    kind: intent.gvk.kind.clone(),
                    verb: "apply",
                    what: format!("apply {} {:?}", intent.gvk.kind, intent.name),
                    object: noting::obj(&intent.gvk.kind, ns, &intent.name),
                    created: observed.is_none(),
                    why,
                    r,
                }
            }
            Op::Delete(d, ns, observed) => {
                let kind = self.caches.kind(&d.gvk)?;
                let r = self.applier.delete(&kind.resolved, ns, &d.name, observed).await;
                Sent {
                    kind: d.gvk.kind.clone(),
                    verb: "delete",
                    what: format!("delete {} {:?}", d.gvk.kind, d.name),
                    object: noting::obj(&d.gvk.kind, ns, &d.name),
                    created: false,
                    why: None,
                    r,
                }
            }
            Op::Status(status) => {
                let r = self.applier.status(&self.primary.resolved, primary, status).await;
                let kind = self.primary.resolved.gvk.kind.clone();
                let object = noting::obj(
                    &kind,
                    primary.metadata.namespace.as_deref(),
                    &primary.metadata.name.clone().unwrap_or_default(),
                );
                Sent { kind, verb: "status", what: "status".to_string(), object, created: false, why: None, r }
            }
        })
    }

    /// Counts one write (sent or skipped); a failed one is reported and decides what comes next.
    pub(super) async fn count_write(
        &self,
        primary: &DynamicObject,
        plugin: &str,
        kind: &str,
        op: &str,
        what: impl FnOnce() -> String,
        r: Result<Write, kube::Error>,
    ) -> Result<bool, Next> {
        let labels = Metrics::write(plugin, kind, op);
        match r {
            Ok(Write::Written) => {
                self.shared.metrics.writes.get_or_create(&labels).inc();
                Ok(true)
            }
            Ok(Write::Skipped) => {
                self.shared.metrics.writes_skipped.get_or_create(&labels).inc();
                Ok(false)
            }
            Err(e) => Err(self.write_failed(primary, plugin, &what(), e).await),
        }
    }

    pub(super) async fn write_failed(&self, primary: &DynamicObject, plugin: &str, what: &str, e: kube::Error) -> Next {
        let m = &self.shared.metrics;
        if crate::leader::gate::NotLeader::is(&e) {
            // Leadership is being lost: this controller is about to stop; nothing was sent.
            tracing::debug!("{what} not sent: {e}");
            m.result(plugin, "not_leader");
            return Next::Retry;
        }
        m.result(plugin, "write_error");
        noting::verdict(crate::telemetry::flight::Verdict::WriteFailed { message: format!("{what}: {e}") });
        let (label, message) = match &e {
            kube::Error::Api(s) => {
                (s.code.to_string(), format!("{what} refused by the API server ({}): {}", s.code, s.message))
            }
            other => ("transport".to_string(), format!("{what} failed: {other}")),
        };
        m.write_errors.get_or_create(&Metrics::reason(plugin, &label)).inc();
        let action = on_write_error(&e);
        match action {
            WriteErrorAction::RetryQuietly => tracing::info!("{message}; retrying with backoff"),
            WriteErrorAction::ReportAndWait | WriteErrorAction::ReportAndRetry => {
                tracing::warn!("{message}");
                self.report(primary, &[warning(REASON_WRITE_FAILED, message)], false).await;
            }
        }
        if action == WriteErrorAction::ReportAndWait {
            Next::Done
        } else {
            Next::Retry
        }
    }
}

/// What to do about a failed write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteErrorAction {
    /// Conflicts, throttling, server trouble, connection errors: retry with backoff, no event.
    RetryQuietly,
    /// The object is invalid (the plugin's doing) or the request malformed: a Warning event on the
    /// primary and no retry — the same intent would fail again; a change or a swap re-queues it.
    ReportAndWait,
    /// Forbidden and the rest: a Warning event, and retries with backoff (RBAC can be fixed).
    ReportAndRetry,
}

pub(crate) fn on_write_error(e: &kube::Error) -> WriteErrorAction {
    match e {
        // The object's fault (invalid, or a typing error even when it comes as a 500): the same
        // intent would fail again.
        kube::Error::Api(s) if crate::apply::names_object_fault(s.code, &s.message) => WriteErrorAction::ReportAndWait,
        kube::Error::Api(s) => match s.code {
            409 | 429 | 500..=599 => WriteErrorAction::RetryQuietly,
            404 => WriteErrorAction::ReportAndWait,
            _ => WriteErrorAction::ReportAndRetry,
        },
        _ => WriteErrorAction::RetryQuietly,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(kube::core::Status::failure("x", "y").with_code(code).boxed())
    }

    #[test]
    fn conflicts_throttling_and_outages_are_retried_quietly() {
        for code in [409, 429, 500, 503, 504] {
            assert_eq!(on_write_error(&api(code)), WriteErrorAction::RetryQuietly, "{code}");
        }
    }

    #[test]
    fn a_typing_error_is_reported_even_as_a_500() {
        let e = kube::Error::Api(
            kube::core::Status::failure("failed to create typed patch object (/v1, Kind=ConfigMap) c: .data.replicas: expected string, got &value.valueUnstructured{Value:1}", "InternalError")
                .with_code(500)
                .boxed(),
        );
        assert_eq!(on_write_error(&e), WriteErrorAction::ReportAndWait);
    }

    #[test]
    fn an_invalid_object_is_reported_and_not_retried() {
        for code in [400, 404, 422] {
            assert_eq!(on_write_error(&api(code)), WriteErrorAction::ReportAndWait, "{code}");
        }
        assert_eq!(on_write_error(&api(403)), WriteErrorAction::ReportAndRetry);
    }
}
