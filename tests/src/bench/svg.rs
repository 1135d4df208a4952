//! A minimal SVG line chart (no dependencies): panels of series over a shared x axis kind.

use std::fmt::Write;

/// One line.
pub struct Series {
    /// Legend.
    pub name: String,
    /// Stroke colour.
    pub color: &'static str,
    /// Points (x, y), drawn in x order.
    pub points: Vec<(f64, f64)>,
}

/// One chart.
pub struct Panel {
    /// Title above the chart.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
}

const W: f64 = 460.0;
const H: f64 = 330.0;
const ML: f64 = 64.0;
const MR: f64 = 16.0;
const MT: f64 = 34.0;
const MB: f64 = 46.0;

fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let mut t = (lo / step).ceil() * step;
    let mut out = vec![];
    while t <= hi + step * 1e-9 {
        out.push(t);
        t += step;
    }
    out
}

fn fmt_num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v.abs() >= 10.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn panel(out: &mut String, p: &Panel, ox: f64) {
    let pts: Vec<(f64, f64)> = p.series.iter().flat_map(|s| s.points.iter().copied()).collect();
    let (xmin, xmax) = (0.0, pts.iter().map(|p| p.0).fold(1.0, f64::max) * 1.05);
    let ty = |y: f64| if p.log_y { y.max(1e-9).log10() } else { y };
    let (mut ymin, mut ymax) = if p.log_y {
        let lo = pts.iter().map(|p| ty(p.1)).fold(f64::INFINITY, f64::min);
        let hi = pts.iter().map(|p| ty(p.1)).fold(f64::NEG_INFINITY, f64::max);
        (lo.floor(), hi.ceil())
    } else {
        (0.0, pts.iter().map(|p| p.1).fold(0.0, f64::max) * 1.1)
    };
    if !ymin.is_finite() || !ymax.is_finite() || ymax <= ymin {
        (ymin, ymax) = (0.0, 1.0);
    }
    let (pw, ph) = (W - ML - MR, H - MT - MB);
    let sx = |x: f64| ox + ML + (x - xmin) / (xmax - xmin) * pw;
    let sy = |y: f64| MT + ph - (ty(y) - ymin) / (ymax - ymin) * ph;
    let _ =
        writeln!(out, r#"<text x="{:.1}" y="20" font-size="14" font-weight="bold">{}</text>"#, ox + ML, esc(&p.title));
    let _ = writeln!(
        out,
        r##"<rect x="{:.1}" y="{MT}" width="{pw:.1}" height="{ph:.1}" fill="none" stroke="#999"/>"##,
        ox + ML
    );
    for t in nice_ticks(xmin, xmax, 5) {
        let x = sx(t);
        let _ = writeln!(out, r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{MT}" stroke="#eee"/>"##, MT + ph);
        let _ = writeln!(
            out,
            r#"<text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"#,
            MT + ph + 15.0,
            fmt_num(t)
        );
    }
    let yticks: Vec<f64> =
        if p.log_y { (ymin as i32..=ymax as i32).map(|e| 10f64.powi(e)).collect() } else { nice_ticks(ymin, ymax, 5) };
    for t in yticks {
        let y = sy(t);
        let _ = writeln!(
            out,
            r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#eee"/>"##,
            ox + ML,
            ox + ML + pw
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"#,
            ox + ML - 5.0,
            y + 4.0,
            fmt_num(t)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"#,
        ox + ML + pw / 2.0,
        H - 8.0,
        esc(&p.x_label)
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle" transform="rotate(-90 {:.1} {:.1})">{}</text>"#,
        ox + 14.0,
        MT + ph / 2.0,
        ox + 14.0,
        MT + ph / 2.0,
        esc(&p.y_label)
    );
    for (i, s) in p.series.iter().enumerate() {
        let mut pts = s.points.clone();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let path: Vec<String> = pts.iter().map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y))).collect();
        let _ = writeln!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"/>"#,
            path.join(" "),
            s.color
        );
        for (x, y) in &pts {
            let _ = writeln!(out, r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#, sx(*x), sy(*y), s.color);
        }
        let ly = MT + 14.0 + i as f64 * 16.0;
        let lx = ox + ML + 10.0;
        let _ = writeln!(out, r#"<rect x="{lx:.1}" y="{:.1}" width="14" height="3" fill="{}"/>"#, ly - 4.0, s.color);
        let _ = writeln!(out, r#"<text x="{:.1}" y="{ly:.1}" font-size="11">{}</text>"#, lx + 18.0, esc(&s.name));
    }
}

/// Renders panels side by side.
pub fn render(panels: &[Panel], caption: &str) -> String {
    let width = W * panels.len().max(1) as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{:.0}" viewBox="0 0 {width:.0} {:.0}" font-family="sans-serif">"#,
        H + 22.0,
        H + 22.0
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (i, p) in panels.iter().enumerate() {
        panel(&mut out, p, i as f64 * W);
    }
    let _ = writeln!(out, r##"<text x="8" y="{:.0}" font-size="11" fill="#555">{}</text>"##, H + 14.0, esc(caption));
    out.push_str("</svg>\n");
    out
}
