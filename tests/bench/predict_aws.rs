//! `seatgate-bench simulate --aws`: the AWS path predicted by the simulator
//! (`seatgate_sim::aws`), for an operator sizing a sale before anyone deploys.
//!
//! Prints every input of the timing profile with its source, then each prediction with what
//! it assumed and how far it moves when its most influential input doubles (each input is
//! doubled alone, the others kept; the one that moves the prediction most is named). Each
//! prediction is the median over `--seeds` seeds (default 21 here) of the seed's own figure,
//! so one lucky draw of a long tail does not make the headline. Runs are spread over `--jobs`
//! threads; each is a function of its seed.

use anyhow::Result;
use seatgate::domain::Flight;
use seatgate::service::worker::SEAT_GROUPS_AT_ONCE;
use seatgate_sim::aws::capacity::Scope;
use seatgate_sim::aws::predict::{
    Burst, BurstOutcome, Sale, SaleOutcome, Storm, StormOutcome, burst, sale, storm,
};
use seatgate_sim::aws::{AwsProfile, Input};
use serde_json::json;
use std::time::{Duration, Instant};

/// What `--seeds`, `--seed` and `--jobs` asked for.
pub struct Args {
    pub seeds: u64,
    pub first: u64,
    pub jobs: usize,
}

/// A scenario's runs: the same burst over several seeds, each a [`BurstOutcome`].
fn over_seeds(profile: &AwsProfile, users: usize, seats: usize, args: &Args) -> Vec<BurstOutcome> {
    let seeds: Vec<u64> = (args.first..args.first + args.seeds).collect();
    let jobs = args.jobs.max(1).min(seeds.len());
    let chunks: Vec<Vec<u64>> = (0..jobs)
        .map(|j| seeds.iter().copied().skip(j).step_by(jobs).collect())
        .collect();
    let mut all: Vec<BurstOutcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|&seed| burst(profile, &Burst { users, seats, seed }))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a prediction thread panicked"))
            .collect()
    });
    all.sort_by_key(|o| o.burst.seed);
    all
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => 0.0,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

/// The medians over seeds of the figures a burst reports.
#[derive(Debug, Clone, Copy)]
struct Figures {
    p50_ms: f64,
    p95_ms: f64,
    p99_ms: f64,
    burst_p99_ms: f64,
    reserves: f64,
    refusals: f64,
    unsettled: usize,
    /// The most reserves in flight at one instant, over every seed (a cap, so the worst).
    peak_reserves_in_flight: usize,
    /// DynamoDB requests and billed write units per confirmed intent.
    requests_per_intent: f64,
    billed_wcu_per_intent: f64,
}

fn figures(runs: &[BurstOutcome]) -> Figures {
    let m = |f: fn(&BurstOutcome) -> f64| median(runs.iter().map(f).collect());
    Figures {
        p50_ms: m(|o| o.confirm_to_terminal.p50_ms),
        p95_ms: m(|o| o.confirm_to_terminal.p95_ms),
        p99_ms: m(|o| o.confirm_to_terminal.p99_ms),
        burst_p99_ms: m(|o| o.burst_to_terminal.p99_ms),
        reserves: m(|o| o.upstream_reserves as f64),
        refusals: m(|o| o.gateway_refusals as f64),
        unsettled: runs.iter().filter(|o| o.terminal < o.confirmed).count(),
        peak_reserves_in_flight: runs
            .iter()
            .map(|o| o.peak_reserves_in_flight)
            .max()
            .unwrap_or(0),
        requests_per_intent: m(|o| o.costs.total_requests() as f64 / o.confirmed.max(1) as f64),
        billed_wcu_per_intent: m(|o| {
            o.costs.billed_write_units() as f64 / o.confirmed.max(1) as f64
        }),
    }
}

fn print_figures(label: &str, f: &Figures) {
    println!(
        "  {label}: confirm to terminal p50 {:.0} ms, p95 {:.0} ms, p99 {:.0} ms; burst to terminal p99 {:.0} ms; \
         upstream reserves {:.0}, at most {} in flight; gateway 429s {:.0}; unsettled seeds {}; per intent {:.2} DynamoDB requests, {:.2} billed WCU",
        f.p50_ms,
        f.p95_ms,
        f.p99_ms,
        f.burst_p99_ms,
        f.reserves,
        f.peak_reserves_in_flight,
        f.refusals,
        f.unsettled,
        f.requests_per_intent,
        f.billed_wcu_per_intent
    );
}

