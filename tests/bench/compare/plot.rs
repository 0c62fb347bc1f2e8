//! Booking p95 over time, one line per target, as an SVG drawn by hand (one chart does not
//! warrant a plotting crate's dependency tree).

use super::*;

/// Per-100 ms p95 of (send ms, latency ms) points: (bucket middle ms, p95).
pub(super) fn p95_series(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut buckets: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for (x, y) in points {
        buckets.entry((x / 100.0) as u64).or_default().push(*y);
    }
    buckets
        .into_iter()
        .map(|(b, ys)| (b as f64 * 100.0 + 50.0, crate::percentiles(&ys).p95))
        .collect()
}

pub(super) fn write(path: &Path, svg: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))
}

pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

pub(super) const COLOURS: &[&str] = &[
    "#000000", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22", "#17becf",
];

/// Hand-written SVG: one p95 line per target against time, latency on a log scale; seatgate is
/// drawn last and thicker so it stays visible over the others.
pub(super) fn render(series: &[(String, Vec<(f64, f64)>)], title: &str) -> String {
    let (w, h) = (1000.0_f64, 560.0_f64);
    let (left, right, top, bottom) = (70.0, 20.0, 40.0, 100.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let all = series.iter().flat_map(|(_, s)| s.iter());
    let x_max_s = (all.clone().map(|p| p.0).fold(1000.0, f64::max) / 1000.0).ceil();
    let y_max = all.clone().map(|p| p.1).fold(1.0, f64::max);
    let y_min = all.map(|p| p.1).fold(y_max, f64::min).max(0.01);
    let (lo, hi) = (
        y_min.log10().floor(),
        y_max.log10().ceil().max(y_min.log10().floor() + 1.0),
    );
    let x = |ms: f64| left + pw * (ms / 1000.0 / x_max_s);
    let y = |v: f64| top + ph * (1.0 - (v.max(0.01).log10() - lo) / (hi - lo));
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, "<title>{}</title>", esc(title));
    let _ = writeln!(o, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        w / 2.0,
        esc(title)
    );
    let mut decade = lo;
    while decade <= hi + 1e-9 {
        let v = 10f64.powf(decade);
        let yy = y(v);
        let _ = writeln!(
            o,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            left + pw,
            left - 6.0,
            yy + 4.0,
            if v >= 1.0 {
                format!("{v:.0}")
            } else {
                format!("{v}")
            }
        );
        decade += 1.0;
    }
    let step_s = if x_max_s > 30.0 { 5.0 } else { 1.0 };
    let mut t = 0.0;
    while t <= x_max_s + 1e-9 {
        let xx = x(t * 1000.0);
        let _ = writeln!(
            o,
            r#"<text x="{xx:.1}" y="{}" text-anchor="middle">{t:.0}</text>"#,
            top + ph + 18.0
        );
        t += step_s;
    }
    let _ = writeln!(
        o,
        r#"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
    );
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle">time since start (s)</text>"#,
        left + pw / 2.0,
        top + ph + 36.0
    );
    let _ = writeln!(
        o,
        r#"<text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {})">booking p95 per 100 ms (ms, log scale)</text>"#,
        top + ph / 2.0,
        top + ph / 2.0
    );
    let mut drawn: Vec<usize> = (0..series.len()).collect();
    drawn.sort_by_key(|&i| series[i].0 == "seatgate");
    for i in drawn {
        let (name, points) = &series[i];
        let colour = COLOURS[i % COLOURS.len()];
        let width = if name == "seatgate" { 2.5 } else { 1.2 };
        let mut d = String::new();
        let mut previous: Option<f64> = None;
        for (px, py) in points {
            let cmd = if previous.is_some_and(|q| (px - q - 100.0).abs() < 1.0) {
                'L'
            } else {
                'M'
            };
            let _ = write!(d, "{cmd}{:.1},{:.1} ", x(*px), y(*py));
            previous = Some(*px);
        }
        let _ = writeln!(
            o,
            r#"<path class="line" d="{}" fill="none" stroke="{colour}" stroke-width="{width}"><title>{}</title></path>"#,
            d.trim_end(),
            esc(name)
        );
    }
    // Legend, two rows under the axis title.
    for (i, (name, _)) in series.iter().enumerate() {
        let (col, row) = (i % 6, i / 6);
        let lx = left + col as f64 * 150.0;
        let ly = top + ph + 56.0 + row as f64 * 18.0;
        let _ = writeln!(
            o,
            r#"<rect x="{lx}" y="{}" width="10" height="10" fill="{}"/><text x="{}" y="{ly}">{}</text>"#,
            ly - 9.0,
            COLOURS[i % COLOURS.len()],
            lx + 14.0,
            esc(name)
        );
    }
    let _ = writeln!(o, "</svg>");
    o
}
