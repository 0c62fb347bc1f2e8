//! The Prometheus text exposition format (version 0.0.4) of the registry's totals: per metric a
//! `# HELP` and a `# TYPE` line, then its series; counts are `counter`s, durations
//! `histogram`s over [`BUCKETS_MS`] (cumulative `_bucket{le}` lines, `_sum`, `_count`).
//! Every series carries the `service` label first, then the metric's own dimensions in the
//! catalogue's order, so the output is stable and a test can compare it whole.
//!
//! Measured against the exporters that could serve `GET /__metrics` instead (issue 20; figures
//! and commands in `docs/measurements/metrics-spike/FINDINGS.md`), on the same totals: both
//! render the same 42 samples (names, labels, `BUCKETS_MS`), but
//!
//! | runner | this renderer | metrics-exporter-prometheus 0.18.3 | prometheus-client 0.26.0 |
//! |---|---|---|---|
//! | crates added to the runner | 0 | +13 | +3 |
//! | record one invocation (host) | 1.5 us | 4.9 us | 3.1 us |
//! | render the whole text (host) | 25.7 us | 30.2 us | 6.1 us |
//!
//! and either keeps its totals in a second registry that `count`/`observe_ms` (in every
//! function) would have to feed too; prometheus-client also writes OpenMetrics rather than
//! this 0.0.4 text. Neither measures as well on every figure, so the renderer stays.

use super::registry::{BUCKETS_MS, Series, SeriesKey};
use super::{Metric, SERVICE_DIMENSION};
use std::fmt::Write;

