//! A real OpenTelemetry collector for tests: `otelcol-kwop` (built by `scripts/tools` from the
//! collector's Go modules: the OTLP receiver and the contrib file exporter) receiving OTLP over gRPC
//! and HTTP on free loopback ports and writing every trace export as one OTLP-JSON line to a file,
//! which [`Collector::spans`] reads back.
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! let otel = kwop_tests::otel::Collector::start()?;
//! // point the code under test at otel.grpc_endpoint() (OTEL_EXPORTER_OTLP_ENDPOINT) or
//! // otel.http_endpoint(), then:
//! let spans = otel.wait_for_spans(std::time::Duration::from_secs(10), |s| s.iter().any(|s| s.name == "reconcile"))?;
//! # Ok(()) }
//! ```
//!
//! The file exporter flushes every 100 ms; the collector is stopped when the value is dropped.

use crate::procs::{free_port, Proc};
use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A running collector.
pub struct Collector {
    proc: Proc,
    grpc_port: u16,
    http_port: u16,
    /// Its folder (config, spans file, log).
    pub dir: PathBuf,
    /// The OTLP-JSON lines file the file exporter writes.
    pub spans_file: PathBuf,
    /// Its log.
    pub log: PathBuf,
}

/// One span as read back from the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// Hex trace id (32 characters).
    pub trace_id: String,
    /// Hex span id (16 characters).
    pub span_id: String,
    /// Hex parent span id; `None` for a root span.
    pub parent_span_id: Option<String>,
    /// Span name.
    pub name: String,
    /// OTLP span kind (1 internal, 2 server, 3 client, 4 producer, 5 consumer; 0 unspecified).
    pub kind: i64,
    /// The resource's `service.name`, if set.
    pub service_name: Option<String>,
    /// Span attributes, each as its OTLP `AnyValue` turned into plain JSON (string, number, bool,
    /// array; int64 values arrive as JSON strings in OTLP JSON and are kept so).
    pub attributes: BTreeMap<String, Value>,
    /// Status code (0 unset, 1 ok, 2 error).
    pub status_code: i64,
}

