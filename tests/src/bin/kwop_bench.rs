//! `kwop-bench`: runs the benchmarks of issue 9 and writes the results (run it through
//! `scripts/bench`, which builds everything in release mode and runs criterion first).
//!
//! ```text
//! kwop-bench [--quick | --smoke] [--only conv,steady,memory,many,hotswap,builds,shards,tracing,admission] [--kwop PATH]
//!            [--compare LABEL=PATH]...
//!            [--no-sample-controller] [--conv-sizes 100,1000] [--mem-sizes 1000,10000] [--reps N]
//!            [--criterion DIR] [--out DIR] [--write-md BENCHMARKS.md] [--merge results.json]
//!            [--report-only results.json]
//! ```

use anyhow::{bail, Context, Result};
use kwop_tests::bench::{self, report, scenarios, Config, Results};
use std::path::PathBuf;

struct Args {
    scale: String,
    no_sc: bool,
    conv_sizes: Option<Vec<usize>>,
    mem_sizes: Option<Vec<usize>>,
    reps: Option<usize>,
    only: Vec<String>,
    kwop: Option<PathBuf>,
    compare: Vec<bench::builds::Build>,
    criterion: Option<PathBuf>,
    out: PathBuf,
    write_md: Option<PathBuf>,
    merge: Option<PathBuf>,
    report_only: Option<PathBuf>,
}

fn usage() -> &'static str {
    "usage: kwop-bench [--quick | --smoke] [--only conv,steady,memory,many,hotswap,builds,shards,tracing,admission] [--kwop PATH]\n\
     \x20                 [--compare LABEL=PATH]... (builds: other kwop binaries against --kwop)\n\
     \x20                 [--no-sample-controller] [--conv-sizes 100,1000] [--mem-sizes 1000,10000] [--reps N]\n\
     \x20                 [--criterion DIR] [--out DIR] [--write-md BENCHMARKS.md] [--merge results.json]\n\
     \x20                 [--report-only results.json]"
}

/// `100,1000` → [100, 1000].
fn sizes(list: &str) -> Result<Vec<usize>> {
    list.split(',').map(|n| n.trim().parse().with_context(|| format!("not a size: {n:?}"))).collect()
}

