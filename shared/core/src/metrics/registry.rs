//! The process-wide registry every service records into, and its two readers: the EMF lines a
//! Lambda function prints after each invocation, and the cumulative Prometheus text the local
//! runner serves.
//!
//! Each series is a metric and its dimension values (in the catalogue's order). A counter keeps
//! its total and, while EMF is on, what was added since the last flush; a distribution keeps
//! fixed Prometheus buckets for the total and, while EMF is on, the exact values (in whole
//! milliseconds, with their counts) since the last flush, which the EMF renderer folds into at
//! most 100 bins. The lock is held only to update a map entry, never across an `.await`.
//!
//! Dimension values are `&'static str` on purpose: a value built at run time (an intent id, a
//! seat id) would not compile, so no call can make one CloudWatch metric per seat.

use super::{Metric, Unit, emf, prometheus};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};

/// A metric's own dimensions and their values: `&[("route", "reserve"), ("outcome", "ok")]`.
pub type Dims<'a> = &'a [(&'static str, &'static str)];

/// The value a dimension gets when a call did not give it (or gave an empty one, which
/// CloudWatch rejects).
pub const NONE: &str = "none";

/// One series: a metric and its dimension values, in the order of [`Metric::dimensions`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SeriesKey {
    pub metric: Metric,
    pub values: Vec<&'static str>,
}

impl SeriesKey {
    fn of(metric: Metric, dims: Dims<'_>) -> Self {
        let names = metric.dimensions();
        debug_assert!(
            dims.len() == names.len() && dims.iter().all(|(n, _)| names.contains(n)),
            "{} takes dimensions {names:?}, was given {dims:?}",
            metric.name()
        );
        let values = names
            .iter()
            .map(|name| {
                dims.iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| *v)
                    .filter(|v| !v.is_empty())
                    .unwrap_or(NONE)
            })
            .collect();
        SeriesKey { metric, values }
    }

    /// `(name, value)` of each of the metric's own dimensions.
    pub fn dimensions(&self) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
        self.metric
            .dimensions()
            .iter()
            .copied()
            .zip(self.values.iter().copied())
    }
}

