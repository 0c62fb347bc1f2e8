//! Seed 000's bad hour on the AWS profile: confirms and a storm of seat reads through an
//! upstream outage, and how long the confirms made before, during and after it take to end.

use super::{SETTLE_WITHIN, Summary, aws_world};
use crate::aws::profile::AwsProfile;
use seatgate::domain::{RoomId, SeatId};
use std::time::Duration;

/// Seed 000's bad hour: confirms arriving at `confirms_per_s` for `for_s` seconds, each a new
/// user on one of `seats` seats, beside a storm of seat reads at `reads_per_s` on a tenth of
/// them, while the upstream is down (503, no `Retry-After`) from `outage_at_s` for
/// `outage_for_s` seconds. The gateway is taken as raised for the storm (the template's 50
/// requests a second would refuse most of it before anything here is tried).
#[derive(Debug, Clone)]
pub struct Storm {
    pub confirms_per_s: u32,
    pub reads_per_s: u32,
    pub for_s: u32,
    pub seats: usize,
    pub outage_at_s: u32,
    pub outage_for_s: u32,
    pub seed: u64,
    /// Whether the breaker's wake-ups reach the reaper ([`crate::WorldConfig::wake_ups`]):
    /// off, parked intents wait for the schedule, as before issue 38's item 4.
    pub wake_ups: bool,
}

impl Storm {
    /// The seed's figures: 25 confirms a second, 24,000 reads over the minute, a 40 s outage;
    /// every confirm on a seat of its own, so each needs the upstream.
    pub fn seed_000(seed: u64) -> Storm {
        Storm {
            confirms_per_s: 25,
            reads_per_s: 400,
            for_s: 60,
            seats: 1_500,
            outage_at_s: 10,
            outage_for_s: 40,
            seed,
            wake_ups: true,
        }
    }
}

/// What the storm did.
#[derive(Debug, Clone)]
pub struct StormOutcome {
    pub storm: Storm,
    pub confirmed: usize,
    pub terminal: usize,
    /// Confirm to terminal, for confirms made before, during and after the outage.
    pub before: Summary,
    pub during: Summary,
    pub after: Summary,
    /// Seat reads asked, and the upstream calls they and the confirms made, in all and while
    /// the upstream was down.
    pub reads: u64,
    pub upstream_reads: usize,
    pub upstream_calls_in_outage: usize,
    /// Of those, by route (`Reserve`, `Seat`, ...).
    pub in_outage_by_route: std::collections::BTreeMap<String, usize>,
    pub upstream_reserves: usize,
}

/// The most confirms plus reads a storm sends.
pub const MAX_STORM_REQUESTS: u64 = 200_000;

