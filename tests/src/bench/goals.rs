//! The goals of issue 17 as one table: each goal's target, the figure before the work (from the
//! run named in [`BEFORE_RUN`], or measured in this run when the old behaviour is still a flag),
//! this run's figure, and whether it is met.

use super::report::{bytes_per_object, convergence_medians, ratio};
use super::stats::percentile;
use super::{Driver, Results};
use std::fmt::Write;

/// The full run the "before" figures come from (BENCHMARKS.md as of 2026-12-02).
pub const BEFORE_RUN: &str = "the second full run, 2026-12-02 14:33 UTC, git 9aea859";

/// Figures of [`BEFORE_RUN`] (copied from its generated tables).
const BEFORE_STEADY_CPU_RATIO: f64 = 11.74 / 1.66;
const BEFORE_BYTES_RATIO: f64 = 7185.0 / 4921.0;
const BEFORE_HOTSWAP_P99_MS: f64 = 163.0;
const BEFORE_FRESH_RATIO: f64 = 6.57;
const BEFORE_GUEST_BYTES: f64 = 0.46e6;
const BEFORE_CONV_RATIO: f64 = 1.46;

struct Row {
    goal: &'static str,
    target: &'static str,
    before: String,
    after: String,
    met: bool,
}

fn x(v: f64) -> String {
    ratio(v, 1.0)
}

/// The goals section (empty when the run measured none of them).
pub fn markdown(r: &Results) -> String {
    let mut rows = Vec::new();
    let steady = |d: Driver| r.steady.iter().find(|s| s.driver == d);
    if let (Some(k), Some(sc)) = (steady(Driver::Kwop), steady(Driver::SampleController)) {
        let after = k.cpu_s / sc.cpu_s.max(1e-9);
        let before = match steady(Driver::KwopNoMemo) {
            Some(b) => format!("{} (`--memoize=false`, this run)", x(b.cpu_s / sc.cpu_s.max(1e-9))),
            None => x(BEFORE_STEADY_CPU_RATIO),
        };
        rows.push(Row {
            goal: "steady-state CPU, kwop / sample-controller, same window, zero writes",
            target: "≤ 0.2×",
            before,
            after: format!("{} ({} writes)", x(after), k.total),
            met: after <= 0.2 && k.total == 0.0,
        });
    }
    if r.memory.iter().any(|m| m.driver == Driver::Kwop)
        && r.memory.iter().any(|m| m.driver == Driver::SampleController)
    {
        let after = bytes_per_object(r, Driver::Kwop) / bytes_per_object(r, Driver::SampleController);
        rows.push(Row {
            goal: "bytes per cached object, kwop / sample-controller",
            target: "≤ 0.7×",
            before: x(BEFORE_BYTES_RATIO),
            after: x(after),
            met: after <= 0.7,
        });
    }
    if let Some(w) = r.many.as_ref().and_then(|m| m.deployment_watches.map(|w| (w, m.plugins))) {
        rows.push(Row {
            goal: "copies of the Deployments held by plugins that all own Deployments (watches at the API server)",
            target: "1",
            before: format!("{} (one per plugin)", w.1),
            after: format!("{} for {} plugins", w.0, w.1),
            met: w.0 == 1.0,
        });
    }
    if let Some(h) = &r.hotswap {
        let p99 = percentile(&h.warm_s, 99.0) * 1e3;
        rows.push(Row {
            goal: "warm hot swap, file rename → first write by the new version, p99",
            target: "≤ 30 ms",
            before: format!("{BEFORE_HOTSWAP_P99_MS:.0} ms"),
            after: format!("{p99:.0} ms"),
            met: p99 <= 30.0,
        });
        if !h.rp_warm_s.is_empty() {
            let p99 = percentile(&h.rp_warm_s, 99.0) * 1e3;
            rows.push(Row {
                goal: "ReconcilerPlugin swap, spec.source edit → first write by the new version, p99 (measured, no target)",
                target: "measured",
                before: "not measured".into(),
                after: format!("{p99:.0} ms (p50 {:.0} ms)", super::stats::median(&h.rp_warm_s) * 1e3),
                met: true,
            });
        }
    }
    if let Some(c) = &r.calls {
        let get = |id: &str| c.rows.iter().find(|(l, _)| l == id).map(|(_, v)| *v);
        let label = |id: &str| super::report::CALL_IDS.iter().find(|(i, _)| *i == id).map(|(_, l)| *l).unwrap_or("");
        if let (Some(fresh), Some(native)) = (get(label("rust_wasm_fresh")), get(label("rust_native"))) {
            let after = fresh / native;
            rows.push(Row {
                goal: "guest-foo (Rust) fresh pooled instance / native call",
                target: "≤ 3×",
                before: x(BEFORE_FRESH_RATIO),
                after: x(after),
                met: after <= 3.0,
            });
        }
        if let Some(b) = c.guest_bytes {
            rows.push(Row {
                goal: "guest-foo (Rust) component size",
                target: "near 100 KB",
                before: format!("{:.0} KB", BEFORE_GUEST_BYTES / 1e3),
                after: format!("{:.0} KB", b as f64 / 1e3),
                met: b as f64 <= 150e3,
            });
        }
    }
    let med = convergence_medians(r);
    if let Some(n) = med.keys().filter(|(d, _)| *d == Driver::Kwop).map(|(_, n)| *n).max() {
        if let (Some(k), Some(f)) = (med.get(&(Driver::Kwop, n)), med.get(&(Driver::FloorSsa, n))) {
            let after = k.0 / f.0;
            rows.push(Row {
                goal: if n == 2000 {
                    "convergence, kwop / write floor with kwop's writes, N = 2000"
                } else {
                    "convergence, kwop / write floor with kwop's writes, largest N of this run"
                },
                target: "≤ 1.2×",
                before: x(BEFORE_CONV_RATIO),
                after: x(after),
                met: after <= 1.2,
            });
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    let mut o = String::new();
    let _ = writeln!(
        o,
        "### Goals of issue 17\n\nBefore: {BEFORE_RUN} unless the row says otherwise; after: this run. Ratios are of figures measured side by side in the same run.\n"
    );
    let _ = writeln!(o, "| goal | target | before | after | |\n|---|---:|---:|---:|---|");
    for row in rows {
        let verdict = if row.met { "**met**" } else { "**not met**" };
        let _ = writeln!(o, "| {} | {} | {} | {} | {verdict} |", row.goal, row.target, row.before, row.after);
    }
    let _ = writeln!(o);
    o
}
