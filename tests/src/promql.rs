//! What the observability files query and what a host exports (tests/tests/observability.rs):
//! the series and labels a PromQL expression reads, parsed with `promql-parser` (a syntax or type
//! error is an error), Grafana's `$__…` interval variables stood in for, and the families,
//! sample names and label names of an OpenMetrics `/metrics` text.

use promql_parser::label::Matchers;
use promql_parser::parser::{self, Expr, LabelModifier};
use std::collections::{BTreeMap, BTreeSet};

/// One series selector of an expression: the metric name it reads, the label names its matchers
/// name, and the labels an aggregation directly over it groups by (`sum by (l) (rate(x[5m]))`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// The metric name (`kwop_reconcile_total`), as written.
    pub name: String,
    /// Label names in its matchers (`__name__` left out).
    pub matched: BTreeSet<String>,
    /// Label names of the nearest enclosing `by (...)` aggregation, if any.
    pub grouped: BTreeSet<String>,
}

/// Grafana's interval variables, which are not PromQL, replaced by a duration; every other `$`
/// must stand inside a label value (`plugin=~"$plugin"`), or the parse fails.
pub fn grafana_to_promql(expr: &str) -> String {
    ["$__rate_interval", "$__interval", "$__range"].iter().fold(expr.to_string(), |e, v| e.replace(v, "5m"))
}

/// Parses `expr` and returns every selector in it; an error for a syntax or type error.
pub fn selectors(expr: &str) -> Result<Vec<Selector>, String> {
    let ast = parser::parse(expr).map_err(|e| format!("{expr}: {e}"))?;
    let mut out = Vec::new();
    walk(&ast, None, &mut out);
    if let Some(s) = out.iter().find(|s| s.name.is_empty()) {
        return Err(format!("{expr}: a selector without a metric name ({:?})", s.matched));
    }
    Ok(out)
}

