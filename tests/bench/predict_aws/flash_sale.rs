//! The flash sale predicted on AWS: the template's throttle at seed 004's rate, then the sweep
//! with the HTTP API's throttle raised, per table, limit scope and shard count, to the highest
//! arrival rate that kept up, with the one-shard row's sensitivity to its key's write limit and
//! its transactions' lock span.

use super::*;

/// The flash sale: the template's throttle at seed 004's rate, then the sweep with the
/// throttle raised, per shard count and limit scope: the highest rate that kept up, and the
/// lowest at which DynamoDB throttled.
pub(super) fn flash_sale(
    profile: &AwsProfile,
    raised: &AwsProfile,
    args: &Args,
) -> Vec<serde_json::Value> {
    let mut out = vec![at_template_defaults(profile, args)];
    println!(
        "flash sale sweep, HTTP API throttle raised ({} req/s), max_per_user 2, {SALE_SECONDS} s of arrivals; \
         kept up = 99% booked and p99 answer <= 1 s:",
        raised.api_rate_per_s
    );
    let tables = [
        ("a new on-demand table", raised.new_table()),
        ("the template's warm throughput", raised.clone()),
        (
            "a table pre-warmed to its quota",
            raised.pre_warmed(raised.table_quota_units_per_s),
        ),
    ];
    for ((table, warmed), scope) in tables.iter().flat_map(|t| {
        // Once split or not, each shard has its own key now: the opening's scope is the one an
        // operator meets; the split one is kept for the quota's table, to show the difference.
        let scopes: &[Scope] = if t.0 == "a table pre-warmed to its quota" {
            &[Scope::PartitionKey, Scope::Item]
        } else {
            &[Scope::PartitionKey]
        };
        scopes.iter().map(move |s| (t, *s))
    }) {
        let mut p = warmed.clone();
        p.limit_scope = scope;
        let (table_wru, _) = p.table_units_per_s();
        println!("  on {table} ({table_wru} write units/s at once):");
        for shards in [1u32, 4, 16] {
            let sweep = Sweep::run(&p, shards, args);
            let scope_name = sweep.print(scope);
            // The largest input here is the key's write limit: one shard's sale, again with
            // twice the limit.
            if shards == 1 {
                print_sensitivity(&p, shards, sweep.kept_up, args);
            }
            out.push(json!({"scenario": "flash sale sweep", "table": table, "limit_scope": scope_name, "shards": shards,
                            "kept_up_rate_per_s": sweep.kept_up.map(|k| k.0), "throttling_from_rate_per_s": sweep.throttled_from,
                            "points": sweep.points}));
        }
    }
    out
}

/// DynamoDB requests and billed write units per booking, medians over the seeds: what a
/// booking costs, beside how many there were.
fn per_booking(runs: &[SaleOutcome]) -> (f64, f64) {
    (
        median(
            runs.iter()
                .map(|o| o.costs.total_requests() as f64 / o.booked.max(1) as f64)
                .collect(),
        ),
        median(
            runs.iter()
                .map(|o| o.costs.billed_write_units() as f64 / o.booked.max(1) as f64)
                .collect(),
        ),
    )
}

/// Whether most seeds' sales kept up: the sweep's and the sensitivity's verdict per rate.
fn kept_up_mostly(runs: &[SaleOutcome]) -> bool {
    runs.iter().filter(|o| o.sustained()).count() * 2 > runs.len()
}

/// Seed 004's 400 bookers/s on one shard behind the template's own sale throttle: what an
/// operator gets without raising anything.
fn at_template_defaults(profile: &AwsProfile, args: &Args) -> serde_json::Value {
    let at_default = sale_over_seeds(profile, 400, 1, args);
    let per_s = median(at_default.iter().map(SaleOutcome::booked_per_s).collect());
    let in_window = median(
        at_default
            .iter()
            .map(|o| o.booked_in_window as f64)
            .collect(),
    );
    // What the throttle lets through is its burst at once, then its rate: that, not an
    // average over the window, is the figure to size by.
    println!(
        "flash sale at seed 004's 400 bookers/s for {SALE_SECONDS} s, 1 shard, the sale routes' throttle {} req/s burst {}: \
         {in_window:.0} of {} booked within the sale's {} s; p99 answer {:.0} ms",
        profile.sale_rate_per_s,
        profile.sale_burst,
        400 * SALE_SECONDS,
        SALE_SECONDS + 1,
        median(at_default.iter().map(|o| o.latency.p99_ms).collect())
    );
    let (requests, wcu) = per_booking(&at_default);
    println!("  per booking: {requests:.2} DynamoDB requests, {wcu:.2} billed WCU");
    json!({
        "scenario": "flash sale, template defaults", "rate_per_s": 400, "shards": 1,
        "booked_per_s": per_s, "booked_in_window": in_window,
        "requests_per_booking": requests, "billed_wcu_per_booking": wcu,
    })
}

/// One row of the sweep: a table, limit scope and shard count taken up the rates until one
/// does not keep up.
struct Sweep {
    shards: u32,
    /// The highest rate that kept up, and its bookings per second.
    kept_up: Option<(u32, f64)>,
    /// The first rates at which DynamoDB throttled at all, and the table itself did.
    throttled_from: Option<u32>,
    table_from: Option<u32>,
    /// The first rate with a TransactionConflict, and how many.
    conflicts_at: Option<(u32, f64)>,
    /// The last rate tried: (rate, table throttles, conflicts, API function throttles).
    last: (u32, f64, f64, f64),
    points: Vec<serde_json::Value>,
}