/// Doubles each input alone and reports the one that moves the p99 most.
fn sensitivity(
    profile: &AwsProfile,
    users: usize,
    seats: usize,
    base: &Figures,
    args: &Args,
) -> (Input, f64, Vec<serde_json::Value>) {
    let mut rows = Vec::new();
    let mut most = (Input::StreamDelivery, 1.0f64);
    for input in Input::ALL {
        let f = figures(&over_seeds(&profile.with(input, 2.0), users, seats, args));
        let ratio = if base.p99_ms > 0.0 {
            f.p99_ms / base.p99_ms
        } else {
            0.0
        };
        rows.push(json!({"input": input.name(), "p50_ms": f.p50_ms, "p99_ms": f.p99_ms, "p99_ratio": ratio}));
        if (ratio - 1.0).abs() > (most.1 - 1.0).abs() {
            most = (input, ratio);
        }
    }
    (most.0, most.1, rows)
}

pub fn run(args: &Args) -> Result<bool> {
    let started = Instant::now();
    let profile = AwsProfile::published();
    println!("simulate --aws: the AWS path predicted on the published timing profile");
    println!("inputs (each drawn log-normal from its p50 and p99, with the run's seed):");
    for input in Input::ALL {
        println!(
            "  {:<21} {}: {}",
            input.name(),
            profile.describe(input),
            input.source()
        );
    }
    println!(
        "  template defaults: WorkerConcurrency {}, HTTP API throttle {} req/s burst {}, sale routes {} req/s burst {}, \
         table warm throughput {} write units/s; Timing::aws()",
        profile.worker_concurrency,
        profile.api_rate_per_s,
        profile.api_burst,
        profile.sale_rate_per_s,
        profile.sale_burst,
        profile.table_write_units_per_s
    );
    for (what, figure, source) in limits(&profile) {
        println!("  {what:<21} {figure}: {source}");
    }
    println!(
        "each figure: the median over seeds {}..{} of that seed's figure",
        args.first,
        args.first + args.seeds - 1
    );
    let mut report = Vec::new();
    let mut clean = true;
    // The gateway raised past any burst here: what the pipeline does once the throttle is
    // set for the sale.
    let raised = profile.throttled_at(100_000, 100_000);
    for (name, users, seats, gateway, with_sensitivity) in [
        ("same-seat burst N=100", 100usize, 1usize, &profile, true),
        ("same-seat burst N=1000", 1_000, 1, &profile, false),
        (
            "same-seat burst N=1000, throttle raised",
            1_000,
            1,
            &raised,
            true,
        ),
        (
            "spread burst: 1000 users on 100 seats",
            1_000,
            100,
            &profile,
            false,
        ),
        (
            "spread burst: 1000 users on 100 seats, throttle raised",
            1_000,
            100,
            &raised,
            true,
        ),
    ] {
        let profile = gateway;
        println!(
            "{name} (HTTP API throttle {} req/s, burst {}):",
            profile.api_rate_per_s, profile.api_burst
        );
        let runs = over_seeds(profile, users, seats, args);
        let f = figures(&runs);
        print_figures(
            &format!("WorkerConcurrency {}", profile.worker_concurrency),
            &f,
        );
        // Exactly one upstream write per seat (no fault strikes here, so no retry is due),
        // every intent ended, and the upstream's load within the workers' cap: the promises,
        // checked here too.
        let cap = SEAT_GROUPS_AT_ONCE * profile.worker_concurrency;
        if f.unsettled > 0
            || runs.iter().any(|o| o.upstream_reserves != seats.min(users))
            || f.peak_reserves_in_flight > cap
        {
            clean = false;
        }
        // Half the default (the default before issue 38's item 3) and twice it, beside it.
        let mut halved = profile.clone();
        halved.worker_concurrency /= 2;
        let h = figures(&over_seeds(&halved, users, seats, args));
        print_figures(
            &format!("WorkerConcurrency {}", halved.worker_concurrency),
            &h,
        );
        let mut doubled = profile.clone();
        doubled.worker_concurrency *= 2;
        let d = figures(&over_seeds(&doubled, users, seats, args));
        print_figures(
            &format!("WorkerConcurrency {}", doubled.worker_concurrency),
            &d,
        );
        let mut entry = json!({
            "scenario": name, "users": users, "seats": seats,
            "api_rate_per_s": profile.api_rate_per_s, "api_burst": profile.api_burst,
            "p50_ms": f.p50_ms, "p95_ms": f.p95_ms, "p99_ms": f.p99_ms,
            "burst_p99_ms": f.burst_p99_ms, "upstream_reserves": f.reserves,
            "gateway_429s": f.refusals,
            "requests_per_intent": f.requests_per_intent, "billed_wcu_per_intent": f.billed_wcu_per_intent,
            "peak_reserves_in_flight": f.peak_reserves_in_flight, "reserve_cap": cap,
            "halved_concurrency": {"p50_ms": h.p50_ms, "p99_ms": h.p99_ms, "burst_p99_ms": h.burst_p99_ms},
            "doubled_concurrency": {"p50_ms": d.p50_ms, "p99_ms": d.p99_ms, "burst_p99_ms": d.burst_p99_ms},
        });
        if with_sensitivity {
            let (input, ratio, rows) = sensitivity(profile, users, seats, &f, args);
            if (ratio - 1.0).abs() < 0.01 {
                println!("  sensitivity: no input doubled alone moves the p99 by 1%");
            } else {
                println!(
                    "  sensitivity: doubling {} alone moves the p99 most, x{ratio:.2}",
                    input.name()
                );
            }
            entry["sensitivity"] = json!(rows);
        }
        report.push(entry);
    }
    report.push(outage(&profile, args));
    report.extend(flash_sale(&profile, &raised, args));
    let (rehearsed, rehearsal_clean) = rehearsal(&profile, args);
    report.extend(rehearsed);
    clean &= rehearsal_clean;
    println!(
        "{}",
        json!({"scenario": "simulate-aws", "seeds": args.seeds, "first_seed": args.first,
               "wall_s": started.elapsed().as_secs_f64(), "predictions": report})
    );
    Ok(clean)
}

