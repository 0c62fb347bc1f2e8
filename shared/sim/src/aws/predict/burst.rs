//! Bursts on the AWS profile. A burst: `users` people confirm at the same instant, user `i` seat `i % seats` (one seat:
//! the same-seat burst of seed 000, where a hundred confirms must cost the upstream one
//! write). Each reaches the API through the HTTP API's stage throttle and an API function
//! environment ([`Front`]), prepares
//! and confirms, as the HTTP contract's client does; the pipeline then runs as deployed (the
//! stream to the relay, the FIFO queue to `worker_concurrency` worker pumps, the upstream).
//! Time to terminal is read from each intent's history in the store: from its confirm's write
//! to its terminal write ("confirm to terminal"), and from the burst's instant
//! ("burst to terminal", which adds the wait at the gateway). Clients' polls are not sent
//! through the gateway: a client of a burst this size should take the webhook, or poll at the
//! contract's pace, and either way its polls do not move the pipeline.
//!
//! Bounds: a burst is at most [`MAX_USERS`] users and settles within [`SETTLE_WITHIN`] of
//! simulated time (a prediction that does not is reported as unsettled, not waited on).

use super::{Front, SETTLE_WITHIN, Summary, aws_world};
use crate::aws::cost::Costs;
use crate::aws::profile::AwsProfile;
use seatgate::domain::{IntentStatus, RoomId, SeatId};

/// The most users a burst takes.
pub const MAX_USERS: usize = 10_000;

/// What a burst is.
#[derive(Debug, Clone)]
pub struct Burst {
    pub users: usize,
    pub seats: usize,
    pub seed: u64,
}

/// What a burst did.
#[derive(Debug, Clone)]
pub struct BurstOutcome {
    pub burst: Burst,
    /// Confirms the API accepted (an intent written).
    pub confirmed: usize,
    /// Of them, terminal by the end; and succeeded.
    pub terminal: usize,
    pub succeeded: usize,
    /// From each intent's confirm write to its terminal write.
    pub confirm_to_terminal: Summary,
    /// From the burst's instant to each intent's terminal write.
    pub burst_to_terminal: Summary,
    /// From the burst's instant until every queue was empty and nothing in flight (seen at
    /// the settle's 50 ms looks): how long the seat's line takes to drain, which a loser closed
    /// by the win no longer waits for.
    pub drained_ms: f64,
    /// Upstream reserve calls the whole burst made.
    pub upstream_reserves: usize,
    /// The most reserves in flight at one instant (`upstream::peak_in_flight`): at most the
    /// worker's cap, `SEAT_GROUPS_AT_ONCE` x `worker_concurrency`.
    pub peak_reserves_in_flight: usize,
    /// Requests the gateway answered 429 (then sent again).
    pub gateway_refusals: u64,
    /// What the burst cost on DynamoDB (enrolment excluded).
    pub costs: Costs,
}

