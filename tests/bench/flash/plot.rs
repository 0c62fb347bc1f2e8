//! A step's latencies over time as an SVG, drawn by hand: a few hundred lines of text beat a
//! plotting crate's dependency tree for one chart.

use super::*;

pub(super) fn plot_path(cli: &Cli, rate: Option<f64>) -> PathBuf {
    let base = cli
        .plot
        .clone()
        .unwrap_or_else(|| PathBuf::from("target/flash-sale.svg"));
    match rate {
        None => base,
        Some(r) => {
            let stem = base
                .file_stem()
                .map_or("flash-sale".into(), |s| s.to_string_lossy().into_owned());
            base.with_file_name(format!("{stem}-{}.svg", r as u64))
        }
    }
}

pub(super) fn plot_title(cli: &Cli, s: &StepResult) -> String {
    format!(
        "flash-sale: booking latency over time ({}/s for {:.0} s, {} seats, {} shard(s), {})",
        s.rate,
        s.duration.as_secs_f64(),
        s.capacity,
        s.shards,
        crate::target_name(cli)
    )
}

pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Hand-written SVG: booking latency (log scale) against time since the start; a scatter of
/// the answers (201 blue, 409 grey, other red) under per-100 ms p50 / p95 / max lines, dropped
/// slots as red ticks on the time axis.
pub(super) fn write_svg(path: &Path, s: &StepResult, title: &str) -> anyhow::Result<()> {
    let svg = render_svg(s, title);
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))
}

