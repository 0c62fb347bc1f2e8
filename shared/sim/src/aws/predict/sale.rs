//! Seed 004's flash sale on the AWS profile: bookers at a constant arrival rate, one flight,
//! its shards against DynamoDB's per-key write limits ([`crate::aws::capacity`]).

use super::{Front, Summary, aws_world};
use crate::aws::cost::Costs;
use crate::aws::profile::AwsProfile;
use seatgate::domain::Millis;
use std::time::Duration;

/// A flash sale: bookers arrive at a constant `rate_per_s` for `for_s` seconds (seed 004's
/// k6 shape, a constant arrival rate), each a new user booking one seat of one flight of
/// `shards` shards under an `Idempotency-Key`, each attempt through the sale route's throttle and
/// an API function environment ([`Front::of_sale`]). By default the flight holds a seat for every booker, so
/// what limits the sale is the pipeline, never the stock; `seats` sets a smaller flight (seed
/// 004's 300), whose sell-out the rest are refused by.
#[derive(Debug, Clone)]
pub struct Sale {
    pub rate_per_s: u32,
    pub for_s: u32,
    pub shards: u32,
    pub max_per_user: Option<u32>,
    pub seats: Option<u32>,
    pub seed: u64,
}

/// The most bookers a sale takes.
pub const MAX_BOOKERS: u64 = 200_000;

/// What a sale did.
#[derive(Debug, Clone)]
pub struct SaleOutcome {
    pub sale: Sale,
    pub offered: u64,
    /// Bookings made, and of them within the sale's window (its arrivals' span plus a second).
    pub booked: u64,
    pub booked_in_window: u64,
    /// Bookers answered sold out; and the rest, who got no answer but an error (store errors
    /// or throttling past every retry).
    pub sold_out: u64,
    pub failed: u64,
    /// Bookers answered (booked or sold out) within the window.
    pub answered_in_window: u64,
    /// The flight's seats, and what its shards still had at the end (for the bank: booked +
    /// available = seats).
    pub seats: u32,
    pub available_at_end: u32,
    /// From a booker's arrival to its answer (the gateway's wait included).
    pub latency: Summary,
    /// Requests DynamoDB refused for a key's throughput (each retried by the service or the
    /// client), and for the table's.
    pub throttled: u64,
    pub table_throttled: u64,
    /// Booking transactions cancelled `TransactionConflict` (each retried likewise).
    pub conflicts: u64,
    /// Requests the HTTP API throttled, and the API function (each sent again), at least once.
    pub gateway_refusals: u64,
    pub function_throttled: u64,
    /// The most API function environments at once.
    pub environments: u32,
    /// Write units charged on the flight's partition.
    pub flight_write_units: f64,
    /// What the sale cost on DynamoDB (the flight's creation excluded; throttled requests are
    /// counted in `throttled`, not here: AWS does not bill them).
    pub costs: Costs,
}

impl SaleOutcome {
    /// Bookings a second: those made within the sale's window (the arrivals' span plus a
    /// second), over the arrivals' span. A sale that keeps up books its arrival rate.
    pub fn booked_per_s(&self) -> f64 {
        self.booked_in_window as f64 / f64::from(self.sale.for_s.max(1))
    }

    /// Whether the sale kept up: at least 99% of bookers booked, and the p99 answer within a
    /// second (what a buyer at a sale's opening waits for at most before retrying by hand).
    pub fn sustained(&self) -> bool {
        (self.booked + self.sold_out) * 100 >= self.offered * 99 && self.latency.p99_ms <= 1_000.0
    }

    /// No oversell and nothing lost: the bookings and the seats left make the flight.
    pub fn balanced(&self) -> bool {
        self.booked + u64::from(self.available_at_end) == u64::from(self.seats)
    }
}

