//! Small statistics over samples.

/// Median (mean of the two middle values for an even count); NaN when empty.
pub fn median(xs: &[f64]) -> f64 {
    percentile(xs, 50.0)
}

/// Percentile by linear interpolation between closest ranks (p in 0..=100); NaN when empty.
pub fn percentile(xs: &[f64], p: f64) -> f64 {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let rank = (p / 100.0).clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (rank - lo as f64)
}

/// Median of integers.
pub fn median_u64(xs: &[u64]) -> u64 {
    median(&xs.iter().map(|&x| x as f64).collect::<Vec<_>>()).round() as u64
}

/// Least-squares slope and intercept of y over x.
pub fn linear_fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    if points.len() < 2 {
        return (f64::NAN, f64::NAN);
    }
    let (sx, sy) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let (num, den) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + (x - mx) * (y - my), b + (x - mx).powi(2)));
    let slope = num / den;
    (slope, my - slope * mx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_percentiles() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0, 5.0], 100.0), 5.0);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.0), 1.0);
        assert!((percentile(&(1..=100).map(f64::from).collect::<Vec<_>>(), 99.0) - 99.01).abs() < 1e-9);
        let (m, b) = linear_fit(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]);
        assert!((m - 2.0).abs() < 1e-12 && (b - 1.0).abs() < 1e-12);
    }
}