impl Sweep {
    /// Takes `shards` up [`SALE_RATES`] on `p`; past the first rate that did not keep up,
    /// higher ones only throttle more, so the sweep stops there.
    fn run(p: &AwsProfile, shards: u32, args: &Args) -> Sweep {
        let mut sweep = Sweep {
            shards,
            kept_up: None,
            throttled_from: None,
            table_from: None,
            conflicts_at: None,
            last: (0u32, 0.0f64, 0.0f64, 0.0f64),
            points: Vec::new(),
        };
        for rate in SALE_RATES {
            let runs = sale_over_seeds(p, rate, shards, args);
            let per_s = median(runs.iter().map(SaleOutcome::booked_per_s).collect());
            let p99 = median(runs.iter().map(|o| o.latency.p99_ms).collect());
            let throttled = median(runs.iter().map(|o| o.throttled as f64).collect());
            let table_throttled = median(runs.iter().map(|o| o.table_throttled as f64).collect());
            let conflicts = median(runs.iter().map(|o| o.conflicts as f64).collect());
            let function_throttled =
                median(runs.iter().map(|o| o.function_throttled as f64).collect());
            let (requests, wcu) = per_booking(&runs);
            let sustained = kept_up_mostly(&runs);
            if sustained {
                sweep.kept_up = Some((rate, per_s));
            }
            if throttled > 0.0 && sweep.throttled_from.is_none() {
                sweep.throttled_from = Some(rate);
            }
            if table_throttled > 0.0 && sweep.table_from.is_none() {
                sweep.table_from = Some(rate);
            }
            if conflicts > 0.0 && sweep.conflicts_at.is_none() {
                sweep.conflicts_at = Some((rate, conflicts));
            }
            sweep.last = (rate, table_throttled, conflicts, function_throttled);
            sweep.points.push(json!({
                "rate_per_s": rate, "booked_per_s": per_s, "p99_ms": p99,
                "throttled": throttled, "table_throttled": table_throttled,
                "transaction_conflicts": conflicts, "function_throttled": function_throttled,
                "kept_up": sustained,
                "requests_per_booking": requests, "billed_wcu_per_booking": wcu,
            }));
            // Past the first rate that did not keep up, higher ones only throttle more.
            if !sustained {
                break;
            }
        }
        sweep
    }

    /// Prints the row's two lines; returns the scope's name, for the JSON.
    fn print(&self, scope: Scope) -> &'static str {
        let (shards, kept_up, last) = (self.shards, self.kept_up, self.last);
        let scope_name = match scope {
            Scope::Item => "per item (after split for heat)",
            Scope::PartitionKey => {
                "per partition key (the sale's first seconds; each shard its own key)"
            }
        };
        println!(
            "  limits {scope_name}, {shards:>2} shards: kept up to {} arrivals/s ({} bookings/s); DynamoDB throttling from {}",
            kept_up.map_or("none of the rates".into(), |(r, _)| {
                if r == SALE_RATES[SALE_RATES.len() - 1] {
                    format!("at least {r} (the highest tried)")
                } else {
                    r.to_string()
                }
            }),
            kept_up.map_or("-".into(), |(_, b)| format!("{b:.0}")),
            self.throttled_from
                .map_or("none of the rates tried".into(), |r| format!(
                    "{r} arrivals/s"
                )),
        );
        println!(
            "    table throttling from {}; TransactionConflict from {}; at {} arrivals/s (the last tried): {:.0} table throttles, {:.0} conflicts, {:.0} API function throttles",
            self.table_from
                .map_or("none of the rates tried".into(), |r| format!(
                    "{r} arrivals/s"
                )),
            self.conflicts_at
                .map_or("none of the rates tried".into(), |(r, n)| format!(
                    "{r} arrivals/s ({n:.0})"
                )),
            last.0,
            last.1,
            last.2,
            last.3,
        );
        scope_name
    }
}

/// The one-shard row's sensitivity: its key's write limit doubled (at twice the rate that
/// kept up), then the assumed input under it, the transactions' lock span, doubled and halved
/// alone at the rate that kept up.
fn print_sensitivity(p: &AwsProfile, shards: u32, kept_up: Option<(u32, f64)>, args: &Args) {
    let mut doubled = p.clone();
    doubled.item_write_units_per_s *= 2;
    let rate = kept_up.map_or(SALE_RATES[0], |k| k.0) * 2;
    let runs = sale_over_seeds(&doubled, rate, shards, args);
    let kept = kept_up_mostly(&runs);
    println!(
        "    sensitivity: with {} write units/s per key, {rate} arrivals/s {}",
        doubled.item_write_units_per_s,
        if kept {
            "keep up too: the limit is the input that sets this row"
        } else {
            "still do not keep up"
        }
    );
    // The assumed input under one shard: its transactions' lock span, doubled and halved
    // alone, at the rate that kept up.
    let kept_rate = kept_up.map_or(SALE_RATES[0], |k| k.0);
    for factor in [2.0, 0.5] {
        let moved = p.with(Input::TransactionLock, factor);
        let runs = sale_over_seeds(&moved, kept_rate, shards, args);
        let kept = kept_up_mostly(&runs);
        let conflicts = median(runs.iter().map(|o| o.conflicts as f64).collect());
        println!(
            "    sensitivity: the transaction lock span x{factor}: {kept_rate} arrivals/s {} ({conflicts:.0} conflicts)",
            if kept { "keep up" } else { "do not keep up" }
        );
    }
}