/// Runs `burst` on `profile`.
pub fn burst(profile: &AwsProfile, burst: &Burst) -> BurstOutcome {
    assert!(
        (1..=MAX_USERS).contains(&burst.users) && burst.seats >= 1,
        "a burst of 1 to {MAX_USERS} users on at least one seat"
    );
    let spec = burst.clone();
    let run = crate::simulate(aws_world(profile, burst.seed), move |world| async move {
        let seats: Vec<SeatId> = (0..spec.seats)
            .map(|i| SeatId::parse(&format!("S-{}", i + 1)).expect("a valid seat id"))
            .collect();
        let room = RoomId::parse("R-1").expect("a valid room id");
        world.upstream().put_room(&room, &seats);
        let instances = world.instance_count();
        let mut users = Vec::with_capacity(spec.users);
        for i in 0..spec.users {
            users.push(world.enrol(&format!("u-{i:05}"), i % instances).await);
        }
        let start = world.now();
        let enrolled = world.costs().unwrap_or_default();
        let front = Front::of(&world);
        let tasks: Vec<_> = users
            .into_iter()
            .enumerate()
            .map(|(i, user)| {
                let (user, seat) = (user.through(front.clone()), seats[i % seats.len()].clone());
                tokio::spawn(async move {
                    // Two requests through the front: the prepare, then the confirm.
                    user.reserve(&seat)
                        .await
                        .ok()
                        .map(|intent| intent.intent_id)
                })
            })
            .collect();
        let mut confirmed = Vec::with_capacity(tasks.len());
        for task in tasks {
            if let Some(id) = task.await.expect("a user task panicked") {
                confirmed.push(id);
            }
        }
        world.settle(SETTLE_WITHIN).await;
        let drained_ms = world.now().since(start).as_secs_f64() * 1000.0;
        let costs = world.costs().unwrap_or_default().since(&enrolled);
        (start, confirmed, front.gateway.refused(), costs, drained_ms)
    });
    let (start, confirmed, gateway_refusals, costs, drained_ms) = run.value;
    let (mut to_terminal, mut from_burst) = (Vec::new(), Vec::new());
    let (mut terminal, mut succeeded) = (0, 0);
    for id in &confirmed {
        let Some(history) = run.audit.histories.get(id) else {
            continue;
        };
        let created = history.first().map(|r| r.at);
        let ended = history.iter().find(|r| r.to.is_terminal());
        if let (Some(created), Some(ended)) = (created, ended) {
            terminal += 1;
            succeeded += usize::from(ended.to == IntentStatus::Succeeded);
            to_terminal.push(ended.at.since(created).as_secs_f64() * 1000.0);
            from_burst.push(ended.at.since(start).as_secs_f64() * 1000.0);
        }
    }
    BurstOutcome {
        burst: burst.clone(),
        confirmed: confirmed.len(),
        terminal,
        succeeded,
        confirm_to_terminal: Summary::of(to_terminal),
        burst_to_terminal: Summary::of(from_burst),
        drained_ms,
        upstream_reserves: run
            .call_record
            .iter()
            .filter(|c| c.route == crate::Route::Reserve)
            .count(),
        peak_reserves_in_flight: crate::upstream::peak_in_flight(
            &run.call_record,
            crate::Route::Reserve,
        ),
        gateway_refusals,
        costs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_same_seat_burst_on_aws_costs_one_reserve_and_takes_the_profiles_time() {
        let profile = AwsProfile::published();
        let out = burst(
            &profile,
            &Burst {
                users: 30,
                seats: 1,
                seed: 1,
            },
        );
        assert_eq!(out.confirmed, 30);
        assert_eq!(out.terminal, 30, "{out:?}");
        assert_eq!(out.succeeded, 1, "{out:?}");
        assert_eq!(out.upstream_reserves, 1, "{out:?}");
        // The stream alone takes 213 ms at its median: no intent can end sooner than a
        // delivery plus a transaction.
        assert!(out.confirm_to_terminal.p50_ms > 100.0, "{out:?}");
        // The same burst with every store call instant and the mappings at their local
        // pickups ends far sooner: the profile is what the figure measures.
        let mut fast = profile.clone();
        for input in crate::aws::Input::ALL {
            fast = fast.with(input, 0.0);
        }
        let quick = burst(
            &fast,
            &Burst {
                users: 30,
                seats: 1,
                seed: 1,
            },
        );
        assert_eq!(quick.upstream_reserves, 1);
        assert!(
            quick.confirm_to_terminal.p50_ms * 2.0 < out.confirm_to_terminal.p50_ms,
            "{quick:?} against {out:?}"
        );
    }

    #[test]
    fn batches_spanning_seats_reserve_them_together_within_the_fleets_cap() {
        use seatgate::service::worker::SEAT_GROUPS_AT_ONCE;
        // One message per seat: SQS fills each batch with ten seats' groups, and each batch
        // works five of them at once, so the upstream sees up to five reserves per worker, and
        // never more.
        let mut profile = AwsProfile::published().throttled_at(100_000, 100_000);
        profile.worker_concurrency = 3;
        let cap = SEAT_GROUPS_AT_ONCE * profile.worker_concurrency;
        let spread = burst(
            &profile,
            &Burst {
                users: 120,
                seats: 120,
                seed: 3,
            },
        );
        assert_eq!(spread.upstream_reserves, 120, "{spread:?}");
        assert_eq!(spread.terminal, 120, "{spread:?}");
        assert!(
            spread.peak_reserves_in_flight <= cap,
            "{} reserves in flight, over the cap of {cap}",
            spread.peak_reserves_in_flight
        );
        assert!(
            spread.peak_reserves_in_flight > 2 * profile.worker_concurrency,
            "batches of many seats work them together: {} in flight",
            spread.peak_reserves_in_flight
        );
    }

    #[test]
    fn each_batch_of_one_seats_burst_waits_for_the_mappings_receive_and_invoke() {
        // One seat is one FIFO group: 100 confirms are 10 batches in a row, and each batch
        // after the first comes a delivery latency after the last. The losers are closed by
        // the win, so it is the line's drain that waits, not their answers.
        let at = |delivery_ms: f64| {
            let mut profile = AwsProfile::published().throttled_at(100_000, 100_000);
            profile.fifo_delivery = crate::aws::Dist::fixed(delivery_ms);
            burst(
                &profile,
                &Burst {
                    users: 100,
                    seats: 1,
                    seed: 2,
                },
            )
        };
        let (quick, slow) = (at(1.0), at(100.0));
        assert_eq!((quick.upstream_reserves, slow.upstream_reserves), (1, 1));
        let gained = slow.drained_ms - quick.drained_ms;
        // Nine gaps between ten batches, 99 ms longer each (the first delivery too), less
        // the settle's 50 ms look.
        assert!(
            gained >= 9.0 * 99.0 - 50.0,
            "{gained} ms: {quick:?} against {slow:?}"
        );
        // The answers do not: the win closes the other 99 at once, so the slowest answer
        // waits for a delivery or two (the first message's, the win's batch), not for ten.
        let answered = slow.confirm_to_terminal.max_ms - quick.confirm_to_terminal.max_ms;
        assert!(
            answered < 3.0 * 99.0,
            "{answered} ms: {quick:?} against {slow:?}"
        );
    }
}
