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

/// The SVG's text; see [`write_svg`]. Drawn back to front: the frame, the scatter, the
/// per-100 ms lines, the dropped slots, then the legend and the summary on top.
pub(super) fn render_svg(s: &StepResult, title: &str) -> String {
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
    let chart = Chart::fit(s, &points, &failures);
    let mut o = String::new();
    chart.frame(&mut o, title);
    chart.scatter(&mut o, &points, &failures);
    chart.percentile_lines(&mut o, &points);
    chart.dropped(&mut o, &s.dropped_at);
    chart.legend(&mut o);
    let b = s.booking_all();
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="end" font-size="11">{} answers, {} dropped; booking p50/p95/p99 {:.1}/{:.1}/{:.1} ms</text>"#,
        chart.left + chart.pw - 6.0,
        chart.top + 14.0,
        points.len(),
        s.dropped(),
        b.p50,
        b.p95,
        b.p99
    );
    let _ = writeln!(o, "</svg>");
    o
}

/// The chart's geometry: the canvas, the plot area inside its margins, and the axes' ranges,
/// so every part is drawn to the same scale.
struct Chart {
    w: f64,
    h: f64,
    left: f64,
    top: f64,
    /// The plot area's width and height.
    pw: f64,
    ph: f64,
    /// The time axis's end (s since the start), whole seconds.
    x_max_s: f64,
    /// The latency axis's first and last decade (log10 of ms).
    lo: f64,
    hi: f64,
}

impl Chart {
    /// Fits the axes to the answers and failures: time to the last send (at least the step's
    /// duration), latency over whole decades around them.
    fn fit(s: &StepResult, points: &[(f64, f64, &Outcome)], failures: &[(f64, f64)]) -> Chart {
        let (w, h) = (1000.0_f64, 520.0_f64);
        let (left, right, top, bottom) = (70.0, 20.0, 40.0, 60.0);
        let (pw, ph) = (w - left - right, h - top - bottom);
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
        Chart {
            w,
            h,
            left,
            top,
            pw,
            ph,
            x_max_s,
            lo,
            hi,
        }
    }

    /// Where a send time (ms since the start) falls on the canvas.
    fn x(&self, ms: f64) -> f64 {
        self.left + self.pw * (ms / 1000.0 / self.x_max_s)
    }

    /// Where a latency (ms) falls on the canvas, on the log scale.
    fn y(&self, v: f64) -> f64 {
        self.top + self.ph * (1.0 - (v.max(0.01).log10() - self.lo) / (self.hi - self.lo))
    }

    /// The opening tag, the background and the title, then the grid and the axes.
    fn frame(&self, o: &mut String, title: &str) {
        let (w, h, left, top, pw, ph) = (self.w, self.h, self.left, self.top, self.pw, self.ph);
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
        self.grid(o);
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
    }

    /// A labelled line per latency decade and per second (every 5 s past 30 s).
    fn grid(&self, o: &mut String) {
        let (left, top, pw, ph) = (self.left, self.top, self.pw, self.ph);
        let mut decade = self.lo;
        while decade <= self.hi + 1e-9 {
            let v = 10f64.powf(decade);
            let yy = self.y(v);
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
        let step_s = if self.x_max_s > 30.0 { 5.0 } else { 1.0 };
        let mut t = 0.0;
        while t <= self.x_max_s + 1e-9 {
            let xx = self.x(t * 1000.0);
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
    }

    /// Every answer as a dot coloured by its class, thinned to at most 20,000 so the file stays
    /// small; bookings with no answer as crosses (at most about 5,000).
    fn scatter(&self, o: &mut String, points: &[(f64, f64, &Outcome)], failures: &[(f64, f64)]) {
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
                self.x(*px),
                self.y(*py)
            );
        }
        let _ = writeln!(o, "</g>");
        for (px, py) in failures.iter().step_by((failures.len() / 5_000).max(1)) {
            let (cx, cy) = (self.x(*px), self.y(*py));
            let _ = writeln!(
                o,
                r##"<path d="M{:.1},{:.1}l6,6m0,-6l-6,6" stroke="#d62728" fill="none"/>"##,
                cx - 3.0,
                cy - 3.0
            );
        }
    }

    /// Per-100 ms p50, p95 and max lines, broken where a bucket had no answer (a gap in the
    /// answers should show, not be bridged).
    fn percentile_lines(&self, o: &mut String, points: &[(f64, f64, &Outcome)]) {
        let mut buckets: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
        for (px, py, _) in points {
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
                let _ = write!(
                    d,
                    "{cmd}{:.1},{:.1} ",
                    self.x(*b as f64 * 100.0 + 50.0),
                    self.y(v)
                );
                previous = Some(*b);
            }
            let _ = writeln!(
                o,
                r#"<path class="line" d="{}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}/>"#,
                d.trim_end()
            );
        }
    }

    /// Dropped slots as red ticks on the time axis, at their due time.
    fn dropped(&self, o: &mut String, dropped_at: &[f64]) {
        for d in dropped_at {
            let xx = self.x(*d);
            let _ = writeln!(
                o,
                r##"<line x1="{xx:.1}" y1="{}" x2="{xx:.1}" y2="{}" stroke="#d62728"/>"##,
                self.top + self.ph - 8.0,
                self.top + self.ph
            );
        }
    }

    /// The legend, along the bottom edge.
    fn legend(&self, o: &mut String) {
        let items = [
            ("#1f77b4", "201 booked"),
            ("#888", "409 sold out"),
            ("#d62728", "error: dot, x no answer, | dropped"),
            ("#2ca02c", "p50 per 100 ms"),
            ("#ff7f0e", "p95 per 100 ms"),
            ("#d62728", "max per 100 ms (dashed)"),
        ];
        let mut lx = self.left;
        for (colour, label) in items {
            let _ = writeln!(
                o,
                r#"<rect x="{lx}" y="{}" width="10" height="10" fill="{colour}"/><text x="{}" y="{}">{}</text>"#,
                self.h - 12.0,
                lx + 14.0,
                self.h - 3.0,
                esc(label)
            );
            lx += 24.0 + 6.6 * label.len() as f64;
        }
    }
}
