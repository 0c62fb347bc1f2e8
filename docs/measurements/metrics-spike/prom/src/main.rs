//! The runner's side: the same totals rendered by seatgate's `prometheus_text`, by
//! metrics-exporter-prometheus (through the `metrics` facade) and by prometheus-client, written
//! to out/{seatgate,mep,pc}.txt for a diff. Not a size or speed measurement (the runner is not
//! shipped to Lambda); the dependency delta is measured with `cargo tree` on runner-* packages.

use seatgate::metrics::{BUCKETS_MS, Metric, count, observe_ms, prometheus_text};

const ROUTES: [&str; 3] = ["charge", "seat", "room"];
const OUTCOMES: [&str; 3] = ["ok", "timeout", "busy"];

/// (metric, dims, n or ms) of one "invocation", as in binaries B and C.
fn workload(i: u64) -> Vec<(Metric, Vec<(&'static str, &'static str)>, u64)> {
    let r = ROUTES[(i % 3) as usize];
    let o = OUTCOMES[(i % 3) as usize];
    let mut v = vec![
        (Metric::UpstreamCalls, vec![("route", r), ("outcome", o)], 1),
        (Metric::UpstreamCalls, vec![("route", "reserve"), ("outcome", "ok")], 2),
        (Metric::IntentsTerminal, vec![("status", "SUCCEEDED"), ("reason", "reserved")], 1),
        (Metric::IntentsTerminal, vec![("status", "FAILED"), ("reason", "seat_taken")], 1),
        (Metric::UpstreamHeldBack, vec![("route", "reserve"), ("by", "breaker")], 1),
        (Metric::UpstreamHeldBack, vec![("route", "seat"), ("by", "hold")], 1),
    ];
    for k in 0..3 {
        v.push((Metric::TimeToTerminal, vec![("status", "SUCCEEDED")], 100 + (i * 7 + k * 13) % 900));
    }
    v.push((Metric::ReaperPassDuration, vec![], 5 + i % 50));
    v
}

/// Median of `n` timings of `f`, in ns.
fn median_ns(n: usize, mut f: impl FnMut(u64)) -> u64 {
    let mut ns: Vec<u64> = (0..n as u64)
        .map(|i| {
            let t = std::time::Instant::now();
            f(i);
            t.elapsed().as_nanos() as u64
        })
        .collect();
    ns.sort_unstable();
    ns[n / 2]
}

fn report(what: &str, record: u64, render: u64) {
    println!("{what}: record one invocation median_ns={record} | render median_ns={render}");
}

fn is_ms(m: Metric) -> bool {
    m.prometheus_name().ends_with("_milliseconds")
}

fn main() {
    std::fs::create_dir_all("out").unwrap();
    let all: Vec<_> = (0..3).flat_map(workload).collect();

    // seatgate
    for (m, d, n) in &all {
        if is_ms(*m) { observe_ms(*m, d, *n) } else { count(*m, d, *n) }
    }
    std::fs::write("out/seatgate.txt", prometheus_text("local")).unwrap();
    let sg_record = |i: u64| {
        for (m, d, n) in workload(i) {
            if is_ms(m) { observe_ms(m, &d, n) } else { count(m, &d, n) }
        }
    };
    let r = median_ns(10_000, sg_record);
    let t = median_ns(1_000, |_| { std::hint::black_box(prometheus_text("local")); });
    report("seatgate", r, t);

    // metrics + metrics-exporter-prometheus
    {
        use metrics_exporter_prometheus::PrometheusBuilder;
        let buckets: Vec<f64> = BUCKETS_MS.iter().map(|b| *b as f64).collect();
        let recorder = PrometheusBuilder::new().set_buckets(&buckets).unwrap().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            for m in Metric::ALL {
                if is_ms(m) {
                    metrics::describe_histogram!(m.prometheus_name(), m.help());
                } else {
                    metrics::describe_counter!(m.prometheus_name(), m.help());
                }
            }
            for (m, d, n) in &all {
                let mut labels = vec![metrics::Label::new("service", "local")];
                labels.extend(d.iter().map(|(k, v)| metrics::Label::new(*k, *v)));
                if is_ms(*m) {
                    metrics::histogram!(m.prometheus_name(), labels).record(*n as f64);
                } else {
                    metrics::counter!(m.prometheus_name(), labels).increment(*n);
                }
            }
        });
        std::fs::write("out/mep.txt", handle.render()).unwrap();
        let r = metrics::with_local_recorder(&recorder, || {
            median_ns(10_000, |i| {
                for (m, d, n) in workload(i) {
                    let mut labels = vec![metrics::Label::new("service", "local")];
                    labels.extend(d.iter().map(|(k, v)| metrics::Label::new(*k, *v)));
                    if is_ms(m) {
                        metrics::histogram!(m.prometheus_name(), labels).record(n as f64);
                    } else {
                        metrics::counter!(m.prometheus_name(), labels).increment(n);
                    }
                }
            })
        });
        let t = median_ns(1_000, |_| { std::hint::black_box(handle.render()); });
        report("metrics-exporter-prometheus", r, t);
    }

    // prometheus-client
    {
        use prometheus_client::encoding::text::encode;
        use prometheus_client::metrics::counter::Counter;
        use prometheus_client::metrics::family::Family;
        use prometheus_client::metrics::histogram::Histogram;
        use prometheus_client::registry::Registry;
        type Labels = Vec<(&'static str, &'static str)>;
        fn hist() -> Histogram {
            Histogram::new(BUCKETS_MS.iter().map(|b| *b as f64))
        }
        let mut registry = Registry::default();
        let mut counters = std::collections::BTreeMap::new();
        let mut hists = std::collections::BTreeMap::new();
        for m in Metric::ALL {
            // prometheus-client appends `_total` to counters itself.
            let name = m.prometheus_name();
            if is_ms(m) {
                let f = Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(hist as fn() -> Histogram);
                registry.register(name, m.help(), f.clone());
                hists.insert(m, f);
            } else {
                let f = Family::<Labels, Counter>::default();
                registry.register(name.trim_end_matches("_total").to_string(), m.help(), f.clone());
                counters.insert(m, f);
            }
        }
        for (m, d, n) in &all {
            let mut labels: Labels = vec![("service", "local")];
            labels.extend(d.iter().copied());
            if is_ms(*m) {
                hists[m].get_or_create(&labels).observe(*n as f64);
            } else {
                counters[m].get_or_create(&labels).inc_by(*n);
            }
        }
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        std::fs::write("out/pc.txt", text).unwrap();
        let r = median_ns(10_000, |i| {
            for (m, d, n) in workload(i) {
                let mut labels: Labels = vec![("service", "local")];
                labels.extend(d.iter().copied());
                if is_ms(m) {
                    hists[&m].get_or_create(&labels).observe(n as f64);
                } else {
                    counters[&m].get_or_create(&labels).inc_by(n);
                }
            }
        });
        let t = median_ns(1_000, |_| {
            let mut text = String::new();
            encode(&mut text, &registry).unwrap();
            std::hint::black_box(text);
        });
        report("prometheus-client", r, t);
    }
}
