//! The ops page's history (`GET /__ops/history`) and flight view (`GET /__ops/flights[/{id}]`)
//! over HTTP, without a browser: during an upstream outage the per-second calls stop while the
//! breaker is open but for one probe per open phase, and every call the simulator received is in
//! exactly one second of the history; during a flash sale the watched flight's stock is sampled
//! down to zero and the bookings per second add up to the seats sold. The routes answer only a
//! loopback `Host`, like the ops page's others.
//!
//! Its own test binary, and one test in it: the metric registry is process-wide, and the
//! history's sums are compared with the simulator's exact counts.

use reqwest::{Client, StatusCode};
use seatgate::config::Timing;
use seatgate_local::history::{CAPACITY, History};
use seatgate_local::{RunnerConfig, start};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use upstream_sim::Faults;

mod common;
use common::dev_token;

async fn get(client: &Client, url: &str) -> Value {
    let resp = client.get(url).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "{url}");
    resp.json().await.unwrap()
}

/// The history's series and samples, with each sample's per-series increases by name.
struct Seen {
    series: Vec<Value>,
    samples: Vec<Value>,
}

impl Seen {
    async fn fetch(client: &Client, api: &str) -> Seen {
        let body = get(client, &format!("{api}/__ops/history")).await;
        assert!(
            body["memory_bytes"].as_u64().unwrap() <= body["memory_bound_bytes"].as_u64().unwrap()
        );
        assert_eq!(body["memory_bound_bytes"], History::bound_bytes());
        assert!(body["held"].as_u64().unwrap() <= CAPACITY as u64);
        Seen {
            series: body["series"].as_array().unwrap().clone(),
            samples: body["samples"].as_array().unwrap().clone(),
        }
    }

    /// A sample's increase of `metric`, over the series whose labels include `want`.
    fn moved(&self, sample: &Value, metric: &str, want: &[(&str, &str)]) -> u64 {
        sample["d"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|pair| {
                let series = &self.series[pair[0].as_u64()? as usize];
                let matches = series["metric"] == metric
                    && want.iter().all(|(k, v)| series["labels"][k] == *v);
                matches.then(|| pair[1].as_u64()).flatten()
            })
            .sum()
    }

    fn total(&self, metric: &str, want: &[(&str, &str)]) -> u64 {
        self.samples
            .iter()
            .map(|s| self.moved(s, metric, want))
            .sum()
    }
}

