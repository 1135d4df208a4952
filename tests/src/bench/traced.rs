//! Measurement 10: what exporting OpenTelemetry traces costs kwop (issue 37). The same
//! convergence (N Foos created at once, a fresh plane each run, kwop with and without
//! `--otlp-endpoint` interleaved) and the same steady state (N Foos in sync, memoized, one resync
//! period) with traces off and on, exported over OTLP/HTTP to a real collector (`otelcol-kwop`,
//! file exporter) on the same machine. Off is what every other figure measures: no endpoint, no
//! exporter, no span made for traces alone.

use super::report::{ratio, secs};
use super::scenarios::{build_world, convergence_with, say, start_plane, steady_kwop};
use super::{Config, ConvergenceRun, Driver, SteadyRun};
use crate::otel::Collector;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::time::Duration;

/// Traces off against on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TracedRun {
    /// Foos created at once.
    pub n: usize,
    /// Convergence runs without traces.
    pub conv_off: Vec<ConvergenceRun>,
    /// Convergence runs exporting every trace.
    pub conv_on: Vec<ConvergenceRun>,
    /// Steady state without traces.
    pub steady_off: SteadyRun,
    /// Steady state exporting every trace.
    pub steady_on: SteadyRun,
    /// Bytes the collector's file exporter wrote (OTLP JSON), so "on" is seen to export.
    pub exported_bytes: u64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Runs the measurement: convergence at the largest configured size up to 1 000, `reps` times
/// each way, then the steady state of `steady_n` Foos, both ways on one world.
pub async fn traced(cfg: &Config) -> Result<TracedRun> {
    let otel = Collector::start()?;
    let on = vec![format!("--otlp-endpoint={}", otel.http_endpoint()), "--otlp-sampling=1".to_string()];
    let n = cfg.conv_sizes.iter().copied().filter(|&n| n <= 1000).max().unwrap_or(100);
    let (mut conv_off, mut conv_on) = (Vec::new(), Vec::new());
    for rep in 0..cfg.reps.max(1) {
        for traced in [false, true] {
            say(format!("traces: convergence N={n} rep {}, traces {}", rep + 1, if traced { "on" } else { "off" }));
            let r = convergence_with(cfg, Driver::Kwop, n, if traced { &on } else { &[] }).await?;
            say(format!("  {:.2}s, kwop CPU {:.2}s", r.seconds, r.controller_cpu_s));
            if traced { &mut conv_on } else { &mut conv_off }.push(r);
        }
    }
    let plane = start_plane()?;
    let ns = plane.namespace("traced")?;
    say(format!("traces: building {} Foos in sync", cfg.steady_n));
    build_world(cfg, &plane, &ns, 0..cfg.steady_n).await?;
    let window = Duration::from_secs(cfg.steady_window_s);
    let steady_off = steady_kwop(cfg, &plane, cfg.steady_n, window, true, &[]).await?;
    let steady_on = steady_kwop(cfg, &plane, cfg.steady_n, window, true, &on).await?;
    let exported_bytes = std::fs::metadata(&otel.spans_file).map(|m| m.len()).unwrap_or(0);
    if exported_bytes == 0 {
        bail!("traces on, yet the collector received nothing (log: {})", otel.log.display());
    }
    Ok(TracedRun { n, conv_off, conv_on, steady_off, steady_on, exported_bytes })
}

/// Figure 10.
pub fn markdown(t: &TracedRun) -> String {
    let mut o = String::new();
    let conv = |v: &[ConvergenceRun], f: fn(&ConvergenceRun) -> f64| median(v.iter().map(f).collect());
    let (s_off, s_on) = (conv(&t.conv_off, |r| r.seconds), conv(&t.conv_on, |r| r.seconds));
    let (c_off, c_on) = (conv(&t.conv_off, |r| r.controller_cpu_s), conv(&t.conv_on, |r| r.controller_cpu_s));
    let (m_off, m_on) =
        (conv(&t.conv_off, |r| r.controller_peak_rss as f64), conv(&t.conv_on, |r| r.controller_peak_rss as f64));
    let _ = writeln!(
        o,
        "### 10. Traces exported (OTLP/HTTP to a local collector) against none\n\n\
         kwop with `--otlp-endpoint` (every trace kept) and without, the same runs interleaved; the collector on \
         the same machine wrote {:.1} MiB of spans. Medians of {} runs each.\n",
        t.exported_bytes as f64 / (1 << 20) as f64,
        t.conv_off.len().min(t.conv_on.len())
    );
    let _ = writeln!(o, "| | traces off | traces on | on / off |\n|---|---|---|---|");
    let _ = writeln!(o, "| convergence of {} Foos | {} | {} | {} |", t.n, secs(s_off), secs(s_on), ratio(s_on, s_off));
    let _ = writeln!(o, "| kwop CPU during it | {} | {} | {} |", secs(c_off), secs(c_on), ratio(c_on, c_off));
    let _ = writeln!(
        o,
        "| kwop peak RSS during it | {:.1} MiB | {:.1} MiB | {} |",
        m_off / (1 << 20) as f64,
        m_on / (1 << 20) as f64,
        ratio(m_on, m_off)
    );
    let (a, b) = (&t.steady_off, &t.steady_on);
    let _ = writeln!(
        o,
        "| steady state: kwop CPU for {} Foos in sync, {} window, resync {} | {} | {} | {} |",
        a.n,
        secs(a.window_s),
        secs(a.resync_s),
        secs(a.cpu_s),
        secs(b.cpu_s),
        ratio(b.cpu_s, a.cpu_s)
    );
    let _ = writeln!(o, "| steady state: writes | {} | {} | |", a.total, b.total);
    let _ = writeln!(o);
    o
}
