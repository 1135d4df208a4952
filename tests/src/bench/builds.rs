//! Measurement 8: the same kwop built differently (the glibc release build against the image's
//! static musl binary, or any other build), side by side: convergence and in-sync reconcile cost.

use super::report::{mib, ratio, secs};
use super::scenarios::{convergence_run, steady};
use super::stats::median;
use super::{Config, Driver};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::PathBuf;

/// One build of kwop to compare.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Build {
    /// Short label, e.g. "musl static (image)".
    pub label: String,
    /// Its binary.
    pub path: PathBuf,
}

/// `LABEL=PATH` → a [`Build`] (the binary must exist).
pub fn parse_build(arg: &str) -> Result<Build> {
    let (label, path) = arg.split_once('=').with_context(|| format!("--compare wants LABEL=PATH, got {arg:?}"))?;
    let path = PathBuf::from(path);
    if label.trim().is_empty() || !path.is_file() {
        bail!("--compare {arg:?}: need a label and an existing kwop binary");
    }
    Ok(Build { label: label.trim().to_string(), path })
}

/// What one build measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildRun {
    /// Which build.
    pub build: Build,
    /// Convergence of `n` Foos, one entry per repetition, seconds.
    pub conv_s: Vec<f64>,
    /// kwop's CPU during each convergence run, seconds.
    pub conv_cpu_s: Vec<f64>,
    /// kwop's peak RSS in each convergence run, bytes.
    pub conv_peak_rss: Vec<u64>,
    /// In-sync reconciles during the steady window.
    pub steady_reconciles: f64,
    /// kwop's CPU during the steady window, seconds.
    pub steady_cpu_s: f64,
    /// Writes during the steady window (0 expected).
    pub steady_writes: f64,
}

impl BuildRun {
    /// CPU per in-sync reconcile (the plugin call, the comparison, the queue), microseconds.
    pub fn us_per_reconcile(&self) -> f64 {
        if self.steady_reconciles > 0.0 {
            self.steady_cpu_s * 1e6 / self.steady_reconciles
        } else {
            f64::NAN
        }
    }
}

/// Every build's figures; the first build is the baseline of the ratios.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildsRun {
    /// Foos converged per run.
    pub n: usize,
    /// Foos in sync in the steady window.
    pub steady_n: usize,
    /// Steady window, seconds.
    pub window_s: f64,
    /// One entry per build.
    pub runs: Vec<BuildRun>,
}

fn with_binary(cfg: &Config, b: &Build) -> Config {
    Config { kwop: b.path.clone(), no_sample_controller: true, ..cfg.clone() }
}

/// Runs the comparison: `cfg.kwop` (labelled `base_label`) first, then `others`. Convergence runs
/// are interleaved build by build for each repetition, so a drift of the machine hits all alike;
/// then each build's steady window on a world of its own.
pub async fn compare(cfg: &Config, base_label: &str, others: &[Build]) -> Result<BuildsRun> {
    let n = cfg.conv_sizes.iter().copied().max().unwrap_or(100).min(1000);
    let mut builds = vec![Build { label: base_label.to_string(), path: cfg.kwop.clone() }];
    builds.extend(others.iter().cloned());
    let mut runs: Vec<BuildRun> = builds
        .iter()
        .map(|b| BuildRun {
            build: b.clone(),
            conv_s: vec![],
            conv_cpu_s: vec![],
            conv_peak_rss: vec![],
            steady_reconciles: 0.0,
            steady_cpu_s: 0.0,
            steady_writes: 0.0,
        })
        .collect();
    for rep in 0..cfg.reps.max(1) {
        for run in runs.iter_mut() {
            eprintln!("bench: builds: {} convergence N={n} rep {}", run.build.label, rep + 1);
            let c = convergence_run(&with_binary(cfg, &run.build), Driver::Kwop, n).await?;
            eprintln!(
                "  {:.2}s, CPU {:.2}s, peak RSS {} MiB",
                c.seconds,
                c.controller_cpu_s,
                mib(c.controller_peak_rss)
            );
            run.conv_s.push(c.seconds);
            run.conv_cpu_s.push(c.controller_cpu_s);
            run.conv_peak_rss.push(c.controller_peak_rss);
        }
    }
    for run in runs.iter_mut() {
        eprintln!("bench: builds: {} steady state", run.build.label);
        let s = steady(&with_binary(cfg, &run.build)).await?;
        let k = s.into_iter().find(|s| s.driver == Driver::Kwop).context("steady run without kwop")?;
        run.steady_reconciles = k.reconciles.unwrap_or(0.0);
        run.steady_cpu_s = k.cpu_s;
        run.steady_writes = k.total;
    }
    Ok(BuildsRun { n, steady_n: cfg.steady_n, window_s: cfg.steady_window_s as f64, runs })
}

/// The Markdown section of BENCHMARKS.md.
pub fn markdown(b: &BuildsRun) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "### 8. Builds of kwop side by side\n\nConvergence of {} Foos (median of {} runs each, interleaved) and \
         the steady state ({} Foos in sync, {:.0} s window), per build; ratios against the first row.\n",
        b.n,
        b.runs.first().map_or(0, |r| r.conv_s.len()),
        b.steady_n,
        b.window_s
    );
    let _ = writeln!(
        o,
        "| build | convergence | ratio | kwop CPU in it | ratio | peak RSS | ratio | CPU per in-sync reconcile | ratio | writes in sync |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let base = b.runs.first();
    let med = |v: &[f64]| median(v);
    let rss = |r: &BuildRun| med(&r.conv_peak_rss.iter().map(|&x| x as f64).collect::<Vec<_>>());
    for r in &b.runs {
        let (c, cpu, mem, us) = (med(&r.conv_s), med(&r.conv_cpu_s), rss(r), r.us_per_reconcile());
        let (bc, bcpu, bmem, bus) = base.map_or((f64::NAN, f64::NAN, f64::NAN, f64::NAN), |b| {
            (med(&b.conv_s), med(&b.conv_cpu_s), rss(b), b.us_per_reconcile())
        });
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} MiB | {} | {:.0} µs | {} | {:.0} |",
            r.build.label,
            secs(c),
            ratio(c, bc),
            secs(cpu),
            ratio(cpu, bcpu),
            mib(mem as u64),
            ratio(mem, bmem),
            us,
            ratio(us, bus),
            r.steady_writes
        );
    }
    let _ = writeln!(o);
    o
}