/// Runs `sale` on `profile`.
pub fn sale(profile: &AwsProfile, sale: &Sale) -> SaleOutcome {
    use seatgate::domain::{BookingAnswer, FlightId, IdempotencyKey};
    let offered = u64::from(sale.rate_per_s) * u64::from(sale.for_s);
    assert!(
        (1..=MAX_BOOKERS).contains(&offered) && (1..=16).contains(&sale.shards),
        "a sale of 1 to {MAX_BOOKERS} bookers on 1 to 16 shards"
    );
    let spec = sale.clone();
    let run = crate::simulate(aws_world(profile, sale.seed), move |world| async move {
        let flight = FlightId::parse("F-1").expect("a valid flight id");
        let capacity = capacity_seats(&spec, offered);
        world
            .instance(0)
            .api
            .flights()
            .create(flight.clone(), capacity, spec.max_per_user, spec.shards)
            .await
            .expect("the flight is created");
        let created = world.costs().unwrap_or_default();
        let front = Front::of_sale(&world);
        let start = world.now();
        let interval = Duration::from_secs(1) / spec.rate_per_s;
        let instances = world.instance_count();
        let mut tasks = Vec::with_capacity(offered as usize);
        for i in 0..offered {
            let due = start.plus(interval * i as u32);
            let wait = due.since(world.now());
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let client = world
                .client(&format!("b-{i:06}"), i as usize % instances)
                .through(front.clone());
            let (world, flight) = (world.clone(), flight.clone());
            tasks.push(tokio::spawn(async move {
                let arrived = world.now();
                let key = IdempotencyKey::parse(&format!("sale-{i}")).expect("a valid key");
                let answer = client.book(&flight, 1, Some(&key)).await;
                let outcome = match answer {
                    Ok(BookingAnswer::Booked { .. }) => Answer::Booked,
                    Ok(BookingAnswer::SoldOut) => Answer::SoldOut,
                    _ => Answer::Failed,
                };
                (outcome, arrived, world.now())
            }));
        }
        let mut answers = Vec::with_capacity(tasks.len());
        for task in tasks {
            answers.push(task.await.expect("a booker panicked"));
        }
        world.shutdown().await;
        let available: u32 = world
            .ledger()
            .flights
            .iter()
            .flat_map(|f| f.available.iter().copied())
            .sum();
        let capacity = world.capacity().expect("an AWS world meters its table");
        let costs = world.costs().unwrap_or_default().since(&created);
        let limits = Limits {
            throttled: capacity.throttled(),
            table_throttled: capacity.table_throttled(),
            conflicts: capacity.conflicts(),
            gateway_refusals: front.gateway.refused(),
            function_throttled: front.function.throttled(),
            environments: front.function.environments(),
        };
        let seats = capacity_seats(&spec, offered);
        (
            start,
            answers,
            limits,
            capacity.write_units(),
            costs,
            (seats, available),
        )
    });
    let (start, answers, limits, flight_write_units, costs, (seats, available_at_end)) = run.value;
    let window_end = start.plus(Duration::from_secs(u64::from(sale.for_s) + 1));
    let count = |f: &dyn Fn(&(Answer, Millis, Millis)) -> bool| {
        answers.iter().filter(|a| f(a)).count() as u64
    };
    let booked = count(&|a| a.0 == Answer::Booked);
    let sold_out = count(&|a| a.0 == Answer::SoldOut);
    SaleOutcome {
        sale: sale.clone(),
        offered,
        booked,
        booked_in_window: count(&|a| a.0 == Answer::Booked && a.2 <= window_end),
        sold_out,
        failed: offered - booked - sold_out,
        answered_in_window: count(&|a| a.0 != Answer::Failed && a.2 <= window_end),
        seats,
        available_at_end,
        latency: Summary::of(
            answers
                .iter()
                .map(|(_, arrived, answered)| answered.since(*arrived).as_secs_f64() * 1000.0)
                .collect(),
        ),
        throttled: limits.throttled,
        table_throttled: limits.table_throttled,
        conflicts: limits.conflicts,
        gateway_refusals: limits.gateway_refusals,
        function_throttled: limits.function_throttled,
        environments: limits.environments,
        flight_write_units,
        costs,
    }
}

/// A booker's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Booked,
    SoldOut,
    Failed,
}

/// The flight's seats for `sale`.
fn capacity_seats(sale: &Sale, offered: u64) -> u32 {
    sale.seats
        .unwrap_or_else(|| u32::try_from(offered).expect("bounded by MAX_BOOKERS"))
}

/// What each limit refused in one run.
struct Limits {
    throttled: u64,
    table_throttled: u64,
    conflicts: u64,
    gateway_refusals: u64,
    function_throttled: u64,
    environments: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::Dist;

