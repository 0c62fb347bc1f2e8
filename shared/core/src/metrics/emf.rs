//! CloudWatch Embedded Metric Format, as Powertools writes it: one JSON object per line, whose
//! `_aws` member tells CloudWatch Logs which members are metrics (namespace, dimension set,
//! names and units) and whose other members are the dimension values and the metric values.
//!
//! Series with the same dimension names and values share a line (a dimension set is one
//! directive), at most 100 metrics to a line (CloudWatch's limit per directive). A counter is a
//! number; a distribution is `{"Values", "Counts", "Max", "Min", "Count", "Sum"}` with at most
//! 100 bins (CloudWatch drops larger ones): exact values while there are few enough, else
//! folded into logarithmic bins that widen until they fit, like the EMF client libraries.

use super::registry::{Series, SeriesKey};
use super::{Metric, NAMESPACE, SERVICE_DIMENSION};
use std::collections::BTreeMap;
use std::fmt::Write;

/// CloudWatch's limit of metrics per directive, and of values per metric.
pub const MAX_PER_LINE: usize = 100;
pub const MAX_BINS: usize = 100;

type Group = (Vec<&'static str>, Vec<&'static str>);

/// A JSON string literal.
fn string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// The lines for `series` (what one flush took), in a stable order. Written by hand rather
/// than through `serde_json::Map`, whose key order depends on a crate feature: the member order
/// is Powertools' (`_aws` first, then the dimensions, then the metrics).
pub(crate) fn render(
    series: &[(SeriesKey, Series)],
    service: &str,
    timestamp_ms: i64,
) -> Vec<String> {
    let mut groups: BTreeMap<Group, Vec<(Metric, String)>> = BTreeMap::new();
    for (key, s) in series {
        let value = match s {
            Series::Counter { pending, .. } if *pending > 0 => pending.to_string(),
            Series::Distribution { pending, .. } if !pending.is_empty() => distribution(pending),
            _ => continue,
        };
        let (names, values) = key.dimensions().unzip();
        groups
            .entry((names, values))
            .or_default()
            .push((key.metric, value));
    }
    let mut lines = Vec::new();
    for ((names, values), metrics) in groups {
        let dimension_set: Vec<String> = std::iter::once(SERVICE_DIMENSION)
            .chain(names.iter().copied())
            .map(string)
            .collect();
        for chunk in metrics.chunks(MAX_PER_LINE) {
            let definitions: Vec<String> = chunk
                .iter()
                .map(|(m, _)| {
                    format!(
                        r#"{{"Name":{},"Unit":{}}}"#,
                        string(m.name()),
                        string(m.unit().as_str())
                    )
                })
                .collect();
            let mut line = format!(
                r#"{{"_aws":{{"Timestamp":{timestamp_ms},"CloudWatchMetrics":[{{"Namespace":{},"Dimensions":[[{}]],"Metrics":[{}]}}]}},{}:{}"#,
                string(NAMESPACE),
                dimension_set.join(","),
                definitions.join(","),
                string(SERVICE_DIMENSION),
                string(service),
            );
            for (name, value) in names.iter().zip(&values) {
                let _ = write!(line, ",{}:{}", string(name), string(value));
            }
            for (metric, value) in chunk {
                let _ = write!(line, ",{}:{value}", string(metric.name()));
            }
            line.push('}');
            lines.push(line);
        }
    }
    lines
}

/// `{"Values", "Counts", "Max", "Min", "Count", "Sum"}` of the values (ms -> how often).
fn distribution(values: &BTreeMap<u64, u64>) -> String {
    let count: u64 = values.values().sum();
    let sum: u64 = values.iter().map(|(v, n)| v * n).sum();
    let min = values.keys().next().copied().unwrap_or(0);
    let max = values.keys().next_back().copied().unwrap_or(0);
    let (vals, counts): (Vec<String>, Vec<String>) = if values.len() <= MAX_BINS {
        values
            .iter()
            .map(|(v, n)| (v.to_string(), n.to_string()))
            .unzip()
    } else {
        bins(values)
            .into_iter()
            .map(|(v, n)| (v.to_string(), n.to_string()))
            .unzip()
    };
    format!(
        r#"{{"Values":[{}],"Counts":[{}],"Max":{max},"Min":{min},"Count":{count},"Sum":{sum}}}"#,
        vals.join(","),
        counts.join(",")
    )
}

