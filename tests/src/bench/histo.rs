//! A Prometheus histogram read from a `/metrics` text (the API server's and kwop's), the
//! difference of two readings, and its mean and estimated quantiles. Hand-written: it takes a few
//! lines, and no crate of the workspace parses the text format (prometheus-client only writes it).

use serde::{Deserialize, Serialize};

/// A histogram's buckets, sum and count: one reading, or the difference of two.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Histo {
    /// (upper bound `le`, cumulative count), ascending; `+Inf` last.
    pub buckets: Vec<(f64, f64)>,
    /// Sum of the observations, seconds.
    pub sum: f64,
    /// Observations.
    pub count: f64,
}

impl Histo {
    /// The series of histogram `name` whose labels include every pair of `labels`, summed.
    pub fn read(text: &str, name: &str, labels: &[(&str, &str)]) -> Histo {
        let mut h = Histo::default();
        let bucket = format!("{name}_bucket");
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((metric, rest)) = line.split_once('{') else { continue };
            // The first token after the labels (an exemplar may follow).
            let Some((labels_text, after)) = rest.split_once("} ") else { continue };
            let Some(value) = after.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()) else { continue };
            if !labels.iter().all(|(k, v)| labels_text.contains(&format!("{k}=\"{v}\""))) {
                continue;
            }
            if metric == bucket {
                let Some(le) = labels_text.split("le=\"").nth(1).and_then(|r| r.split('"').next()) else { continue };
                let le = if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap_or(f64::NAN) };
                match h.buckets.iter_mut().find(|(b, _)| *b == le) {
                    Some((_, c)) => *c += value,
                    None => h.buckets.push((le, value)),
                }
            } else if metric.strip_prefix(name) == Some("_sum") {
                h.sum += value;
            } else if metric.strip_prefix(name) == Some("_count") {
                h.count += value;
            }
        }
        h.buckets.retain(|(b, _)| !b.is_nan());
        h.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        h
    }

    /// What was observed after `before` was read.
    pub fn since(&self, before: &Histo) -> Histo {
        let was = |le: f64| before.buckets.iter().find(|(b, _)| *b == le).map_or(0.0, |(_, c)| *c);
        Histo {
            buckets: self.buckets.iter().map(|(le, c)| (*le, c - was(*le))).collect(),
            sum: self.sum - before.sum,
            count: self.count - before.count,
        }
    }

    /// Mean observation (exact: `_sum / _count`); NaN when nothing was observed.
    pub fn mean(&self) -> f64 {
        if self.count > 0.0 {
            self.sum / self.count
        } else {
            f64::NAN
        }
    }

    /// Quantile `q` (0..=1) estimated as Prometheus' `histogram_quantile` does: linear within
    /// the bucket it falls in, the highest finite bound when it falls in `+Inf`.
    pub fn quantile(&self, q: f64) -> f64 {
        let total = self.buckets.last().map_or(0.0, |(_, c)| *c);
        if total <= 0.0 {
            return f64::NAN;
        }
        let rank = q.clamp(0.0, 1.0) * total;
        let (mut lower, mut below) = (0.0, 0.0);
        for &(le, cum) in &self.buckets {
            if cum >= rank {
                if le.is_infinite() {
                    return lower;
                }
                let share = if cum > below { (rank - below) / (cum - below) } else { 0.0 };
                return lower + (le - lower) * share;
            }
            (lower, below) = (le, cum);
        }
        lower
    }
}

#[cfg(test)]
mod tests {
    use super::Histo;

    const TEXT: &str = "# TYPE h histogram\n\
        h_bucket{name=\"a\",le=\"0.005\"} 6\nh_bucket{name=\"a\",le=\"0.025\"} 9\nh_bucket{name=\"a\",le=\"+Inf\"} 10\n\
        h_sum{name=\"a\"} 0.05\nh_count{name=\"a\"} 10\n\
        h_bucket{name=\"b\",le=\"0.005\"} 100\nh_bucket{name=\"b\",le=\"+Inf\"} 100\nh_sum{name=\"b\"} 0.1\nh_count{name=\"b\"} 100\n\
        h_bucket{name=\"a\",le=\"0.1\"} 10 # {trace_id=\"x\"} 0.07\n";

    #[test]
    fn histograms_are_read_by_label_and_differenced() {
        let a = Histo::read(TEXT, "h", &[("name", "a")]);
        assert_eq!(a.buckets, vec![(0.005, 6.0), (0.025, 9.0), (0.1, 10.0), (f64::INFINITY, 10.0)]);
        assert_eq!((a.sum, a.count), (0.05, 10.0));
        assert!((a.mean() - 0.005).abs() < 1e-12);
        let both = Histo::read(TEXT, "h", &[]);
        assert_eq!(both.count, 110.0);
        let d = both.since(&a);
        assert_eq!(d.count, 100.0);
        assert_eq!(d.buckets[0], (0.005, 100.0));
        assert!(Histo::read(TEXT, "hh", &[]).mean().is_nan());
    }

    #[test]
    fn quantiles_interpolate_within_the_bucket() {
        let a = Histo::read(TEXT, "h", &[("name", "a")]);
        // Rank 5 of 10 falls in the first bucket, 6 observations below 5 ms: 5/6 of the way.
        assert!((a.quantile(0.5) - 0.005 * 5.0 / 6.0).abs() < 1e-12);
        // Rank 9.9: the (0.025, 0.1] bucket holds the 10th.
        assert!((a.quantile(0.99) - (0.025 + 0.075 * 0.9)).abs() < 1e-12);
        let tail = Histo { buckets: vec![(0.005, 1.0), (f64::INFINITY, 4.0)], sum: 1.0, count: 4.0 };
        assert_eq!(tail.quantile(0.99), 0.005, "in +Inf: the highest finite bound");
        assert!(Histo::default().quantile(0.5).is_nan());
    }
}
