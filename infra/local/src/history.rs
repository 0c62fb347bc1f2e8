//! The ops page's memory of the last ten minutes: what `GET /__metrics`, `GET /__ops` and the
//! watched flights said, once a second, so the page can draw *when* things happened and not only
//! how many since the start.
//!
//! A background task ([`sample_loop`]) takes one [`Sample`] a second: the metric registry's
//! totals (the very text `GET /__metrics` serves, read back, so the history is of exactly those
//! figures), the breaker and the active `Retry-After` pauses (`BreakerStates::breaker()` and
//! `pauses()`, as `GET /__ops` reads them, never the services' own cached copies, which the
//! sampler must not warm or change), both queues' depths, and the remaining stock of the
//! flights being watched. `GET /__ops/history` serves them as JSON ([`History::json`]), with
//! `since` so the page fetches the whole window once and then only what is new.
//!
//! Shape and cost. A counter is kept as the *difference* from the previous sample (the page's
//! per-second rate is that difference over the interval), and only for the series that moved,
//! so a quiet second costs a few bytes and a busy one a few bytes per series that changed. The
//! series' names are interned once ([`MAX_SERIES`] at most: the registry's label values are
//! `&'static str`, so its series are a fixed catalogue, about 250 with every histogram bucket).
//! The ring holds [`CAPACITY`] samples (ten minutes at one a second) and drops the oldest, so
//! memory is bounded whatever runs through the stack:
//!
//! - per sample, `size_of::<Sample>()` (160 bytes, the ring's 600 slots allocated at once) plus
//!   8 bytes per series that changed in that second, 16 per active pause, 24 per watched flight;
//! - at most, with [`MAX_SERIES`] series moving every second and every pause and watched flight
//!   present: 600 x (160 + 512 x 8 + 4 x 16 + 8 x 24) bytes plus the interned names, about
//!   2.8 MB ([`History::bound_bytes`]; a unit test fills the ring past it and checks);
//! - in practice a few hundred KB: 1,000-user bursts one after another, with outages and sales,
//!   move about 20 series a second (55 at most; the reaper's pass histogram alone moves 16), and
//!   ten minutes of that with 8 flights watched held 316 kB.
//!   `GET /__ops/history` reports the estimate for the samples held now
//!   ([`History::memory_bytes`]), and the ops page shows it.
//!
//! The store reads a sample costs (the breaker item, the pauses item, the queues' depths, one
//! inventory query per watched flight, at most [`MAX_WATCHED_FLIGHTS`]) are each bounded by
//! [`READ_TIMEOUT`], so a slow store leaves a gap marked unknown rather than a late sample.
//! Only a runner that serves the API samples: the history is served on its listener.

use seatgate::domain::{BreakerPhase, BreakerState, FlightId, Millis, UpstreamRoute};
use seatgate::ports::{BreakerStates, Flights, QueueAdmin, QueueDepths};
use serde_json::{Map, Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::watch;

/// One sample a second: the resolution of every chart on the ops page.
pub const RESOLUTION: Duration = Duration::from_secs(1);

/// Samples kept: ten minutes at [`RESOLUTION`].
pub const CAPACITY: usize = 600;

/// Distinct metric series the history names. The registry's catalogue has about 250 (every
/// histogram bucket of every status); a series past this bound is not kept (and counted in
/// `series_dropped`), so a future catalogue cannot grow the history without bound.
pub const MAX_SERIES: usize = 512;

/// Flights whose stock is sampled: the most recently created through this runner or looked at
/// on the ops page.
pub const MAX_WATCHED_FLIGHTS: usize = 8;

/// Longest a sample waits for one store read before marking that figure unknown.
pub const READ_TIMEOUT: Duration = Duration::from_millis(800);

/// The breaker as one sample saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerMark {
    /// The store could not be read (or not in time).
    Unknown,
    Known {
        phase: PhaseMark,
        generation: u64,
        since: Millis,
        until: Option<Millis>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseMark {
    Closed,
    Open,
    Probing,
}

impl PhaseMark {
    fn as_str(self) -> &'static str {
        match self {
            PhaseMark::Closed => "closed",
            PhaseMark::Open => "open",
            PhaseMark::Probing => "probing",
        }
    }
}

impl From<&BreakerState> for BreakerMark {
    fn from(state: &BreakerState) -> Self {
        let (phase, until) = match &state.phase {
            BreakerPhase::Closed => (PhaseMark::Closed, None),
            BreakerPhase::Open { until } => (PhaseMark::Open, Some(*until)),
            BreakerPhase::Probing { until, .. } => (PhaseMark::Probing, Some(*until)),
        };
        BreakerMark::Known {
            phase,
            generation: state.generation,
            since: state.since,
            until,
        }
    }
}

/// What one sample read besides the metrics.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub breaker: Option<BreakerMark>,
    /// Active pauses; `None` when they could not be read.
    pub pauses: Option<Vec<(UpstreamRoute, Millis)>>,
    pub queues: Option<QueueDepths>,
    /// Each watched flight's seats left; a flight that could not be read is absent.
    pub flights: Vec<(Arc<str>, u32)>,
}