/// Upper bounds (ms) of the Prometheus buckets of every distribution: from a fast API answer
/// to a wait that ends minutes later (`+Inf` takes the rest).
pub const BUCKETS_MS: [u64; 14] = [
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000,
];

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Histogram {
    /// Observations at most `BUCKETS_MS[i]` (not cumulative; the renderer adds them up).
    pub buckets: [u64; BUCKETS_MS.len()],
    pub count: u64,
    pub sum: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Series {
    Counter {
        total: u64,
        pending: u64,
    },
    Distribution {
        total: Histogram,
        /// Value (ms) -> how often, since the last EMF flush.
        pending: BTreeMap<u64, u64>,
    },
}

pub struct Registry {
    emf: AtomicBool,
    series: Mutex<BTreeMap<SeriesKey, Series>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// An empty registry that keeps totals only (EMF off).
    pub const fn new() -> Self {
        Registry {
            emf: AtomicBool::new(false),
            series: Mutex::new(BTreeMap::new()),
        }
    }

    /// From now on also keeps what each EMF flush takes (a Lambda function). Off, nothing
    /// accumulates between flushes that never come (the local runner).
    pub fn enable_emf(&self) {
        self.emf.store(true, Ordering::Relaxed);
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<SeriesKey, Series>> {
        self.series.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `n` to a counter.
    pub fn count(&self, metric: Metric, dims: Dims<'_>, n: u64) {
        debug_assert_eq!(
            metric.unit(),
            Unit::Count,
            "{} is not a count",
            metric.name()
        );
        if n == 0 {
            return;
        }
        let emf = self.emf.load(Ordering::Relaxed);
        let key = SeriesKey::of(metric, dims);
        let mut series = self.lock();
        let entry = series.entry(key).or_insert(Series::Counter {
            total: 0,
            pending: 0,
        });
        if let Series::Counter { total, pending } = entry {
            *total += n;
            if emf {
                *pending += n;
            }
        }
    }

    /// Records one duration, in milliseconds.
    pub fn observe_ms(&self, metric: Metric, dims: Dims<'_>, ms: u64) {
        debug_assert_eq!(
            metric.unit(),
            Unit::Milliseconds,
            "{} is not a duration",
            metric.name()
        );
        let emf = self.emf.load(Ordering::Relaxed);
        let key = SeriesKey::of(metric, dims);
        let mut series = self.lock();
        let entry = series.entry(key).or_insert_with(|| Series::Distribution {
            total: Histogram::default(),
            pending: BTreeMap::new(),
        });
        if let Series::Distribution { total, pending } = entry {
            if let Some(i) = BUCKETS_MS.iter().position(|le| ms <= *le) {
                total.buckets[i] += 1;
            }
            total.count += 1;
            total.sum += ms;
            if emf {
                *pending.entry(ms).or_insert(0) += 1;
            }
        }
    }

    /// What was recorded since the last flush, as EMF lines (one per set of dimension
    /// values), and forgets it. Totals are kept.
    pub fn take_emf(&self, service: &str, timestamp_ms: i64) -> Vec<String> {
        let taken: Vec<(SeriesKey, Series)> = {
            let mut series = self.lock();
            series
                .iter_mut()
                .filter_map(|(key, s)| {
                    let taken = match s {
                        Series::Counter { total, pending } if *pending > 0 => Series::Counter {
                            total: *total,
                            pending: std::mem::take(pending),
                        },
                        Series::Distribution { total, pending } if !pending.is_empty() => {
                            Series::Distribution {
                                total: total.clone(),
                                pending: std::mem::take(pending),
                            }
                        }
                        _ => return None,
                    };
                    Some((key.clone(), taken))
                })
                .collect()
        };
        emf::render(&taken, service, timestamp_ms)
    }

    /// Every series' total, in the Prometheus text exposition format.
    pub fn prometheus(&self, service: &str) -> String {
        let snapshot: Vec<(SeriesKey, Series)> = self
            .lock()
            .iter()
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect();
        prometheus::render(&snapshot, service)
    }
}

static GLOBAL: Registry = Registry::new();
static SERVICE: RwLock<&str> = RwLock::new("unknown");

/// The registry of this process.
pub fn global() -> &'static Registry {
    &GLOBAL
}

/// Adds `n` to a counter of the process-wide registry:
/// `metrics::count(Metric::Confirms, &[("kind", "fresh")], 1)`.
pub fn count(metric: Metric, dims: Dims<'_>, n: u64) {
    GLOBAL.count(metric, dims, n);
}

/// Records a duration in the process-wide registry:
/// `metrics::observe_ms(Metric::TimeToTerminal, &[("status", "SUCCEEDED")], 840)`.
pub fn observe_ms(metric: Metric, dims: Dims<'_>, ms: u64) {
    GLOBAL.observe_ms(metric, dims, ms);
}

/// A Lambda function's start: its `service` dimension, and EMF kept for [`flush_emf`].
pub fn emit_emf_as(service: &'static str) {
    *SERVICE.write().unwrap_or_else(PoisonError::into_inner) = service;
    GLOBAL.enable_emf();
}

/// Prints what was recorded since the last flush to stdout, one EMF line per metric set, for
/// the Lambda service to extract from the function's log. Called after every invocation.
pub fn flush_emf() {
    let service = *SERVICE.read().unwrap_or_else(PoisonError::into_inner);
    let lines = GLOBAL.take_emf(service, crate::domain::Millis::now().0);
    if lines.is_empty() {
        return;
    }
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for line in lines {
        // A log line that cannot be written cannot be reported either.
        let _ = writeln!(out, "{line}");
    }
    let _ = out.flush();
}

/// The process-wide totals as Prometheus text, under `service` (`local` for the runner).
pub fn prometheus_text(service: &str) -> String {
    GLOBAL.prometheus(service)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_take_the_catalogues_dimension_order_and_a_value_for_each() {
        let a = SeriesKey::of(
            Metric::UpstreamCalls,
            &[("outcome", "ok"), ("route", "reserve")],
        );
        assert_eq!(a.values, vec!["reserve", "ok"]);
        let r = Registry::new();
        r.count(
            Metric::UpstreamCalls,
            &[("route", "seat"), ("outcome", "")],
            2,
        );
        r.count(
            Metric::UpstreamCalls,
            &[("route", "seat"), ("outcome", "")],
            3,
        );
        let series = r.lock();
        let (key, s) = series.iter().next().unwrap();
        assert_eq!(key.values, vec!["seat", NONE]);
        assert_eq!(
            *s,
            Series::Counter {
                total: 5,
                pending: 0
            }
        );
    }

    #[test]
    fn a_flush_takes_what_came_since_the_last_and_totals_stay() {
        let r = Registry::new();
        r.enable_emf();
        r.count(Metric::SeatClaimsTaken, &[], 2);
        r.observe_ms(Metric::ReaperPassDuration, &[], 7);
        assert_eq!(r.take_emf("worker", 0).len(), 1);
        assert!(r.take_emf("worker", 0).is_empty(), "nothing new");
        r.count(Metric::SeatClaimsTaken, &[], 1);
        let lines = r.take_emf("worker", 0);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains("\"SeatClaimsTaken\":1"), "{}", lines[0]);
        assert!(!lines[0].contains("ReaperPassDuration"), "{}", lines[0]);
        assert!(
            r.prometheus("worker")
                .contains("seatgate_seat_claims_taken_total{service=\"worker\"} 3\n")
        );
    }

    #[test]
    fn with_emf_off_nothing_waits_for_a_flush() {
        let r = Registry::new();
        r.count(Metric::SeatClaimsTaken, &[], 2);
        r.observe_ms(Metric::ReaperPassDuration, &[], 7);
        assert!(r.take_emf("local", 0).is_empty());
    }
}