/// The account's and the services' limits the model applies, each with its source (the
/// latencies are [`Input`]s, doubled for sensitivity; these are limits, moved by scenario).
fn limits(p: &AwsProfile) -> Vec<(&'static str, String, &'static str)> {
    vec![
        (
            "per-key limits",
            format!(
                "{} write units/s, {} read units/s; a transaction's item 2 units",
                p.item_write_units_per_s, p.item_read_units_per_s
            ),
            "DynamoDB developer guide, partitions: 1,000 WCU and 3,000 RCU per partition; transactional writes 2 WCU per item",
        ),
        (
            "table at once",
            format!(
                "{} write units/s, {} read units/s (the template's warm throughput; a new on-demand table {} and {})",
                p.table_write_units_per_s,
                p.table_read_units_per_s,
                seatgate_sim::aws::profile::NEW_TABLE_UNITS_PER_S.0,
                seatgate_sim::aws::profile::NEW_TABLE_UNITS_PER_S.1
            ),
            "DynamoDB developer guide, on-demand initial throughput: a new on-demand table serves up to 4,000 WRU and 12,000 RRU at once; \
             more than double the previous peak within 30 minutes may be throttled; pre-warming (warm throughput) raises it",
        ),
        (
            "table quota",
            format!("{} units/s read and write", p.table_quota_units_per_s),
            "Service quotas, DynamoDB: 40,000 RRU and 40,000 WRU per table by default (on-demand and provisioned)",
        ),
        (
            "Lambda scaling",
            format!(
                "{} environments per 10 s per function, account concurrency {} (the API function gets it less the worker's {} and the relay's, deliverer's and reaper's {})",
                p.lambda_scale_per_10s,
                p.account_concurrency,
                p.worker_concurrency,
                seatgate_sim::aws::profile::PIPELINE_RESERVED
            ),
            "Lambda developer guide, concurrency scaling rate: each function scales by 1,000 execution environments every 10 s; default account quota 1,000",
        ),
        (
            "HTTP API account",
            format!(
                "{} req/s, burst {}, above every stage's throttle",
                p.api_account_rate_per_s, p.api_account_burst
            ),
            "API Gateway quotas: 10,000 requests/s with a burst of 5,000 per account and Region",
        ),
    ]
}