/// One second of history.
#[derive(Debug, Clone)]
struct Sample {
    at: Millis,
    /// Since the previous sample; 0 for the first, whose counters are the baseline.
    interval_ms: u32,
    /// `(series, increase)` for each series that moved since the previous sample.
    deltas: Box<[(u16, u32)]>,
    breaker: BreakerMark,
    pauses: Option<Box<[(UpstreamRoute, Millis)]>>,
    queues: Option<QueueDepths>,
    flights: Box<[(Arc<str>, u32)]>,
}

#[derive(Debug, Clone)]
struct SeriesName {
    metric: String,
    labels: Vec<(String, String)>,
}

#[derive(Default)]
struct Inner {
    series: Vec<SeriesName>,
    /// The series text of a `/__metrics` line (`name{labels}`) -> its index in `series`.
    index: HashMap<String, u16>,
    /// The previous sample's totals, by series index.
    totals: Vec<u64>,
    samples: VecDeque<Sample>,
    /// Most recently watched last.
    watched: VecDeque<Arc<str>>,
    series_dropped: u64,
}

/// The ring of samples, shared by the sampling task and the route that serves it.
pub struct History {
    /// When this history began: a page that saw another value is talking to a restarted
    /// runner, whose series indices and samples are not the ones it holds.
    started: Millis,
    inner: Mutex<Inner>,
}

impl Default for History {
    fn default() -> Self {
        History::new()
    }
}