    fn at(profile: &AwsProfile, rate_per_s: u32, shards: u32) -> SaleOutcome {
        sale(
            profile,
            &Sale {
                rate_per_s,
                for_s: 3,
                shards,
                max_per_user: None,
                seats: None,
                seed: 1,
            },
        )
    }

    /// The gateway raised, and every limit but the keys' out of the way: no transaction
    /// conflicts, a table warmed to its quota.
    fn keys_only() -> AwsProfile {
        let mut profile = AwsProfile::published()
            .pre_warmed(40_000)
            .throttled_at(100_000, 100_000);
        profile.transaction_lock = Dist::fixed(0.0);
        profile
    }

    #[test]
    fn a_sale_within_one_shards_limit_keeps_up_and_one_past_it_is_throttled() {
        let mut profile = keys_only();
        // One shard item takes 1,000 write units a second: 500 bookings.
        let under = at(&profile, 300, 1);
        assert!(under.sustained(), "{under:?}");
        assert_eq!((under.throttled, under.conflicts), (0, 0), "{under:?}");
        assert_eq!(under.flight_write_units, 2.0 * under.booked as f64);
        let over = at(&profile, 1_200, 1);
        assert!(over.throttled > 0, "{over:?}");
        // At most the bucket's slack plus 500 a second over the window.
        assert!(over.booked <= 50 + 500 * 4, "{over:?}");
        assert!((under.booked_per_s() - 300.0).abs() < 1.0, "{under:?}");
        assert!(over.failed > 0 && !over.sustained(), "{over:?}");
        // Four shards spread the same rate under their limits.
        let spread = at(&profile, 1_200, 4);
        assert!(spread.sustained(), "{spread:?}");
        // By partition key, as at a sale's opening: each shard is a partition of its own
        // (`infra/aws/TABLE.md`, "Shard partitions"), so four shards carry from the first
        // second what they carry once split; one is throttled as before.
        profile.limit_scope = crate::aws::capacity::Scope::PartitionKey;
        let opening = at(&profile, 1_200, 4);
        assert!(opening.throttled == 0 && opening.sustained(), "{opening:?}");
        assert!(at(&profile, 1_200, 1).throttled > 0);
    }

    #[test]
    fn transactions_on_one_shard_conflict_more_as_its_rate_grows_and_shards_spread_them() {
        let mut profile = keys_only();
        profile.transaction_lock = AwsProfile::published().transaction_lock;
        let slow = at(&profile, 50, 1);
        let fast = at(&profile, 400, 1);
        let spread = at(&profile, 400, 4);
        // A conflict is billed: the shard's units count it too.
        assert!(fast.conflicts > 0, "{fast:?}");
        assert!(
            fast.flight_write_units > 2.0 * fast.booked as f64,
            "{fast:?}"
        );
        let share = |o: &SaleOutcome| o.conflicts as f64 / o.offered as f64;
        assert!(share(&slow) * 4.0 < share(&fast), "{slow:?} {fast:?}");
        assert!(share(&spread) * 2.0 < share(&fast), "{spread:?} {fast:?}");
        // Absorbed by the service's retries at 50/s: every booker booked.
        assert_eq!(slow.booked, slow.offered, "{slow:?}");
    }

    #[test]
    fn a_new_tables_instant_capacity_throttles_a_sale_a_pre_warmed_one_carries() {
        let warmed = keys_only();
        let new_table = warmed.new_table();
        // 600 bookings/s on 16 shards is 6,000 and more write units a second: past a new
        // table's 4,000, within a warmed one's.
        let cold = at(&new_table, 600, 16);
        assert!(cold.table_throttled > 0 && !cold.sustained(), "{cold:?}");
        let warm = at(&warmed, 600, 16);
        assert!(warm.table_throttled == 0 && warm.sustained(), "{warm:?}");
    }

    #[test]
    fn a_sold_out_sale_books_exactly_its_seats_through_every_limit() {
        let outcome = sale(
            &AwsProfile::published().pre_warmed(40_000),
            &Sale {
                rate_per_s: 400,
                for_s: 2,
                shards: 1,
                max_per_user: Some(2),
                seats: Some(300),
                seed: 3,
            },
        );
        assert_eq!(outcome.booked, 300, "{outcome:?}");
        assert!(outcome.balanced(), "{outcome:?}");
        assert_eq!(outcome.booked + outcome.sold_out + outcome.failed, 800);
    }
}
