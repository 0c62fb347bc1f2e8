//! Seed 004's flash sale on the AWS profile: bookers at a constant arrival rate, one flight,
//! its shards against DynamoDB's per-key write limits ([`crate::aws::capacity`]).

use super::{Gateway, Summary, aws_world};
use crate::aws::cost::Costs;
use crate::aws::profile::AwsProfile;
use std::sync::Arc;
use std::time::Duration;

/// A flash sale: bookers arrive at a constant `rate_per_s` for `for_s` seconds (seed 004's
/// k6 shape, a constant arrival rate), each a new user booking one seat of one flight of
/// `shards` shards under an `Idempotency-Key`, through the gateway. The flight holds a seat
/// for every booker, so what limits the sale is the pipeline, never the stock.
#[derive(Debug, Clone)]
pub struct Sale {
    pub rate_per_s: u32,
    pub for_s: u32,
    pub shards: u32,
    pub max_per_user: Option<u32>,
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
    /// Bookers who got no booking (store errors or throttling past every retry).
    pub failed: u64,
    /// From a booker's arrival to its answer (the gateway's wait included).
    pub latency: Summary,
    /// Requests DynamoDB refused for throughput (each retried by the service or the client).
    pub throttled: u64,
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
        self.booked * 100 >= self.offered * 99 && self.latency.p99_ms <= 1_000.0
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
        let capacity = u32::try_from(offered).expect("bounded by MAX_BOOKERS");
        world
            .instance(0)
            .api
            .flights()
            .create(flight.clone(), capacity, spec.max_per_user, spec.shards)
            .await
            .expect("the flight is created");
        let created = world.costs().unwrap_or_default();
        let gateway = Arc::new(Gateway::new(
            world
                .config()
                .aws
                .as_ref()
                .map_or(1_000_000, |p| p.api_rate_per_s),
            world
                .config()
                .aws
                .as_ref()
                .map_or(1_000_000, |p| p.api_burst),
        ));
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
            let client = world.client(&format!("b-{i:06}"), i as usize % instances);
            let (world, gateway, flight) = (world.clone(), gateway.clone(), flight.clone());
            tasks.push(tokio::spawn(async move {
                let arrived = world.now();
                gateway.admit(&world).await;
                let key = IdempotencyKey::parse(&format!("sale-{i}")).expect("a valid key");
                let answer = client.book(&flight, 1, Some(&key)).await;
                let booked = matches!(answer, Ok(BookingAnswer::Booked { .. }));
                (booked, arrived, world.now())
            }));
        }
        let mut answers = Vec::with_capacity(tasks.len());
        for task in tasks {
            answers.push(task.await.expect("a booker panicked"));
        }
        world.shutdown().await;
        let capacity = world.capacity().expect("an AWS world meters its table");
        let costs = world.costs().unwrap_or_default().since(&created);
        (
            start,
            answers,
            capacity.throttled(),
            capacity.write_units(),
            costs,
        )
    });
    let (start, answers, throttled, flight_write_units, costs) = run.value;
    let window_end = start.plus(Duration::from_secs(u64::from(sale.for_s) + 1));
    let booked = answers.iter().filter(|a| a.0).count() as u64;
    SaleOutcome {
        sale: sale.clone(),
        offered,
        booked,
        booked_in_window: answers.iter().filter(|a| a.0 && a.2 <= window_end).count() as u64,
        failed: offered - booked,
        latency: Summary::of(
            answers
                .iter()
                .map(|(_, arrived, answered)| answered.since(*arrived).as_secs_f64() * 1000.0)
                .collect(),
        ),
        throttled,
        flight_write_units,
        costs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sale_within_one_shards_limit_keeps_up_and_one_past_it_is_throttled() {
        let mut profile = AwsProfile::published();
        (profile.api_rate_per_s, profile.api_burst) = (100_000, 100_000);
        let at = |profile: &AwsProfile, rate_per_s, shards| {
            sale(
                profile,
                &Sale {
                    rate_per_s,
                    for_s: 3,
                    shards,
                    max_per_user: None,
                    seed: 1,
                },
            )
        };
        // One shard item takes 1,000 write units a second: 500 bookings.
        let under = at(&profile, 300, 1);
        assert!(under.sustained(), "{under:?}");
        assert_eq!(under.throttled, 0, "{under:?}");
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
        // Under one partition key, four shards share one limit.
        profile.limit_scope = crate::aws::capacity::Scope::PartitionKey;
        let shared = at(&profile, 1_200, 4);
        assert!(shared.throttled > 0 && !shared.sustained(), "{shared:?}");
    }
}