impl History {
    /// The ring is allocated whole (about 96 KB): grown by doubling it would end at 1,024 slots.
    pub fn new() -> Self {
        History {
            started: Millis::now(),
            inner: Mutex::new(Inner {
                samples: VecDeque::with_capacity(CAPACITY),
                totals: Vec::with_capacity(MAX_SERIES),
                ..Inner::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Samples `flight` from now on (it moves to the front if already watched); the oldest
    /// watched flight is dropped past [`MAX_WATCHED_FLIGHTS`].
    pub fn watch(&self, flight: &FlightId) {
        let mut inner = self.lock();
        let name = flight.as_str();
        if let Some(i) = inner.watched.iter().position(|f| &**f == name) {
            let f = inner.watched.remove(i).expect("position found it");
            inner.watched.push_back(f);
            return;
        }
        inner.watched.push_back(Arc::from(name));
        while inner.watched.len() > MAX_WATCHED_FLIGHTS {
            inner.watched.pop_front();
        }
    }

    /// The watched flights, most recent first.
    pub fn watched(&self) -> Vec<Arc<str>> {
        self.lock().watched.iter().rev().cloned().collect()
    }

    /// Adds the sample taken at `at`: `metrics` is the Prometheus text of the registry.
    pub fn record(&self, at: Millis, metrics: &str, observed: Observed) {
        let mut inner = self.lock();
        let first = inner.samples.is_empty() && inner.totals.is_empty();
        let mut deltas = Vec::new();
        for (series, value) in counter_lines(metrics) {
            let Some(i) = inner.intern(series) else {
                continue;
            };
            let slot = usize::from(i);
            if inner.totals.len() <= slot {
                inner.totals.resize(slot + 1, 0);
            }
            let before = std::mem::replace(&mut inner.totals[slot], value);
            let moved = value.saturating_sub(before);
            if moved > 0 && !first {
                deltas.push((i, u32::try_from(moved).unwrap_or(u32::MAX)));
            }
        }
        let interval_ms = inner.samples.back().map_or(0, |prev| {
            u32::try_from((at.0 - prev.at.0).max(0)).unwrap_or(u32::MAX)
        });
        if inner.samples.len() == CAPACITY {
            inner.samples.pop_front();
        }
        inner.samples.push_back(Sample {
            at,
            interval_ms,
            deltas: deltas.into_boxed_slice(),
            breaker: observed.breaker.unwrap_or(BreakerMark::Unknown),
            pauses: observed.pauses.map(Vec::into_boxed_slice),
            queues: observed.queues,
            flights: observed.flights.into_boxed_slice(),
        });
    }

    /// Samples held now.
    pub fn len(&self) -> usize {
        self.lock().samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An estimate of the heap this history holds now: the ring's slots, what each sample
    /// points to, the interned names and their index. Allocator overhead is not counted.
    pub fn memory_bytes(&self) -> usize {
        let inner = self.lock();
        let slots = inner.samples.capacity() * size_of::<Sample>();
        let per_sample: usize = inner
            .samples
            .iter()
            .map(|s| {
                s.deltas.len() * size_of::<(u16, u32)>()
                    + s.pauses
                        .as_ref()
                        .map_or(0, |h| h.len() * size_of::<(UpstreamRoute, Millis)>())
                    + s.flights.len() * size_of::<(Arc<str>, u32)>()
            })
            .sum();
        let names: usize = inner
            .series
            .iter()
            .map(|n| {
                size_of::<SeriesName>()
                    + n.metric.capacity()
                    + n.labels
                        .iter()
                        .map(|(k, v)| size_of::<(String, String)>() + k.capacity() + v.capacity())
                        .sum::<usize>()
            })
            .sum();
        let index: usize = inner
            .index
            .keys()
            .map(|k| k.capacity() + size_of::<(String, u16)>() + 8)
            .sum();
        let watched: usize = inner.watched.iter().map(|f| f.len() + 16).sum();
        slots + per_sample + names + index + inner.totals.capacity() * 8 + watched
    }

    /// The most this history can hold, by the bounds above: every slot full, every series
    /// moving every second, every pause and watched flight present; names at their longest
    /// seen in the registry (128 bytes a series, generously).
    pub fn bound_bytes() -> usize {
        let per_sample = size_of::<Sample>()
            + MAX_SERIES * size_of::<(u16, u32)>()
            + UpstreamRoute::ALL.len() * size_of::<(UpstreamRoute, Millis)>()
            + MAX_WATCHED_FLIGHTS * size_of::<(Arc<str>, u32)>();
        let names = MAX_SERIES * (size_of::<SeriesName>() + 128 + size_of::<(String, u16)>() + 8);
        CAPACITY * per_sample + names + MAX_SERIES * 8 + MAX_WATCHED_FLIGHTS * (64 + 16)
    }

    /// The samples taken after `since` (all of them without it), and the series named from
    /// index `series_from` on, so a page that has the earlier ones asks only for what is new.
    pub fn json(&self, since: Option<i64>, series_from: usize) -> Value {
        let memory = self.memory_bytes();
        let inner = self.lock();
        let series: Vec<Value> = inner
            .series
            .iter()
            .enumerate()
            .skip(series_from)
            .map(|(i, s)| {
                let labels: Map<String, Value> = s
                    .labels
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                    .collect();
                json!({ "i": i, "metric": s.metric, "labels": labels })
            })
            .collect();
        let samples: Vec<Value> = inner
            .samples
            .iter()
            .filter(|s| since.is_none_or(|t| s.at.0 > t))
            .map(sample_json)
            .collect();
        json!({
            "started": self.started,
            "resolution_ms": RESOLUTION.as_millis() as u64,
            "capacity": CAPACITY,
            "held": inner.samples.len(),
            "memory_bytes": memory,
            "memory_bound_bytes": History::bound_bytes(),
            "series_total": inner.series.len(),
            "series_dropped": inner.series_dropped,
            "series": series,
            "watched_flights": inner.watched.iter().rev().map(|f| &**f).collect::<Vec<_>>(),
            "samples": samples,
        })
    }
}

impl Inner {
    fn intern(&mut self, series: &str) -> Option<u16> {
        if let Some(i) = self.index.get(series) {
            return Some(*i);
        }
        if self.series.len() >= MAX_SERIES {
            self.series_dropped += 1;
            return None;
        }
        let name = parse_series(series)?;
        let i = u16::try_from(self.series.len()).ok()?;
        self.series.push(name);
        self.index.insert(series.to_owned(), i);
        Some(i)
    }
}

fn sample_json(s: &Sample) -> Value {
    let breaker = match s.breaker {
        BreakerMark::Unknown => Value::Null,
        BreakerMark::Known {
            phase,
            generation,
            since,
            until,
        } => json!({
            "phase": phase.as_str(),
            "generation": generation,
            "since": since,
            "until": until,
        }),
    };
    let pauses = s.pauses.as_ref().map(|h| {
        h.iter()
            .map(|(route, until)| json!({ "route": route.as_str(), "until": until }))
            .collect::<Vec<_>>()
    });
    let queues = s.queues.map(|q| {
        json!({
            "ready": q.seat_messages.ready,
            "in_flight": q.seat_messages.in_flight,
            "dead": q.seat_messages.dead,
            "events_ready": q.webhook_deliveries.ready,
            "events_in_flight": q.webhook_deliveries.in_flight,
            "events_dead": q.webhook_deliveries.dead,
        })
    });
    let flights: Map<String, Value> = s
        .flights
        .iter()
        .map(|(id, available)| (id.to_string(), Value::from(*available)))
        .collect();
    json!({
        "at": s.at,
        "interval_ms": s.interval_ms,
        "d": s.deltas.iter().map(|(i, n)| [u64::from(*i), u64::from(*n)]).collect::<Vec<_>>(),
        "breaker": breaker,
        "pauses": pauses,
        "queues": queues,
        "flights": flights,
    })
}

/// `(series, value)` of each sample line of the Prometheus text, with the `service` label
/// (always the runner's) left out of the series. Every line of the registry's text is
/// monotonic: counters, and a histogram's cumulative buckets, sum and count.
fn counter_lines(text: &str) -> impl Iterator<Item = (&str, u64)> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let value = value
                .parse::<u64>()
                .ok()
                .or_else(|| value.parse::<f64>().ok().map(|v| v.max(0.0) as u64))?;
            Some((series, value))
        })
}

/// `name{k="v",...}` into its metric name and labels (unescaped), without `service`.
fn parse_series(series: &str) -> Option<SeriesName> {
    let (metric, rest) = match series.split_once('{') {
        Some((m, rest)) => (m, rest.strip_suffix('}')?),
        None => (series, ""),
    };
    let mut labels = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek() == Some(&',') {
            chars.next();
        }
        let mut key = String::new();
        for c in chars.by_ref() {
            if c == '=' {
                break;
            }
            key.push(c);
        }
        if key.is_empty() {
            break;
        }
        if chars.next() != Some('"') {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '"' => break,
                '\\' => match chars.next()? {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                c => value.push(c),
            }
        }
        if key != seatgate::metrics::SERVICE_DIMENSION {
            labels.push((key, value));
        }
    }
    Some(SeriesName {
        metric: metric.to_owned(),
        labels,
    })
}

/// Where a sample's figures come from.
pub(crate) struct Sources {
    pub(crate) breaker: Arc<dyn BreakerStates>,
    pub(crate) queues: Option<Arc<dyn QueueAdmin>>,
    pub(crate) flights: Arc<dyn Flights>,
}

impl Sources {
    async fn observe(&self, watched: &[Arc<str>]) -> Observed {
        let now = Millis::now();
        let breaker = async {
            match tokio::time::timeout(READ_TIMEOUT, self.breaker.breaker()).await {
                Ok(Ok(state)) => Some(BreakerMark::from(&state)),
                _ => None,
            }
        };
        let pauses = async {
            match tokio::time::timeout(READ_TIMEOUT, self.breaker.pauses()).await {
                Ok(Ok(pauses)) => Some(pauses.active(now).collect::<Vec<_>>()),
                _ => None,
            }
        };
        let queues = async {
            let queues = self.queues.as_ref()?;
            tokio::time::timeout(READ_TIMEOUT, queues.depths())
                .await
                .ok()?
                .ok()
        };
        let flights = async {
            let mut left = Vec::with_capacity(watched.len());
            for name in watched {
                let Ok(id) = FlightId::parse(name) else {
                    continue;
                };
                if let Ok(Ok(Some(inventory))) =
                    tokio::time::timeout(READ_TIMEOUT, self.flights.inventory(&id)).await
                {
                    left.push((Arc::clone(name), inventory.available()));
                }
            }
            left
        };
        let (breaker, pauses, queues, flights) = tokio::join!(breaker, pauses, queues, flights);
        Observed {
            breaker,
            pauses,
            queues,
            flights,
        }
    }
}

/// Samples into `history` once a second, on whole wall-clock seconds (so a row of the page's
/// tables is one second of the clock), until `stop`.
pub(crate) async fn sample_loop(
    history: Arc<History>,
    sources: Sources,
    mut stop: watch::Receiver<bool>,
) {
    let into_second = Millis::now().0.rem_euclid(1000) as u64;
    let start = tokio::time::Instant::now() + Duration::from_millis(1000 - into_second);
    let mut ticks = tokio::time::interval_at(start, RESOLUTION);
    // A late tick (a busy runtime) is taken late, not twice: the interval is measured anyway.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        let at = Millis::now();
        let text = seatgate::metrics::prometheus_text("local");
        let watched = history.watched();
        let observed = sources.observe(&watched).await;
        history.record(at, &text, observed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(calls_ok: u64, calls_failed: u64) -> String {
        format!(
            "# HELP seatgate_upstream_calls_total Calls.\n\
             # TYPE seatgate_upstream_calls_total counter\n\
             seatgate_upstream_calls_total{{service=\"local\",route=\"seat\",outcome=\"ok\"}} {calls_ok}\n\
             seatgate_upstream_calls_total{{service=\"local\",route=\"seat\",outcome=\"failed\"}} {calls_failed}\n\
             seatgate_time_to_terminal_milliseconds_bucket{{service=\"local\",status=\"SUCCEEDED\",le=\"+Inf\"}} 3\n"
        )
    }

    fn deltas(h: &History) -> Vec<Vec<(u16, u32)>> {
        h.lock().samples.iter().map(|s| s.deltas.to_vec()).collect()
    }

    #[test]
    fn counters_are_kept_as_increases_between_samples_and_the_first_is_the_baseline() {
        let h = History::new();
        h.record(Millis(1_000), &text(5, 0), Observed::default());
        h.record(Millis(2_000), &text(5, 0), Observed::default());
        h.record(Millis(3_000), &text(9, 2), Observed::default());
        assert_eq!(deltas(&h), vec![vec![], vec![], vec![(0, 4), (1, 2)]]);
        let body = h.json(None, 0);
        assert!(body["started"].as_i64().unwrap() > 0);
        assert_eq!(body["series_total"], 3);
        assert_eq!(
            body["series"][1],
            json!({ "i": 1, "metric": "seatgate_upstream_calls_total",
                    "labels": { "route": "seat", "outcome": "failed" } })
        );
        assert_eq!(
            body["series"][2]["labels"],
            json!({ "status": "SUCCEEDED", "le": "+Inf" })
        );
        assert_eq!(body["samples"][2]["d"], json!([[0, 4], [1, 2]]));
        assert_eq!(body["samples"][2]["interval_ms"], 1000);
        assert_eq!(body["samples"][0]["interval_ms"], 0);
        // Only what is new: samples after `since`, series from `series_from`.
        let later = h.json(Some(2_000), 3);
        assert_eq!(later["samples"].as_array().unwrap().len(), 1);
        assert_eq!(later["series"], json!([]));
    }

    #[test]
    fn a_series_that_appears_later_counts_from_zero() {
        let h = History::new();
        h.record(Millis(1_000), "", Observed::default());
        h.record(
            Millis(2_000),
            "seatgate_bookings_total{service=\"local\",outcome=\"booked\"} 7\n",
            Observed::default(),
        );
        assert_eq!(deltas(&h), vec![vec![], vec![(0, 7)]]);
    }

    #[test]
    fn the_ring_keeps_ten_minutes_and_memory_stays_under_the_stated_bound() {
        let h = History::new();
        // A busy catalogue: 300 series, every one moving every second, for twelve minutes.
        let busy = |t: u64| -> String {
            (0..300)
                .map(|i| {
                    format!(
                        "seatgate_upstream_calls_total{{service=\"local\",route=\"r{i}\",outcome=\"ok\"}} {}\n",
                        t * (i + 1)
                    )
                })
                .collect()
        };
        for flight in 0..(MAX_WATCHED_FLIGHTS + 3) {
            h.watch(&FlightId::parse(&format!("F-{flight}")).unwrap());
        }
        let flights: Vec<(Arc<str>, u32)> = h.watched().into_iter().map(|f| (f, 10)).collect();
        assert_eq!(flights.len(), MAX_WATCHED_FLIGHTS);
        assert_eq!(&*flights[0].0, "F-10", "most recent first");
        for t in 0..(CAPACITY as u64 + 120) {
            h.record(
                Millis(t as i64 * 1000),
                &busy(t),
                Observed {
                    breaker: Some(BreakerMark::from(&BreakerState::closed())),
                    pauses: Some(vec![(UpstreamRoute::Seat, Millis(1)); 4]),
                    queues: Some(QueueDepths::default()),
                    flights: flights.clone(),
                },
            );
        }
        assert_eq!(h.len(), CAPACITY);
        assert_eq!(h.lock().samples.capacity(), CAPACITY, "the ring never grew");
        let body = h.json(None, 0);
        assert_eq!(body["samples"][0]["at"], 120_000, "the oldest were dropped");
        let used = h.memory_bytes();
        assert!(
            used < History::bound_bytes(),
            "{used} >= {}",
            History::bound_bytes()
        );
        // The module doc's figures: the bound about 2.9 MB, this busy case well under it.
        assert!(
            History::bound_bytes() < 3_200_000,
            "{}",
            History::bound_bytes()
        );
        assert!(
            used > 300 * 8 * CAPACITY,
            "{used}: the estimate counts the deltas"
        );
        assert!(size_of::<Sample>() <= 192, "{}", size_of::<Sample>());
    }

    #[test]
    fn series_past_the_bound_are_counted_not_kept() {
        let h = History::new();
        let many: String = (0..(MAX_SERIES + 10))
            .map(|i| format!("seatgate_x_total{{service=\"local\",k=\"{i}\"}} 1\n"))
            .collect();
        h.record(Millis(0), &many, Observed::default());
        let body = h.json(None, 0);
        assert_eq!(body["series_total"], MAX_SERIES);
        assert_eq!(body["series_dropped"], 10);
    }

    #[test]
    fn labels_are_unescaped_and_service_is_left_out() {
        let s = parse_series(r#"m_total{service="local",a="x\"y",b="p\\q",c="l\n"}"#).unwrap();
        assert_eq!(s.metric, "m_total");
        assert_eq!(
            s.labels,
            vec![
                ("a".into(), "x\"y".into()),
                ("b".into(), "p\\q".into()),
                ("c".into(), "l\n".into())
            ]
        );
        assert!(parse_series("plain_total").unwrap().labels.is_empty());
        assert!(parse_series("bad{a=x}").is_none());
    }

    #[test]
    fn breaker_and_pauses_are_kept_per_sample() {
        let h = History::new();
        let open = BreakerState::closed().opened(Millis(10_000), Duration::from_secs(5));
        h.record(
            Millis(11_000),
            "",
            Observed {
                breaker: Some(BreakerMark::from(&open)),
                pauses: Some(vec![(UpstreamRoute::Reserve, Millis(40_000))]),
                queues: None,
                flights: vec![(Arc::from("F-1"), 3)],
            },
        );
        h.record(Millis(12_000), "", Observed::default());
        let body = h.json(None, 0);
        assert_eq!(
            body["samples"][0]["breaker"],
            json!({ "phase": "open", "generation": 1, "since": 10_000, "until": 15_000 })
        );
        assert_eq!(
            body["samples"][0]["pauses"],
            json!([{ "route": "reserve", "until": 40_000 }])
        );
        assert_eq!(body["samples"][0]["flights"], json!({ "F-1": 3 }));
        assert_eq!(body["samples"][0]["queues"], Value::Null);
        // Unread figures are null, never a made-up closed breaker or zero.
        assert_eq!(body["samples"][1]["breaker"], Value::Null);
        assert_eq!(body["samples"][1]["pauses"], Value::Null);
    }
}