/// The arrival rates the flash-sale sweep tries, per second.
const SALE_RATES: [u32; 7] = [100, 250, 500, 1_000, 2_000, 4_000, 8_000];

/// Seconds each sale's arrivals last.
const SALE_SECONDS: u32 = 5;

/// Seeds each sale point runs (the median is reported): the sweep has many points.
const SALE_SEEDS: u64 = 3;

/// The same sale over seeds, spread over the threads.
fn sale_over_seeds(profile: &AwsProfile, rate: u32, shards: u32, args: &Args) -> Vec<SaleOutcome> {
    let spec = Sale {
        rate_per_s: rate,
        for_s: SALE_SECONDS,
        shards,
        max_per_user: Some(2),
        seats: None,
        seed: 0,
    };
    sales_over_seeds(profile, &spec, args)
}

/// `spec` over seeds (its own seed replaced by each), spread over the threads.
fn sales_over_seeds(profile: &AwsProfile, spec: &Sale, args: &Args) -> Vec<SaleOutcome> {
    let seeds: Vec<u64> = (args.first..args.first + args.seeds.min(SALE_SEEDS)).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = seeds
            .iter()
            .map(|&seed| {
                scope.spawn(move || {
                    sale(
                        profile,
                        &Sale {
                            seed,
                            ..spec.clone()
                        },
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a sale thread panicked"))
            .collect()
    })
}

/// The sale rehearsal: seed 004's sale (400 bookers/s for 5 s, 300 seats) on the template's
/// defaults, and openings of 2,000 and 5,000 arrivals/s on a table pre-warmed to its quota,
/// every figure an operator sizes by, and whether the promises held (exactly the seats booked).
fn rehearsal(profile: &AwsProfile, args: &Args) -> (Vec<serde_json::Value>, bool) {
    let mut out = Vec::new();
    let mut clean = true;
    let warmed = profile.pre_warmed(profile.table_quota_units_per_s);
    println!(
        "sale rehearsal (median over seeds {}..{}; each booker an Idempotency-Key, max_per_user 2, the shards a flight gets by default, one per {} seats):",
        args.first,
        args.first + args.seeds.min(SALE_SEEDS) - 1,
        seatgate::domain::SEATS_PER_DEFAULT_SHARD
    );
    // An opening's sale routes set for it (`SaleThrottleRateLimit` = the rate, the burst its
    // first second), within the account's.
    let opening = |rate: u32| warmed.throttled_at(rate, rate);
    let (at_2000, at_5000) = (opening(2_000), opening(5_000));
    for (name, p, rate, seats) in [
        (
            "seed 004's sale, template defaults",
            profile,
            400u32,
            Some(300u32),
        ),
        (
            "an opening of 2,000/s, pre-warmed, sale routes at 2,000/s",
            &at_2000,
            2_000,
            None,
        ),
        (
            "an opening of 5,000/s, pre-warmed, sale routes at 5,000/s",
            &at_5000,
            5_000,
            None,
        ),
    ] {
        let offered_seats = seats.unwrap_or(rate * SALE_SECONDS);
        let spec = Sale {
            rate_per_s: rate,
            for_s: SALE_SECONDS,
            shards: Flight::default_shards(offered_seats),
            max_per_user: Some(2),
            seats,
            seed: 0,
        };
        let runs = sales_over_seeds(p, &spec, args);
        let m = |f: &dyn Fn(&SaleOutcome) -> f64| median(runs.iter().map(f).collect());
        let offered = runs[0].offered;
        let booked = m(&|o| o.booked as f64);
        let sold_out = m(&|o| o.sold_out as f64);
        let failed = m(&|o| o.failed as f64);
        let answered_1s = m(&|o| o.answered_in_window as f64);
        let (p50, p99) = (m(&|o| o.latency.p50_ms), m(&|o| o.latency.p99_ms));
        let throttled = m(&|o| (o.throttled + o.table_throttled) as f64);
        let table_throttled = m(&|o| o.table_throttled as f64);
        let gateway = m(&|o| o.gateway_refusals as f64);
        let function = m(&|o| o.function_throttled as f64);
        let conflicts = m(&|o| o.conflicts as f64);
        let requests = m(&|o| o.costs.total_requests() as f64 / o.booked.max(1) as f64);
        let wcu = m(&|o| o.costs.billed_write_units() as f64 / o.booked.max(1) as f64);
        let balanced = runs.iter().all(SaleOutcome::balanced);
        let exact = seats.is_none_or(|s| runs.iter().all(|o| o.booked == u64::from(s)));
        clean &= balanced && exact;
        let (table_wru, _) = p.table_units_per_s();
        println!(
            "  {name} ({rate} arrivals/s for {SALE_SECONDS} s, {offered_seats} seats on {} shards, table {table_wru} WRU/s at once, sale routes {} req/s burst {}):",
            spec.shards,
            p.sale_throttle().0,
            p.sale_throttle().1,
        );
        println!(
            "    {booked:.0} booked, {sold_out:.0} sold out, {failed:.0} failed of {offered}; {answered_1s:.0} answered within the window + 1 s; answer p50 {p50:.0} ms, p99 {p99:.0} ms"
        );
        println!(
            "    DynamoDB throttled {throttled:.0} (the table {table_throttled:.0}), TransactionConflict {conflicts:.0}, HTTP API 429 {gateway:.0}, API function throttled {function:.0}; \
             per booking {requests:.2} requests, {wcu:.2} billed WCU; bank balanced {balanced}, exactly the seats booked {exact}"
        );
        out.push(json!({
            "scenario": "sale rehearsal", "name": name, "rate_per_s": rate, "seats": offered_seats, "shards": spec.shards, "offered": offered,
            "booked": booked, "sold_out": sold_out, "failed": failed, "answered_within_window": answered_1s,
            "p50_ms": p50, "p99_ms": p99, "throttled": throttled, "table_throttled": table_throttled,
            "transaction_conflicts": conflicts, "gateway_429s": gateway, "function_throttled": function,
            "requests_per_booking": requests, "billed_wcu_per_booking": wcu, "balanced": balanced,
        }));
    }
    (out, clean)
}

// The flash sale's sweep is in a file of its own (`predict_aws/flash_sale.rs`).
mod flash_sale;

use flash_sale::flash_sale;

/// Seeds the storm runs at most (each is 1,500 confirms and 24,000 reads).
const STORM_SEEDS: u64 = 5;

fn storms(profile: &AwsProfile, args: &Args) -> Vec<StormOutcome> {
    storms_with(profile, args, true)
}

/// The same, with the breaker's wake-ups of the reaper on or off.
fn storms_with(profile: &AwsProfile, args: &Args, wake_ups: bool) -> Vec<StormOutcome> {
    let seeds: Vec<u64> = (args.first..args.first + args.seeds.min(STORM_SEEDS)).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = seeds
            .iter()
            .map(|&seed| {
                scope.spawn(move || {
                    storm(
                        profile,
                        &Storm {
                            wake_ups,
                            ..Storm::seed_000(seed)
                        },
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a storm thread panicked"))
            .collect()
    })
}

/// Seed 000's read storm and outage: confirm to terminal before, during and after it.
fn outage(profile: &AwsProfile, args: &Args) -> serde_json::Value {
    let s = Storm::seed_000(args.first);
    println!(
        "seed 000's storm: {} confirms/s and {} seat reads/s for {} s on {} seats, the upstream down (503, no Retry-After) from +{} s for {} s; gateway raised:",
        s.confirms_per_s, s.reads_per_s, s.for_s, s.seats, s.outage_at_s, s.outage_for_s
    );
    let runs = storms(profile, args);
    let m = |f: &dyn Fn(&StormOutcome) -> f64| median(runs.iter().map(f).collect());
    let row = |label: &str, f: &dyn Fn(&StormOutcome) -> seatgate_sim::aws::predict::Summary| {
        let (p50, p99) = (m(&|o| f(o).p50_ms), m(&|o| f(o).p99_ms));
        println!("  confirmed {label}: confirm to terminal p50 {p50:.0} ms, p99 {p99:.0} ms");
        json!({"p50_ms": p50, "p99_ms": p99})
    };
    let before = row("before the outage", &|o| o.before);
    let during = row("during it", &|o| o.during);
    let after = row("after it", &|o| o.after);
    let (in_outage, reads, reserves) = (
        m(&|o| o.upstream_calls_in_outage as f64),
        m(&|o| o.upstream_reads as f64),
        m(&|o| o.upstream_reserves as f64),
    );
    let unsettled = runs.iter().filter(|o| o.terminal < o.confirmed).count();
    println!(
        "  the first seed's calls while the upstream was down, by route: {:?}",
        runs[0].in_outage_by_route
    );
    println!(
        "  upstream calls while it was down {in_outage:.0}; {} seat reads became {reads:.0} upstream reads; {reserves:.0} reserves; unsettled seeds {unsettled}",
        s.reads_per_s * s.for_s
    );
    // Side by side: the same seeds without the breaker's wake-ups (parked intents wait for a
    // reaper pass, as before issue 38's item 4), on the caps before it (a 30 s open interval,
    // WorkerConcurrency 5), and the inputs that bound the rest: how soon a probe finds the
    // upstream back (the open interval) and how fast the backlog drains at the upstream cap
    // (WorkerConcurrency batches, each as slow as its slowest reserve).
    let after_p50 = m(&|o| o.after.p50_ms).max(1.0);
    let mut variants = serde_json::Map::new();
    let mut variant = |key: &str, label: String, runs: &[StormOutcome]| {
        let (p50, p99) = (
            median(runs.iter().map(|o| o.after.p50_ms).collect()),
            median(runs.iter().map(|o| o.after.p99_ms).collect()),
        );
        // Confirmed during the outage: what is parked behind the breaker, which the wake-ups
        // put back in line ahead of what arrives after it.
        let (during_p50, during_p99) = (
            median(runs.iter().map(|o| o.during.p50_ms).collect()),
            median(runs.iter().map(|o| o.during.p99_ms).collect()),
        );
        println!(
            "  {label}: after-outage p50 {p50:.0} ms, p99 {p99:.0} ms (p50 x{:.2}); during it p50 {during_p50:.0} ms, p99 {during_p99:.0} ms",
            p50 / after_p50
        );
        variants.insert(
            key.into(),
            json!({"p50_ms": p50, "p99_ms": p99, "during_p50_ms": during_p50, "during_p99_ms": during_p99}),
        );
    };
    variant(
        "after_without_wake_ups",
        "without the breaker's wake-ups (the schedule alone)".into(),
        &storms_with(profile, args, false),
    );
    let mut earlier = profile.clone();
    earlier.timing.breaker_open_interval = Duration::from_secs(30);
    earlier.worker_concurrency = 5;
    variant(
        "after_earlier_caps",
        format!(
            "breaker_open_interval {:?}, WorkerConcurrency {} (the defaults before issue 38)",
            earlier.timing.breaker_open_interval, earlier.worker_concurrency
        ),
        &storms(&earlier, args),
    );
    variant(
        "after_earlier_caps_without_wake_ups",
        "the same, without the wake-ups (the shape before issue 38)".into(),
        &storms_with(&earlier, args, false),
    );
    let mut faster = profile.clone();
    faster.timing.reaper_interval /= 2;
    variant(
        "after_reaper_interval_halved",
        format!(
            "reaper_interval {:?} -> {:?}",
            profile.timing.reaper_interval, faster.timing.reaper_interval
        ),
        &storms(&faster, args),
    );
    let mut wider = profile.clone();
    wider.worker_concurrency += wider.worker_concurrency / 2;
    variant(
        "after_worker_concurrency_x1_5",
        format!(
            "WorkerConcurrency {} -> {}",
            profile.worker_concurrency, wider.worker_concurrency
        ),
        &storms(&wider, args),
    );
    json!({"scenario": "seed 000 storm and outage", "before": before, "during": during, "after": after,
           "variants": variants,
           "upstream_calls_in_outage": in_outage, "upstream_reads": reads, "reads": s.reads_per_s * s.for_s,
           "upstream_reserves": reserves, "unsettled_seeds": unsettled})
}