fn walk(e: &Expr, grouped: Option<&BTreeSet<String>>, out: &mut Vec<Selector>) {
    match e {
        Expr::Aggregate(a) => {
            let by = match &a.modifier {
                Some(LabelModifier::Include(l)) => l.labels.iter().cloned().collect(),
                _ => BTreeSet::new(),
            };
            walk(&a.expr, Some(&by), out);
            if let Some(p) = &a.param {
                walk(p, None, out);
            }
        }
        Expr::Unary(u) => walk(&u.expr, grouped, out),
        Expr::Binary(b) => {
            walk(&b.lhs, grouped, out);
            walk(&b.rhs, grouped, out);
        }
        Expr::Paren(p) => walk(&p.expr, grouped, out),
        Expr::Subquery(s) => walk(&s.expr, grouped, out),
        Expr::Call(c) => c.args.args.iter().for_each(|a| walk(a, grouped, out)),
        Expr::VectorSelector(v) => out.push(selector(v.name.as_deref(), &v.matchers, grouped)),
        Expr::MatrixSelector(m) => out.push(selector(m.vs.name.as_deref(), &m.vs.matchers, grouped)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

fn selector(name: Option<&str>, matchers: &Matchers, grouped: Option<&BTreeSet<String>>) -> Selector {
    let all = matchers.matchers.iter().chain(matchers.or_matchers.iter().flatten());
    let by_name = all.clone().find(|m| m.name == "__name__").map(|m| m.value.clone());
    Selector {
        name: name.map(str::to_string).or(by_name).unwrap_or_default(),
        matched: all.filter(|m| m.name != "__name__").map(|m| m.name.clone()).collect(),
        grouped: grouped.cloned().unwrap_or_default(),
    }
}

/// `label_values(METRIC, LABEL)` (a Grafana variable's query): (metric, label).
pub fn label_values(query: &str) -> Option<(String, String)> {
    let inner = query.trim().strip_prefix("label_values(")?.strip_suffix(')')?;
    let (metric, label) = inner.split_once(',')?;
    Some((metric.trim().to_string(), label.trim().to_string()))
}

/// An OpenMetrics text as Prometheus sees it: each family's type from its `# TYPE` line, and
/// the label names of each sample name (`kwop_reconcile_total`, `..._bucket`).
#[derive(Debug, Default)]
pub struct Exposition {
    /// Family name → type (`counter`, `gauge`, `histogram`, ...).
    pub families: BTreeMap<String, String>,
    /// Sample name → the label names seen on its samples.
    pub samples: BTreeMap<String, BTreeSet<String>>,
}

impl Exposition {
    /// Reads a `/metrics` text.
    pub fn parse(text: &str) -> Exposition {
        let mut x = Exposition::default();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                if let Some((name, kind)) = rest.split_once(' ') {
                    x.families.insert(name.to_string(), kind.trim().to_string());
                }
                continue;
            }
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let series = line.split_once(' ').map_or(line, |(s, _)| s);
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            let names = labels.trim_end_matches('}').split(',').filter_map(|kv| kv.split_once('=')).map(|(k, _)| k);
            x.samples.entry(name.to_string()).or_default().extend(names.map(str::to_string));
        }
        x
    }

    /// The sample names a query may read, from the `# TYPE` lines: a counter `x` as `x_total`
    /// (and `x_created`), a histogram `x` as `x_bucket`, `x_sum`, `x_count`, a gauge as `x`.
    pub fn queryable(&self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for (family, kind) in &self.families {
            let suffixes: &[&str] = match kind.as_str() {
                "counter" => &["_total", "_created"],
                "histogram" => &["_bucket", "_sum", "_count", "_created"],
                "summary" => &["", "_sum", "_count", "_created"],
                "info" => &["_info"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|s| format!("{family}{s}")));
        }
        names
    }
}

/// One PromQL expression of a dashboard or a rule file, and where it is.
#[derive(Debug, Clone)]
pub struct Query {
    /// Where (`panel "Writes" A`, `alert KwopReconcileErrors`).
    pub at: String,
    /// The expression.
    pub expr: String,
}

/// Labels Prometheus adds to every scraped series.
const TARGET_LABELS: [&str; 2] = ["job", "instance"];

/// What in `queries` (and the variables' `label_values(METRIC, LABEL)`) is not what `x` exports:
/// every selector must read a sample name its `# TYPE` lines make (a counter `x` as `x_total`, a
/// histogram by its parts), and, where there are samples of it, name only labels they carry (or
/// Prometheus's `job` and `instance`) in its matchers and its `by (...)`.
pub fn problems(queries: &[Query], values: &[(String, String)], x: &Exposition) -> Vec<String> {
    let queryable = x.queryable();
    let check = |name: &str, labels: &BTreeSet<String>, at: &str, out: &mut Vec<String>| {
        if !queryable.contains(name) {
            out.push(format!("{at}: {name} is not exported"));
        } else if let Some(have) = x.samples.get(name) {
            let strange: Vec<_> =
                labels.iter().filter(|l| !have.contains(*l) && !TARGET_LABELS.contains(&l.as_str())).collect();
            if !strange.is_empty() {
                out.push(format!("{at}: {name} has no label {strange:?} (it has {have:?})"));
            }
        }
    };
    let mut out = Vec::new();
    for q in queries {
        match selectors(&q.expr) {
            Ok(found) => found
                .iter()
                .for_each(|s| check(&s.name, &s.matched.union(&s.grouped).cloned().collect(), &q.at, &mut out)),
            Err(e) => out.push(format!("{}: {e}", q.at)),
        }
    }
    for (metric, label) in values {
        check(metric, &BTreeSet::from([label.clone()]), "a variable", &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_and_their_labels() {
        let e = grafana_to_promql(
            r#"histogram_quantile(0.99, sum by (plugin, le) (rate(kwop_x_bucket{plugin=~"$plugin"}[$__rate_interval])))"#,
        );
        let s = selectors(&e).expect("parses");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].name, "kwop_x_bucket");
        assert_eq!(s[0].matched, BTreeSet::from(["plugin".to_string()]));
        assert_eq!(s[0].grouped, BTreeSet::from(["le".to_string(), "plugin".to_string()]));
        let s = selectors("(a > 0) and on() ({__name__=\"b\"} == 0)").expect("parses");
        assert_eq!(s.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert!(selectors("sum by (x) (rate(a))").is_err(), "rate of an instant vector is a type error");
        assert!(selectors("sum(rate(a[5m])").is_err());
        assert!(selectors("rate(a[$__rate_interval])").is_err(), "Grafana variables must be stood in for");
        assert!(selectors("{job=\"x\"}").is_err(), "no metric name");
    }

    #[test]
    fn an_openmetrics_text() {
        let x = Exposition::parse(
            "# HELP kwop_r Reconciles.\n# TYPE kwop_r counter\nkwop_r_total{plugin=\"a\",result=\"ok\"} 1\n\
             # TYPE kwop_d histogram\nkwop_d_bucket{le=\"0.1\",plugin=\"a\"} 0\n# TYPE kwop_g gauge\nkwop_g 0\n# EOF\n",
        );
        assert_eq!(x.families["kwop_r"], "counter");
        assert_eq!(x.samples["kwop_r_total"], BTreeSet::from(["plugin".to_string(), "result".to_string()]));
        assert_eq!(x.samples["kwop_g"], BTreeSet::new());
        let q = x.queryable();
        for n in ["kwop_r_total", "kwop_d_bucket", "kwop_d_count", "kwop_g"] {
            assert!(q.contains(n), "{n}");
        }
        assert!(!q.contains("kwop_r") && !q.contains("kwop_d"), "a counter is queried as _total, a histogram by parts");
    }
}