pub(super) fn render_svg(s: &StepResult, title: &str) -> String {
    let (w, h) = (1000.0_f64, 520.0_f64);
    let (left, right, top, bottom) = (70.0, 20.0, 40.0, 60.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    // Points: (x ms of the booking's send ~ iteration start, latency ms, class).
    let points: Vec<(f64, f64, &Outcome)> = s
        .samples
        .iter()
        .filter_map(|x| {
            x.booking_ms
                .map(|b| (x.start_ms + x.login_ms, b, &x.outcome))
        })
        .collect();
    // Bookings that got no answer, at the time they failed.
    let failures: Vec<(f64, f64)> = s
        .samples
        .iter()
        .filter_map(|x| x.failed_after_ms.map(|f| (x.start_ms + x.login_ms, f)))
        .collect();
    // x is when the booking was sent.
    let x_max_ms = points
        .iter()
        .map(|p| p.0)
        .chain(failures.iter().map(|f| f.0))
        .fold(s.duration.as_secs_f64() * 1000.0, f64::max);
    let x_max_s = (x_max_ms / 1000.0).ceil().max(1.0);
    let y_max = points
        .iter()
        .map(|p| p.1)
        .chain(failures.iter().map(|f| f.1))
        .fold(1.0, f64::max);
    let y_min = points.iter().map(|p| p.1).fold(y_max, f64::min).max(0.01);
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
    let _ = writeln!(o, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        w / 2.0,
        esc(title)
    );
    // Grid and axes.
    let mut decade = lo;
    while decade <= hi + 1e-9 {
        let v = 10f64.powf(decade);
        let yy = y(v);
        let _ = writeln!(
            o,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{}" y2="{yy:.1}" stroke="#ddd"/>"##,
            left + pw
        );
        let label = if v >= 1.0 {
            format!("{v:.0}")
        } else {
            format!("{v}")
        };
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{label}</text>"#,
            left - 6.0,
            yy + 4.0
        );
        decade += 1.0;
    }
    let step_s = if x_max_s > 30.0 { 5.0 } else { 1.0 };
    let mut t = 0.0;
    while t <= x_max_s + 1e-9 {
        let xx = x(t * 1000.0);
        let _ = writeln!(
            o,
            r##"<line x1="{xx:.1}" y1="{top}" x2="{xx:.1}" y2="{}" stroke="#eee"/>"##,
            top + ph
        );
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
        h - 22.0
    );
    let _ = writeln!(
        o,
        r#"<text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {})">booking latency (ms, log scale)</text>"#,
        top + ph / 2.0,
        top + ph / 2.0
    );
    // Scatter, thinned to at most 20,000 points.
    let stride = (points.len() / 20_000).max(1);
    let _ = writeln!(o, r#"<g fill-opacity="0.35">"#);
    for (px, py, outcome) in points.iter().step_by(stride) {
        let colour = match outcome {
            Outcome::Created => "#1f77b4",
            Outcome::SoldOut => "#888",
            _ => "#d62728",
        };
        let _ = writeln!(
            o,
            r#"<circle cx="{:.1}" cy="{:.1}" r="1.5" fill="{colour}"/>"#,
            x(*px),
            y(*py)
        );
    }
    let _ = writeln!(o, "</g>");
    for (px, py) in failures.iter().step_by((failures.len() / 5_000).max(1)) {
        let (cx, cy) = (x(*px), y(*py));
        let _ = writeln!(
            o,
            r##"<path d="M{:.1},{:.1}l6,6m0,-6l-6,6" stroke="#d62728" fill="none"/>"##,
            cx - 3.0,
            cy - 3.0
        );
    }
    // Per-100 ms lines, broken where a bucket had no answer.
    let mut buckets: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for (px, py, _) in &points {
        buckets.entry((px / 100.0) as u64).or_default().push(*py);
    }
    let lines: Vec<(u64, Pcts)> = buckets
        .into_iter()
        .map(|(b, xs)| (b, percentiles(&xs)))
        .collect();
    for (pick, colour, dash) in [
        (0usize, "#2ca02c", ""),
        (1, "#ff7f0e", ""),
        (2, "#d62728", r#" stroke-dasharray="4 3""#),
    ] {
        let mut d = String::new();
        let mut previous: Option<u64> = None;
        for (b, p) in &lines {
            let v = [p.p50, p.p95, p.max][pick];
            let cmd = if previous.is_some_and(|q| q + 1 == *b) {
                'L'
            } else {
                'M'
            };
            let _ = write!(d, "{cmd}{:.1},{:.1} ", x(*b as f64 * 100.0 + 50.0), y(v));
            previous = Some(*b);
        }
        let _ = writeln!(
            o,
            r#"<path class="line" d="{}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}/>"#,
            d.trim_end()
        );
    }
    // Dropped slots.
    for d in &s.dropped_at {
        let xx = x(*d);
        let _ = writeln!(
            o,
            r##"<line x1="{xx:.1}" y1="{}" x2="{xx:.1}" y2="{}" stroke="#d62728"/>"##,
            top + ph - 8.0,
            top + ph
        );
    }
    // Legend.
    let items = [
        ("#1f77b4", "201 booked"),
        ("#888", "409 sold out"),
        ("#d62728", "error: dot, x no answer, | dropped"),
        ("#2ca02c", "p50 per 100 ms"),
        ("#ff7f0e", "p95 per 100 ms"),
        ("#d62728", "max per 100 ms (dashed)"),
    ];
    let mut lx = left;
    for (colour, label) in items {
        let _ = writeln!(
            o,
            r#"<rect x="{lx}" y="{}" width="10" height="10" fill="{colour}"/><text x="{}" y="{}">{}</text>"#,
            h - 12.0,
            lx + 14.0,
            h - 3.0,
            esc(label)
        );
        lx += 24.0 + 6.6 * label.len() as f64;
    }
    let b = s.booking_all();
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="end" font-size="11">{} answers, {} dropped; booking p50/p95/p99 {:.1}/{:.1}/{:.1} ms</text>"#,
        left + pw - 6.0,
        top + 14.0,
        points.len(),
        s.dropped(),
        b.p50,
        b.p95,
        b.p99
    );
    let _ = writeln!(o, "</svg>");
    o
}