/// Runs `storm` on `profile`.
pub fn storm(profile: &AwsProfile, storm: &Storm) -> StormOutcome {
    let confirms = u64::from(storm.confirms_per_s) * u64::from(storm.for_s);
    let reads = u64::from(storm.reads_per_s) * u64::from(storm.for_s);
    assert!(
        confirms + reads <= MAX_STORM_REQUESTS && storm.seats >= 10 && storm.confirms_per_s > 0,
        "a storm of at most {MAX_STORM_REQUESTS} requests on at least 10 seats"
    );
    let raised = profile.throttled_at(1_000_000, 1_000_000);
    let spec = storm.clone();
    let mut config = aws_world(&raised, storm.seed);
    config.wake_ups = storm.wake_ups;
    let run = crate::simulate(config, move |world| async move {
        let seats: Vec<SeatId> = (0..spec.seats)
            .map(|i| SeatId::parse(&format!("S-{}", i + 1)).expect("a valid seat id"))
            .collect();
        world
            .upstream()
            .put_room(&RoomId::parse("R-1").expect("a valid room id"), &seats);
        let instances = world.instance_count();
        let mut users = Vec::with_capacity(confirms as usize);
        for i in 0..confirms as usize {
            users.push(world.enrol(&format!("u-{i:06}"), i % instances).await);
        }
        let start = world.now();
        let outage_from = start.plus(Duration::from_secs(u64::from(spec.outage_at_s)));
        let outage_until = outage_from.plus(Duration::from_secs(u64::from(spec.outage_for_s)));
        {
            let world = world.clone();
            let (at, length) = (spec.outage_at_s, spec.outage_for_s);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(u64::from(at))).await;
                world
                    .upstream()
                    .outage_for(Duration::from_secs(u64::from(length)), None);
            });
        }
        let readers = {
            let (world, seats) = (world.clone(), seats.clone());
            let (per_s, total) = (spec.reads_per_s, reads);
            tokio::spawn(async move {
                let interval = Duration::from_secs(1) / per_s.max(1);
                let hot = seats.len() / 10;
                let mut tasks = Vec::with_capacity(total as usize);
                for i in 0..total {
                    let wait = start.plus(interval * i as u32).since(world.now());
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                    let client = world.client("u-000000", i as usize % world.instance_count());
                    let seat = seats[i as usize % hot].clone();
                    tasks.push(tokio::spawn(async move {
                        let _ = client.seat(&seat).await;
                    }));
                }
                for t in tasks {
                    let _ = t.await;
                }
            })
        };
        let interval = Duration::from_secs(1) / spec.confirms_per_s;
        let mut tasks = Vec::with_capacity(users.len());
        for (i, user) in users.into_iter().enumerate() {
            let wait = start.plus(interval * i as u32).since(world.now());
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let seat = seats[i % seats.len()].clone();
            tasks.push(tokio::spawn(async move {
                user.reserve(&seat)
                    .await
                    .ok()
                    .map(|intent| intent.intent_id)
            }));
        }
        let mut confirmed = Vec::with_capacity(tasks.len());
        for task in tasks {
            if let Some(id) = task.await.expect("a user task panicked") {
                confirmed.push(id);
            }
        }
        readers.await.expect("the readers panicked");
        world.settle(SETTLE_WITHIN).await;
        (confirmed, outage_from, outage_until)
    });
    let (confirmed, outage_from, outage_until) = run.value;
    let (mut before, mut during, mut after) = (Vec::new(), Vec::new(), Vec::new());
    let mut terminal = 0;
    for id in &confirmed {
        let Some(history) = run.audit.histories.get(id) else {
            continue;
        };
        let (Some(created), Some(ended)) = (
            history.first().map(|r| r.at),
            history.iter().find(|r| r.to.is_terminal()).map(|r| r.at),
        ) else {
            continue;
        };
        terminal += 1;
        let ms = ended.since(created).as_secs_f64() * 1000.0;
        match created {
            c if c < outage_from => before.push(ms),
            c if c < outage_until => during.push(ms),
            _ => after.push(ms),
        }
    }
    let calls = &run.call_record;
    StormOutcome {
        storm: storm.clone(),
        confirmed: confirmed.len(),
        terminal,
        before: Summary::of(before),
        during: Summary::of(during),
        after: Summary::of(after),
        reads,
        upstream_reads: calls
            .iter()
            .filter(|c| matches!(c.route, crate::Route::Seat | crate::Route::Room))
            .count(),
        upstream_calls_in_outage: calls
            .iter()
            .filter(|c| c.arrived >= outage_from && c.arrived < outage_until)
            .count(),
        in_outage_by_route: calls
            .iter()
            .filter(|c| c.arrived >= outage_from && c.arrived < outage_until)
            .fold(Default::default(), |mut by, c| {
                *by.entry(format!("{:?}", c.route)).or_default() += 1;
                by
            }),
        upstream_reserves: calls
            .iter()
            .filter(|c| c.route == crate::Route::Reserve)
            .count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_holds_its_confirms_until_it_ends_and_spares_the_upstream() {
        let out = storm(
            &AwsProfile::published(),
            &Storm {
                confirms_per_s: 5,
                reads_per_s: 50,
                for_s: 20,
                seats: 100,
                outage_at_s: 5,
                outage_for_s: 10,
                seed: 1,
                wake_ups: true,
            },
        );
        assert_eq!(out.terminal, out.confirmed, "{out:?}");
        assert_eq!(out.confirmed, 100, "{out:?}");
        // Confirms made while the upstream was down end after it is back (each needs it: a
        // seat of its own), later than any made before it ended on a healthy upstream.
        assert!(out.during.p50_ms > 5_000.0, "{out:?}");
        assert!(out.during.p50_ms > out.before.p50_ms, "{out:?}");
        // The breaker keeps the outage's calls below the confirms made in it (50), and the
        // seat-read cache the storm's reads to a tenth.
        assert!(out.upstream_calls_in_outage < 50, "{out:?}");
        assert!((out.upstream_reads as u64) * 10 < out.reads, "{out:?}");
    }

    /// Intents parked behind the outage come back when the breaker's probe finds the upstream
    /// back (its wake-ups), not at the reaper's next pass: without them a confirm parked
    /// during the outage waits for a pass; with them the slowest is done before the median
    /// without.
    #[test]
    fn the_breakers_wake_ups_end_the_outage_for_parked_intents_before_the_schedule_would() {
        let small = |wake_ups| Storm {
            confirms_per_s: 5,
            reads_per_s: 50,
            for_s: 30,
            seats: 200,
            outage_at_s: 5,
            outage_for_s: 10,
            seed: 2,
            wake_ups,
        };
        let profile = AwsProfile::published();
        let (with, without) = (
            storm(&profile, &small(true)),
            storm(&profile, &small(false)),
        );
        for out in [&with, &without] {
            assert_eq!(out.terminal, out.confirmed, "{out:?}");
        }
        // Parked during the outage: the slowest with wake-ups is done before the median
        // without. After it: the slowest waits no pass either.
        assert!(
            with.during.p99_ms < without.during.p50_ms,
            "during: with wake-ups {:?}, without {:?}",
            with.during,
            without.during
        );
        assert!(
            with.after.p99_ms * 2.0 < without.after.p99_ms,
            "after: with wake-ups {:?}, without {:?}",
            with.after,
            without.after
        );
    }
}
