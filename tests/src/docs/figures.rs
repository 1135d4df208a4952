//! The figures of a guide (a number with a unit) and the check that the ones between
//! [`FIGURES_BEGIN`] and [`FIGURES_END`] are BENCHMARKS.md's, so the README cannot quote a number
//! the measurements do not give.

use super::Guide;
use std::collections::BTreeSet;

/// The region of a guide whose figures must appear in BENCHMARKS.md.
pub const FIGURES_BEGIN: &str = "<!-- figures-from: BENCHMARKS.md -->";
pub const FIGURES_END: &str = "<!-- /figures-from -->";

/// The figures (a number with a unit: ×, ms, µs, s, KB, MB, MiB, B, %) in a text.
pub fn figures(text: &str) -> Vec<String> {
    let re = regex::Regex::new(r"(?:^|[^\d.])(\d+(?:\.\d+)?) ?(×|ms|µs|KB|MB|MiB|B|s|%)").expect("a valid regex");
    let mut out = Vec::new();
    for c in re.captures_iter(text) {
        let (whole, unit) = (c.get(0).expect("match"), c.get(2).expect("unit"));
        let next = text[whole.end()..].chars().next();
        if next.is_some_and(|n| n.is_alphanumeric()) {
            continue; // "5 sec", "3 Bytes": not this unit
        }
        out.push(format!("{} {}", &c[1], unit.as_str()).replace(" ×", "×"));
    }
    out
}

/// Problems with the figures between the lines [`FIGURES_BEGIN`] and [`FIGURES_END`]: each must be
/// one BENCHMARKS.md gives (same number, same unit).
pub fn figure_problems(guide: &Guide, benchmarks: &str) -> Vec<String> {
    let known: BTreeSet<String> = figures(benchmarks).into_iter().collect();
    let mut problems = Vec::new();
    let mut region: Option<(usize, String)> = None;
    for (i, line) in guide.text.lines().enumerate() {
        match (line.trim(), region.as_mut()) {
            (FIGURES_BEGIN, None) => region = Some((i + 1, String::new())),
            (FIGURES_END, Some((_, text))) => {
                let unknown = figures(text).into_iter().filter(|f| !known.contains(f));
                problems.extend(unknown.map(|f| format!("{}: the figure {f} is not in BENCHMARKS.md", guide.path)));
                region = None;
            }
            (FIGURES_BEGIN | FIGURES_END, _) => {
                problems.push(format!("{}:{}: `{line}` out of place", guide.path, i + 1))
            }
            (_, Some((_, text))) => {
                text.push_str(line);
                text.push('\n');
            }
            (_, None) => {}
        }
    }
    if let Some((line, _)) = region {
        problems.push(format!("{}:{line}: `{FIGURES_BEGIN}` without `{FIGURES_END}`", guide.path));
    }
    problems
}