/// Logarithmic bins (each value counted at its bin's geometric middle, rounded to 0.1 ms),
/// 10% wide to begin with and doubled in width until at most [`MAX_BINS`] remain. Zero keeps a
/// bin of its own.
fn bins(values: &BTreeMap<u64, u64>) -> Vec<(f64, u64)> {
    let mut width = 1.1f64.ln();
    loop {
        let mut bins: BTreeMap<i64, u64> = BTreeMap::new();
        for (v, n) in values {
            let index = if *v == 0 {
                i64::MIN
            } else {
                ((*v as f64).ln() / width).floor() as i64
            };
            *bins.entry(index).or_insert(0) += n;
        }
        if bins.len() <= MAX_BINS {
            return bins
                .into_iter()
                .map(|(i, n)| {
                    let middle = if i == i64::MIN {
                        0.0
                    } else {
                        (((i as f64) + 0.5) * width).exp()
                    };
                    ((middle * 10.0).round() / 10.0, n)
                })
                .collect();
        }
        width *= 2.0;
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::{Metric, Registry};

    #[test]
    fn a_known_registry_renders_to_exact_lines() {
        let r = Registry::new();
        r.enable_emf();
        r.count(
            Metric::UpstreamCalls,
            &[("route", "reserve"), ("outcome", "ok")],
            2,
        );
        r.count(Metric::ReservePosts, &[("outcome", "ok")], 2);
        r.count(Metric::AttemptsSettled, &[("outcome", "ok")], 1);
        r.count(Metric::SeatClaimsTaken, &[], 1);
        r.observe_ms(Metric::ReaperPassDuration, &[], 12);
        r.observe_ms(Metric::ReaperPassDuration, &[], 30);
        r.observe_ms(Metric::ReaperPassDuration, &[], 12);
        let lines = r.take_emf("worker", 1_700_000_000_000);
        let aws = |dims: &str, metrics: &str| {
            format!(
                r#"{{"_aws":{{"Timestamp":1700000000000,"CloudWatchMetrics":[{{"Namespace":"Seatgate","Dimensions":[[{dims}]],"Metrics":[{metrics}]}}]}},"service":"worker""#
            )
        };
        assert_eq!(
            lines,
            vec![
                format!(
                    r#"{},"ReaperPassDuration":{{"Values":[12,30],"Counts":[2,1],"Max":30,"Min":12,"Count":3,"Sum":54}},"SeatClaimsTaken":1}}"#,
                    aws(
                        r#""service""#,
                        r#"{"Name":"ReaperPassDuration","Unit":"Milliseconds"},{"Name":"SeatClaimsTaken","Unit":"Count"}"#
                    )
                ),
                format!(
                    r#"{},"outcome":"ok","ReservePosts":2,"AttemptsSettled":1}}"#,
                    aws(
                        r#""service","outcome""#,
                        r#"{"Name":"ReservePosts","Unit":"Count"},{"Name":"AttemptsSettled","Unit":"Count"}"#
                    )
                ),
                format!(
                    r#"{},"route":"reserve","outcome":"ok","UpstreamCalls":2}}"#,
                    aws(
                        r#""service","route","outcome""#,
                        r#"{"Name":"UpstreamCalls","Unit":"Count"}"#
                    )
                ),
            ]
        );
        for line in &lines {
            let parsed: serde_json::Value = serde_json::from_str(line).expect("valid JSON");
            assert_eq!(parsed["service"], "worker");
        }
    }

    #[test]
    fn many_distinct_durations_fold_into_at_most_100_bins_and_keep_their_totals() {
        let r = Registry::new();
        r.enable_emf();
        for ms in 0..5_000 {
            r.observe_ms(Metric::TimeToTerminal, &[("status", "SUCCEEDED")], ms);
        }
        let lines = r.take_emf("worker", 0);
        assert_eq!(lines.len(), 1);
        let line: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        let d = &line["TimeToTerminal"];
        let counts: Vec<u64> = serde_json::from_value(d["Counts"].clone()).unwrap();
        let values: Vec<f64> = serde_json::from_value(d["Values"].clone()).unwrap();
        assert!(counts.len() <= 100 && counts.len() > 20, "{}", counts.len());
        assert_eq!(values.len(), counts.len());
        assert_eq!(counts.iter().sum::<u64>(), 5_000);
        assert_eq!(values[0], 0.0, "zero keeps its own bin");
        assert!(values.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            (&d["Count"], &d["Sum"], &d["Min"], &d["Max"]),
            (
                &serde_json::json!(5_000),
                &serde_json::json!(4_999 * 5_000 / 2),
                &serde_json::json!(0),
                &serde_json::json!(4_999)
            )
        );
        assert_eq!(line["status"], "SUCCEEDED");
    }
}
