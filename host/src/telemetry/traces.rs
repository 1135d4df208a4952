//! OpenTelemetry traces: one trace per reconcile, admission call and plugin load, exported over
//! OTLP/HTTP (protobuf) when `--otlp-endpoint` or the standard `OTEL_EXPORTER_OTLP_ENDPOINT` /
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set; nothing is exported (and no span is made for
//! tracing alone) otherwise.
//!
//! The spans are `tracing` spans bridged by `tracing-opentelemetry`; the bridge sees only kwop's
//! own spans (target `kwop…`, DEBUG and above) and INFO+ log lines inside them (as span events),
//! whatever `KWOP_LOG` says. A reconcile's trace id is put on its log lines (`trace_id` field)
//! and on the Warning events it writes (annotation [`TRACE_ANNOTATION`]).
//!
//! gRPC export is not built in (it would add a second HTTP/2 stack, tonic); collectors accept
//! OTLP/HTTP on 4318.

use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use std::time::SystemTime;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The annotation carrying the trace id on the events kwop writes.
pub const TRACE_ANNOTATION: &str = "kwop.dev/trace-id";

/// Why traces could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TracesError {
    /// The sampling ratio is not in 0..=1.
    #[error("--otlp-sampling must be between 0 and 1, got {0}")]
    Sampling(f64),
    /// The exporter refused its configuration (e.g. an endpoint that is not a URL).
    #[error("cannot export traces to {endpoint}: {source}")]
    Exporter {
        /// The endpoint, as given or from the environment.
        endpoint: String,
        /// Why.
        source: opentelemetry_otlp::ExporterBuildError,
    },
}

/// The trace pipeline; flushes and stops the exporter when dropped.
pub struct Traces {
    provider: SdkTracerProvider,
    /// Where they go.
    pub endpoint: String,
}

/// Where traces go: the flag, else the standard environment variables; `None` when neither is
/// set (traces off).
pub fn endpoint(flag: Option<&str>) -> Option<String> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    flag.filter(|f| !f.trim().is_empty())
        .map(|f| {
            let f = f.trim_end_matches('/');
            if f.ends_with("/v1/traces") {
                f.to_string()
            } else {
                format!("{f}/v1/traces")
            }
        })
        .or_else(|| env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT").map(|e| format!("{}/v1/traces", e.trim_end_matches('/'))))
}

impl Traces {
    /// Exports to `endpoint` (a full `…/v1/traces` URL), keeping `sampling` of the traces (by
    /// trace id; a child follows its parent). Installs the global tracer provider too (spans
    /// made with the OpenTelemetry API, e.g. a backdated queue wait).
    pub fn start(endpoint: &str, sampling: f64, instance: &str) -> Result<Traces, TracesError> {
        if !(0.0..=1.0).contains(&sampling) || sampling.is_nan() {
            return Err(TracesError::Sampling(sampling));
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(endpoint)
            .build()
            .map_err(|source| TracesError::Exporter { endpoint: endpoint.to_string(), source })?;
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name("kwop")
            .with_attributes([
                KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
                KeyValue::new("service.instance.id", instance.to_string()),
            ])
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(sampling))))
            .with_resource(resource)
            .build();
        opentelemetry::global::set_tracer_provider(provider.clone());
        Ok(Traces { provider, endpoint: endpoint.to_string() })
    }

    /// The `tracing` layer that turns kwop's spans into OpenTelemetry spans.
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        use tracing_subscriber::Layer;
        let tracer = self.provider.tracer("kwop");
        tracing_opentelemetry::layer().with_tracer(tracer).with_filter(tracing_subscriber::filter::filter_fn(|m| {
            let ours = m.target().starts_with("kwop");
            if m.is_span() {
                ours && *m.level() <= tracing::Level::DEBUG
            } else {
                ours && *m.level() <= tracing::Level::INFO
            }
        }))
    }
}

impl Drop for Traces {
    fn drop(&mut self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("kwop: traces not all exported at exit: {e}");
        }
    }
}

/// The trace id of `span` (32 hex digits) when it is exported (traces on and sampled).
pub fn trace_id(span: &tracing::Span) -> Option<String> {
    if span.is_disabled() {
        return None;
    }
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    (sc.is_valid() && sc.is_sampled()).then(|| sc.trace_id().to_string())
}

/// The trace id of the current span, if exported.
pub fn current_trace_id() -> Option<String> {
    trace_id(&tracing::Span::current())
}

/// Records a child span of `parent` that started earlier (e.g. the time a key waited in the
/// queue before this reconcile began). Nothing when traces are off.
pub fn backdated_child(parent: &tracing::Span, name: &'static str, start: SystemTime, attributes: Vec<KeyValue>) {
    if parent.is_disabled() {
        return;
    }
    let cx = parent.context();
    if !cx.span().span_context().is_sampled() {
        return;
    }
    let tracer = opentelemetry::global::tracer("kwop");
    let mut span =
        tracer.span_builder(name).with_start_time(start).with_attributes(attributes).start_with_context(&tracer, &cx);
    opentelemetry::trace::Span::end_with_timestamp(&mut span, SystemTime::now());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_is_a_base_url_and_wins_over_the_environment() {
        assert_eq!(endpoint(Some("http://c:4318")).as_deref(), Some("http://c:4318/v1/traces"));
        assert_eq!(endpoint(Some("http://c:4318/v1/traces/")).as_deref(), Some("http://c:4318/v1/traces"));
        assert_eq!(endpoint(Some("  ")), endpoint(None));
    }

    #[test]
    fn a_sampling_ratio_outside_0_to_1_is_refused_with_the_flag_named() {
        let e = Traces::start("http://127.0.0.1:1/v1/traces", 1.5, "t").err().map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some("--otlp-sampling must be between 0 and 1, got 1.5"));
    }
}