/// The `Content-Type` of this format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A label value: backslash, double quote and line feed escaped.
fn label_value(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

/// `# HELP` text: backslash and line feed escaped.
fn help_text(v: &str) -> String {
    v.replace('\\', r"\\").replace('\n', r"\n")
}

fn labels(service: &str, key: &SeriesKey, le: Option<&str>) -> String {
    let mut pairs = vec![format!("{SERVICE_DIMENSION}=\"{}\"", label_value(service))];
    pairs.extend(
        key.dimensions()
            .map(|(name, value)| format!("{name}=\"{}\"", label_value(value))),
    );
    if let Some(le) = le {
        pairs.push(format!("le=\"{le}\""));
    }
    format!("{{{}}}", pairs.join(","))
}

/// The text for `series` (ordered by metric, then dimension values).
pub(crate) fn render(series: &[(SeriesKey, Series)], service: &str) -> String {
    let mut out = String::new();
    let mut current: Option<Metric> = None;
    for (key, s) in series {
        let name = key.metric.prometheus_name();
        if current != Some(key.metric) {
            current = Some(key.metric);
            let kind = match s {
                Series::Counter { .. } => "counter",
                Series::Distribution { .. } => "histogram",
            };
            let _ = writeln!(out, "# HELP {name} {}", help_text(key.metric.help()));
            let _ = writeln!(out, "# TYPE {name} {kind}");
        }
        match s {
            Series::Counter { total, .. } => {
                let _ = writeln!(out, "{name}{} {total}", labels(service, key, None));
            }
            Series::Distribution { total, .. } => {
                let mut cumulative = 0;
                for (le, n) in BUCKETS_MS.iter().zip(total.buckets) {
                    cumulative += n;
                    let le = le.to_string();
                    let _ = writeln!(
                        out,
                        "{name}_bucket{} {cumulative}",
                        labels(service, key, Some(&le))
                    );
                }
                let _ = writeln!(
                    out,
                    "{name}_bucket{} {}",
                    labels(service, key, Some("+Inf")),
                    total.count
                );
                let plain = labels(service, key, None);
                let _ = writeln!(out, "{name}_sum{plain} {}", total.sum);
                let _ = writeln!(out, "{name}_count{plain} {}", total.count);
            }
        }
    }
    out
}

/// Reads one sample back: the value of `name` whose labels include every `(label, value)` in
/// `want`, summed over the series that match (so `[("status", "SUCCEEDED")]` adds up every
/// reason). For the benchmark and tests, which read `GET /__metrics` back.
pub fn sample(text: &str, name: &str, want: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, labels) = match series.split_once('{') {
                Some((m, rest)) => (m, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            if metric != name {
                return None;
            }
            let all = want.iter().all(|(k, v)| {
                labels
                    .split(',')
                    .any(|pair| pair == format!("{k}=\"{}\"", label_value(v)))
            });
            all.then(|| value.parse::<f64>().ok()).flatten()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Registry;

    #[test]
    fn a_known_registry_renders_to_exact_text() {
        let r = Registry::new();
        r.count(
            Metric::UpstreamCalls,
            &[("route", "reserve"), ("outcome", "ok")],
            2,
        );
        r.count(
            Metric::UpstreamCalls,
            &[("route", "charge"), ("outcome", "timeout")],
            1,
        );
        r.count(Metric::SeatClaimsTaken, &[], 3);
        r.observe_ms(Metric::TimeToTerminal, &[("status", "SUCCEEDED")], 7);
        r.observe_ms(Metric::TimeToTerminal, &[("status", "SUCCEEDED")], 400);
        r.observe_ms(Metric::TimeToTerminal, &[("status", "SUCCEEDED")], 400_000);
        let text = r.prometheus("lo\"cal");
        let l = r#"service="lo\"cal",status="SUCCEEDED""#;
        let expected = format!(
            "# HELP seatgate_upstream_calls_total {}\n\
             # TYPE seatgate_upstream_calls_total counter\n\
             seatgate_upstream_calls_total{{service=\"lo\\\"cal\",route=\"charge\",outcome=\"timeout\"}} 1\n\
             seatgate_upstream_calls_total{{service=\"lo\\\"cal\",route=\"reserve\",outcome=\"ok\"}} 2\n\
             # HELP seatgate_time_to_terminal_milliseconds {}\n\
             # TYPE seatgate_time_to_terminal_milliseconds histogram\n\
             seatgate_time_to_terminal_milliseconds_bucket{{{l},le=\"5\"}} 0\n\
             seatgate_time_to_terminal_milliseconds_bucket{{{l},le=\"10\"}} 1\n\
             seatgate_time_to_terminal_milliseconds_bucket{{{l},le=\"25\"}} 1\n\
             seatgate_time_to_terminal_milliseconds_bucket{{{l},le=\"50\"}} 1\n\
             seatgate_time_to_terminal_milliseconds_bucket{{{l},le=\"100\"}} 1\n\
             seatgate_time_to_terminal_milliseconds_bucket{{{l},le=\"250\"}} 1\n\
             seatgate_time_to_terminal_milliseconds_bucket{{{l},le=\"500\"}} 2\n\
             seatgate_time_to_terminal_milliseconds_bucket{{{l},le=\"1000\"}} 2\n\
             seatgate_time_to_terminal_milliseconds_bucket{{{l},le=\"2500\"}} 2\n\
             seatgate_time_to_terminal_milliseconds_bucket{{{l},le=\"5000\"}} 2\n\
             seatgate_time_to_terminal_milliseconds_bucket{{{l},le=\"10000\"}} 2\n\
             seatgate_time_to_terminal_milliseconds_bucket{{{l},le=\"30000\"}} 2\n\
             seatgate_time_to_terminal_milliseconds_bucket{{{l},le=\"60000\"}} 2\n\
             seatgate_time_to_terminal_milliseconds_bucket{{{l},le=\"300000\"}} 2\n\
             seatgate_time_to_terminal_milliseconds_bucket{{{l},le=\"+Inf\"}} 3\n\
             seatgate_time_to_terminal_milliseconds_sum{{{l}}} 400407\n\
             seatgate_time_to_terminal_milliseconds_count{{{l}}} 3\n\
             # HELP seatgate_seat_claims_taken_total {}\n\
             # TYPE seatgate_seat_claims_taken_total counter\n\
             seatgate_seat_claims_taken_total{{service=\"lo\\\"cal\"}} 3\n",
            Metric::UpstreamCalls.help(),
            Metric::TimeToTerminal.help(),
            Metric::SeatClaimsTaken.help(),
        );
        assert_eq!(text, expected);
        assert_eq!(
            sample(
                &text,
                "seatgate_upstream_calls_total",
                &[("route", "reserve")]
            ),
            2.0
        );
        assert_eq!(sample(&text, "seatgate_upstream_calls_total", &[]), 3.0);
        assert_eq!(
            sample(&text, "seatgate_time_to_terminal_milliseconds_count", &[]),
            3.0
        );
        assert_eq!(sample(&text, "seatgate_bookings_total", &[]), 0.0);
    }

    #[test]
    fn help_and_label_values_are_escaped() {
        assert_eq!(label_value("a\\b\"c\nd"), r#"a\\b\"c\nd"#);
        assert_eq!(help_text("a\\b\nc\""), r#"a\\b\nc""#);
    }
}