/// The breaker's not-closed spans `(from, to, open phases)`, from the generations the samples
/// saw, as the page computes them; `to` is `None` while open.
fn breaker_spans(samples: &[Value]) -> Vec<(i64, Option<i64>, u32)> {
    let mut by_generation = BTreeMap::new();
    for s in samples {
        if let Some(generation) = s["breaker"]["generation"].as_u64() {
            by_generation.insert(generation, s["breaker"].clone());
        }
    }
    let mut spans = Vec::new();
    let mut current: Option<(i64, Option<i64>, u32)> = None;
    for b in by_generation.values() {
        let since = b["since"].as_i64().unwrap();
        match b["phase"].as_str().unwrap() {
            "closed" => {
                if let Some((from, _, opens)) = current.take() {
                    spans.push((from, Some(since), opens));
                }
            }
            phase => {
                let span = current.get_or_insert((since, None, 0));
                if phase == "open" {
                    span.2 += 1;
                }
            }
        }
    }
    spans.extend(current);
    spans
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_shows_an_outage_and_a_sale_second_by_second() {
    // Fast, but with the breaker open long enough (3 s) for a sample a second to see each phase.
    let stack = start(RunnerConfig {
        timing: Timing {
            breaker_open_interval: Duration::from_secs(3),
            ..Timing::fast()
        },
        ..RunnerConfig::ephemeral(None)
    })
    .await
    .unwrap();
    let sim = stack.upstream.clone().unwrap();
    let client = Client::new();
    let api = stack.api_url.clone();

    // Runner-only: a loopback Host, GET only, known query parameters.
    for path in ["/__ops/history", "/__ops/flights", "/__ops/flights/SALE-1"] {
        let resp = client
            .get(format!("{api}{path}"))
            .header("host", "seatgate.evil.example")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{path}");
        let resp = client.post(format!("{api}{path}")).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED, "{path}");
    }
    for query in ["since=soon", "series_from=-1", "what=1"] {
        let resp = client
            .get(format!("{api}/__ops/history?{query}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{query}");
    }
    let resp = client
        .get(format!("{api}/__ops/flights/no%20such"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let resp = client
        .get(format!("{api}/__ops/flights/NOPE-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);

    // The first sample is the counters' baseline: wait for it, so every call below is counted in
    // some sample's increase.
    let deadline = Instant::now() + Duration::from_secs(5);
    while Seen::fetch(&client, &api).await.samples.is_empty() {
        assert!(Instant::now() < deadline, "no sample within 5 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // An outage of 7 s, and cold seat reads (a new seat each, so no cache answers) at ~10/s
    // through it and 3 s past it.
    let token = dev_token(&client, &api, "u1", false).await.unwrap();
    sim.set_faults(Faults {
        outage_for_ms: 7_000,
        ..Faults::default()
    });
    let outage_started = seatgate::domain::Millis::now().0;
    let driving = Instant::now();
    let mut answers = BTreeMap::<u16, u32>::new();
    let mut i = 0;
    while driving.elapsed() < Duration::from_secs(10) {
        let resp = client
            .get(format!("{api}/seats/cold-{i}"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        *answers.entry(resp.status().as_u16()).or_default() += 1;
        i += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Two more samples, so the last reads are in the history.
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let seen = Seen::fetch(&client, &api).await;

    // Every call the simulator took is in exactly one second's increase (the breaker's calls and
    // the history's are the same counter, differenced).
    let sent = sim.stats().get("GET /api/seats");
    let counted = seen.total("seatgate_upstream_calls_total", &[("route", "seat")]);
    assert_eq!(counted, sent, "answers {answers:?}");
    // The outage's 503s (without Retry-After) are `busy` answers that count as failures.
    let busy = seen.total("seatgate_upstream_calls_total", &[("outcome", "busy")]);
    assert!(busy >= 3, "{busy} busy answers; answers {answers:?}");

    let spans = breaker_spans(&seen.samples);
    let closed: Vec<_> = spans
        .iter()
        .filter(|(from, to, _)| *from >= outage_started && to.is_some())
        .collect();
    assert!(
        !closed.is_empty(),
        "no open-then-closed breaker in {spans:?}"
    );
    for (from, to, opens) in closed {
        let to = to.unwrap();
        assert!(*opens >= 1);
        // Seconds wholly inside the span: nothing sent but the probes of failed open phases.
        let mut whole = 0;
        let mut calls = 0;
        for s in &seen.samples {
            let at = s["at"].as_i64().unwrap();
            let interval = s["interval_ms"].as_i64().unwrap();
            if interval > 0 && at - interval >= *from && at <= to {
                whole += 1;
                calls += seen.moved(s, "seatgate_upstream_calls_total", &[]);
            }
        }
        assert!(whole >= 2, "span {from}..{to}: {whole} whole seconds open");
        assert!(
            calls <= u64::from(*opens),
            "span {from}..{to}: {calls} calls in {whole} whole seconds open, {opens} open phases"
        );
        // Before it opened, the failures that opened it.
        let before: u64 = seen
            .samples
            .iter()
            .filter(|s| {
                let at = s["at"].as_i64().unwrap();
                at > outage_started && at <= from + 1_000
            })
            .map(|s| seen.moved(s, "seatgate_upstream_calls_total", &[("outcome", "busy")]))
            .sum();
        assert!(
            before >= 3,
            "{before} busy answers before the breaker opened"
        );
    }

    // A flash sale: the new flight is watched from its 201, sampled, and sold to zero.
    sim.set_faults(Faults::default());
    let admin = dev_token(&client, &api, "ops-admin", true).await.unwrap();
    let resp = client
        .post(format!("{api}/admin/flights"))
        .bearer_auth(&admin)
        .json(&json!({ "flight_id": "SALE-1", "capacity": 20, "shards": 4 }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let listed = get(&client, &format!("{api}/__ops/flights")).await;
    assert_eq!(listed["flights"][0]["flight_id"], "SALE-1", "{listed}");
    assert_eq!(listed["flights"][0]["available"], 20);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let mut booked = 0;
    let mut refused = 0;
    for n in 0..24 {
        let user = dev_token(&client, &api, &format!("buyer{n}"), false)
            .await
            .unwrap();
        let resp = client
            .post(format!("{api}/flights/SALE-1/bookings"))
            .bearer_auth(&user)
            .json(&json!({ "headCount": 1 }))
            .send()
            .await
            .unwrap();
        match resp.status() {
            StatusCode::CREATED => booked += 1,
            StatusCode::CONFLICT => refused += 1,
            s => panic!("booking answered {s}"),
        }
    }
    assert_eq!((booked, refused), (20, 4));
    let flight = get(&client, &format!("{api}/__ops/flights/SALE-1")).await;
    assert_eq!(flight["available"], 0, "{flight}");
    assert_eq!(flight["capacity"], 20);
    let shards = flight["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 4);
    assert!(
        shards
            .iter()
            .all(|s| s["available"] == 0 && s["share"] == 5),
        "{flight}"
    );
    let public: Value = client
        .get(format!("{api}/flights/SALE-1"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(public["available"], flight["available"]);

    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let seen = Seen::fetch(&client, &api).await;
    let left: Vec<u64> = seen
        .samples
        .iter()
        .filter_map(|s| s["flights"]["SALE-1"].as_u64())
        .collect();
    assert_eq!(left.first(), Some(&20), "{left:?}");
    assert_eq!(left.last(), Some(&0), "{left:?}");
    assert!(
        left.windows(2).all(|w| w[1] <= w[0]),
        "stock only went down: {left:?}"
    );
    assert_eq!(
        seen.total("seatgate_bookings_total", &[("outcome", "booked")]),
        20
    );
    assert_eq!(
        seen.total("seatgate_bookings_total", &[("outcome", "sold_out")]),
        4
    );
    stack.shutdown().await;
}