fn parse() -> Result<Args> {
    let mut a = Args {
        scale: "full".into(),
        no_sc: false,
        conv_sizes: None,
        mem_sizes: None,
        reps: None,
        only: vec![],
        kwop: None,
        compare: vec![],
        criterion: None,
        out: kwop_tests::repo_root().join("target/bench"),
        write_md: None,
        merge: None,
        report_only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = |name: &str| it.next().with_context(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--quick" => a.scale = "quick".into(),
            "--smoke" => a.scale = "smoke".into(),
            "--full" => a.scale = "full".into(),
            "--no-sample-controller" => a.no_sc = true,
            "--conv-sizes" => a.conv_sizes = Some(sizes(&val("--conv-sizes")?)?),
            "--mem-sizes" => a.mem_sizes = Some(sizes(&val("--mem-sizes")?)?),
            "--reps" => a.reps = Some(val("--reps")?.parse()?),
            "--only" => a.only = val("--only")?.split(',').map(str::to_string).collect(),
            "--kwop" => a.kwop = Some(val("--kwop")?.into()),
            "--compare" => a.compare.push(bench::builds::parse_build(&val("--compare")?)?),
            "--criterion" => a.criterion = Some(val("--criterion")?.into()),
            "--out" => a.out = val("--out")?.into(),
            "--write-md" => a.write_md = Some(val("--write-md")?.into()),
            "--merge" => a.merge = Some(val("--merge")?.into()),
            "--report-only" => a.report_only = Some(val("--report-only")?.into()),
            "-h" | "--help" => {
                println!("{}", usage());
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n{}", usage()),
        }
    }
    Ok(a)
}

fn git_revision() -> String {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(kwop_tests::repo_root())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let rev = run(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = run(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    format!("{rev}{}", if dirty { " + uncommitted changes" } else { "" })
}

fn utc_now() -> String {
    let out = std::process::Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"]).output();
    out.ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default()
}

fn write_outputs(a: &Args, r: &Results) -> Result<()> {
    std::fs::create_dir_all(&a.out)?;
    std::fs::write(a.out.join("results.json"), serde_json::to_string_pretty(r)?)?;
    let svg_name = "BENCHMARKS-scaling.svg";
    std::fs::write(a.out.join(svg_name), report::plot(r))?;
    let md = report::markdown(r, Some(svg_name));
    std::fs::write(a.out.join("results.md"), &md)?;
    eprintln!("results: {}", a.out.join("results.md").display());
    if let Some(doc) = &a.write_md {
        let text = std::fs::read_to_string(doc).unwrap_or_else(|_| "# Benchmarks\n".into());
        std::fs::write(doc, report::splice(&text, &md))?;
        let svg_path = doc.parent().unwrap_or(std::path::Path::new(".")).join(svg_name);
        std::fs::write(&svg_path, report::plot(r))?;
        eprintln!("updated {} and {}", doc.display(), svg_path.display());
    }
    Ok(())
}

fn main() -> Result<()> {
    let a = parse()?;
    if let Some(p) = &a.report_only {
        let r: Results = serde_json::from_str(&std::fs::read_to_string(p)?)?;
        return write_outputs(&a, &r);
    }
    let kwop = match &a.kwop {
        Some(k) => k.clone(),
        None => std::env::current_exe()?.with_file_name("kwop"),
    };
    if !kwop.is_file() {
        bail!("no kwop binary at {} (build it: cargo build --release -p kwop, or pass --kwop)", kwop.display());
    }
    let work = a.out.join("work");
    std::fs::create_dir_all(&work)?;
    let mut cfg = match a.scale.as_str() {
        "quick" => Config::quick(kwop.clone(), work),
        "smoke" => Config::smoke(kwop.clone(), work),
        _ => Config::full(kwop.clone(), work),
    };
    cfg.only = a.only.clone();
    cfg.no_sample_controller = a.no_sc;
    if let Some(s) = &a.mem_sizes {
        cfg.mem_sizes = s.clone();
    }
    if let Some(s) = &a.conv_sizes {
        cfg.conv_sizes = s.clone();
    }
    if let Some(r) = a.reps {
        cfg.reps = r;
    }
    let mut r: Results = match &a.merge {
        Some(p) => serde_json::from_str(&std::fs::read_to_string(p)?)?,
        None => Results::default(),
    };
    let earlier = a.merge.as_ref().map(|_| (r.date.clone(), r.command.clone(), r.kwop.clone()));
    r.date = utc_now();
    r.command = std::env::var("KWOP_BENCH_COMMAND").unwrap_or_else(|_| std::env::args().collect::<Vec<_>>().join(" "));
    r.kwop = format!("{} (git {})", kwop.display(), git_revision());
    // A merged run says which figures are whose.
    if let Some((date, command, kwop)) = earlier {
        r.command = format!(
            "{} (its figures: {}); the other figures from the run of {date}: {command}",
            r.command,
            a.only.join(", ")
        );
        r.kwop = format!("{} for {}; {kwop} for the others", r.kwop, a.only.join(", "));
    }
    r.machine = bench::machine();
    r.what_if = ["KWOP_BENCH_KWOP_ARGS", "KWOP_BENCH_KWOP_ENV"]
        .iter()
        .filter_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()).map(|v| format!("{k}={v:?}")))
        .collect::<Vec<_>>()
        .join(" ");
    r.config = Some(cfg.clone());
    if let Some(dir) = &a.criterion {
        if let Some(c) = report::read_criterion(dir) {
            r.calls = Some(c);
        } else {
            eprintln!("no criterion results under {}", dir.display());
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        // Save after every scenario, so a failure later keeps what was measured.
        if cfg.runs("conv") {
            r.convergence = scenarios::convergence(&cfg).await?;
            write_outputs(&a, &r)?;
        }
        if cfg.runs("steady") {
            r.steady = scenarios::steady(&cfg).await?;
            write_outputs(&a, &r)?;
        }
        if cfg.runs("memory") {
            let (m, b) = scenarios::memory(&cfg).await?;
            (r.memory, r.memory_build) = (m, b);
            write_outputs(&a, &r)?;
        }
        if cfg.runs("many") {
            r.many = Some(scenarios::many(&cfg).await?);
            write_outputs(&a, &r)?;
        }
        if cfg.runs("hotswap") {
            r.hotswap = Some(bench::swaps::hotswap(&cfg).await?);
            write_outputs(&a, &r)?;
        }
        if cfg.runs("shards") {
            r.shards = Some(bench::shards::shards(&cfg).await?);
            write_outputs(&a, &r)?;
        }
        if cfg.runs("admission") {
            r.admission = Some(bench::admission::admission(&cfg).await?);
            write_outputs(&a, &r)?;
        }
        // Needs the collector (scripts/tools otelcol); not part of the suite's smoke run.
        if cfg.runs("tracing") && a.scale != "smoke" {
            r.traced = Some(bench::traced::traced(&cfg).await?);
            write_outputs(&a, &r)?;
        }
        if cfg.runs("builds") && !a.compare.is_empty() {
            r.builds = Some(bench::builds::compare(&cfg, "glibc (cargo build --release)", &a.compare).await?);
        }
        anyhow::Ok(())
    })?;
    write_outputs(&a, &r)
}