impl Collector {
    /// Starts the collector and waits until both OTLP ports accept connections.
    pub fn start() -> Result<Collector> {
        let bin = crate::tools::path("otelcol-kwop")?;
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join("kwop-test").join(format!("{}-otel-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let (grpc_port, http_port) = (free_port()?, free_port()?);
        let spans_file = dir.join("spans.jsonl");
        let config = dir.join("config.yaml");
        std::fs::write(
            &config,
            format!(
                r#"receivers:
  otlp:
    protocols:
      grpc: {{ endpoint: "127.0.0.1:{grpc_port}" }}
      http: {{ endpoint: "127.0.0.1:{http_port}" }}
exporters:
  file:
    path: "{}"
    flush_interval: 100ms
  debug:
    verbosity: basic
service:
  telemetry:
    metrics: {{ level: none }}
    logs: {{ level: info }}
  pipelines:
    traces: {{ receivers: [otlp], exporters: [file, debug] }}
"#,
                spans_file.display()
            ),
        )?;
        let log = dir.join("otelcol.log");
        let args = [format!("--config=file:{}", config.display())];
        let mut proc = Proc::spawn("otelcol-kwop", &bin, &args, &log, &[])?;
        let start = Instant::now();
        loop {
            if !proc.running() {
                bail!("otelcol-kwop exited early ({}):\n{}", log.display(), proc.tail(20));
            }
            let up = |p| std::net::TcpStream::connect(("127.0.0.1", p)).is_ok();
            if up(grpc_port) && up(http_port) {
                break;
            }
            if start.elapsed() > Duration::from_secs(30) {
                bail!("otelcol-kwop not listening after 30s ({}):\n{}", log.display(), proc.tail(20));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Collector { proc, grpc_port, http_port, dir, spans_file, log })
    }

    /// `http://127.0.0.1:PORT` of the OTLP/gRPC receiver (for `OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub fn grpc_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// `http://127.0.0.1:PORT` of the OTLP/HTTP receiver (traces go to `{this}/v1/traces`).
    pub fn http_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// Every span written so far (a line cut short by a flush in progress is skipped).
    pub fn spans(&self) -> Result<Vec<Span>> {
        let text = match std::fs::read_to_string(&self.spans_file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", self.spans_file.display())),
        };
        let mut spans = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(doc) = serde_json::from_str::<Value>(line) else { continue };
            spans.extend(parse_export(&doc)?);
        }
        Ok(spans)
    }

    /// Waits until `done(spans)` holds, then returns the spans.
    pub fn wait_for_spans(&self, timeout: Duration, done: impl Fn(&[Span]) -> bool) -> Result<Vec<Span>> {
        let start = Instant::now();
        loop {
            let spans = self.spans()?;
            if done(&spans) {
                return Ok(spans);
            }
            if start.elapsed() > timeout {
                bail!(
                    "spans not as expected after {timeout:?}; got {} span(s): {:?} (collector log: {})",
                    spans.len(),
                    spans.iter().map(|s| &s.name).collect::<Vec<_>>(),
                    self.log.display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the process still runs.
    pub fn running(&mut self) -> bool {
        self.proc.running()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.proc.stop(Duration::from_secs(5));
        if std::env::var_os("KWOP_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The spans of one OTLP-JSON `ExportTraceServiceRequest` (`{"resourceSpans":[...]}`).
pub fn parse_export(doc: &Value) -> Result<Vec<Span>> {
    let mut out = Vec::new();
    let arr = |v: &Value, k: &str| v.get(k).and_then(Value::as_array).cloned().unwrap_or_default();
    for rs in arr(doc, "resourceSpans") {
        let resource = rs.get("resource").map(|r| attributes(&arr(r, "attributes"))).unwrap_or_default();
        let service_name = resource.get("service.name").and_then(Value::as_str).map(Into::into);
        for ss in arr(&rs, "scopeSpans") {
            for s in arr(&ss, "spans") {
                let text = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
                let trace_id = text("traceId");
                let span_id = text("spanId");
                if trace_id.is_empty() || span_id.is_empty() {
                    bail!("span without traceId/spanId: {s}");
                }
                let parent = text("parentSpanId");
                out.push(Span {
                    trace_id,
                    span_id,
                    parent_span_id: (!parent.is_empty()).then_some(parent),
                    name: text("name"),
                    kind: s.get("kind").and_then(Value::as_i64).unwrap_or(0),
                    service_name: service_name.clone(),
                    attributes: attributes(&arr(&s, "attributes")),
                    status_code: s.pointer("/status/code").and_then(Value::as_i64).unwrap_or(0),
                });
            }
        }
    }
    Ok(out)
}

/// OTLP `KeyValue` list → `key -> plain JSON`.
fn attributes(kvs: &[Value]) -> BTreeMap<String, Value> {
    kvs.iter()
        .filter_map(|kv| {
            let key = kv.get("key")?.as_str()?.to_string();
            Some((key, any_value(kv.get("value")?)))
        })
        .collect()
}

/// OTLP `AnyValue` (`{"stringValue": "x"}`, `{"intValue": "3"}`, `{"arrayValue": {"values": [...]}}`, ...)
/// → plain JSON.
fn any_value(v: &Value) -> Value {
    let Some((kind, inner)) = v.as_object().and_then(|o| o.iter().next()) else { return Value::Null };
    match kind.as_str() {
        "arrayValue" => Value::Array(
            inner
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(any_value).collect())
                .unwrap_or_default(),
        ),
        "kvlistValue" => Value::Object(
            attributes(inner.get("values").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default())
                .into_iter()
                .collect(),
        ),
        _ => inner.clone(),
    }
}

/// Whether `spans` form one trace whose parent links all resolve inside it (the root excepted).
pub fn is_connected_trace(spans: &[Span]) -> Result<()> {
    let ids: std::collections::BTreeSet<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    let traces: std::collections::BTreeSet<&str> = spans.iter().map(|s| s.trace_id.as_str()).collect();
    if traces.len() != 1 {
        bail!("spans belong to {} traces: {traces:?}", traces.len());
    }
    let roots = spans.iter().filter(|s| s.parent_span_id.is_none()).count();
    if roots != 1 {
        bail!("{roots} root spans (want 1)");
    }
    for s in spans {
        if let Some(p) = &s.parent_span_id {
            if !ids.contains(p.as_str()) {
                return Err(anyhow!("span {} ({}) has parent {p}, not in the trace", s.span_id, s.name));
            }
        }
    }
    Ok(())
}
