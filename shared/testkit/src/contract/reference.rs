//! Reference semantics, property style: random transitions through the port compared with
//! `Intent::apply`.

#[allow(unused_imports)]
use super::fixtures::*;
#[allow(unused_imports)]
use super::*;

/// xorshift64*: deterministic, so a failing sequence replays exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize].clone()
    }

    /// `value` nudged by -1, 0 or +1 (a stale, the current or a future token or version).
    fn near(&mut self, value: u64) -> u64 {
        match self.below(4) {
            0 => value.saturating_sub(1),
            1 => value + 1,
            _ => value,
        }
    }
}

/// One transition drawn for `current` at `now`: any of the kinds, with tokens and versions
/// near the intent's own (stale, current or future) so that both outcomes come up.
fn random_transition(rng: &mut Rng, current: &Intent, now: Millis, step: usize) -> Transition {
    let suppress = rng.chance(40).then(|| Suppression {
        seat_id: current.seat_id.clone(),
        intent_id: current.intent_id.clone(),
        until: now.plus(Duration::from_millis(rng.below(10_000))),
        winner: rng.chance(50).then(|| current.user_id.clone()),
    });
    let later = |rng: &mut Rng| now.plus(Duration::from_millis(rng.below(5_000)));
    match rng.below(6) {
        5 => Transition::Release {
            token: rng.near(current.fencing_token),
            back_to: rng.pick(&[BackTo::Requested, BackTo::WaitingForSeat]),
            next_attempt_at: later(rng),
            due_at: later(rng),
        },
        0 => Transition::Claim {
            lease_until: later(rng),
            due_at: later(rng),
        },
        1 => Transition::Complete {
            token: rng.near(current.fencing_token),
            status: rng.pick(&[
                Terminal::Succeeded,
                Terminal::FailedRace,
                Terminal::FailedAuth,
                Terminal::FailedUpstream,
            ]),
            charge_id: rng.chance(50).then(|| format!("charge-{step}")),
            reason: rng.pick(&[
                Reason::Reserved,
                Reason::ChargeRead,
                Reason::NoCharge,
                Reason::UpstreamRefused(400 + (step % 100) as u16),
            ]),
            suppress,
        },
        2 => Transition::Rewait {
            token: rng.near(current.fencing_token),
            next_attempt_at: later(rng),
            due_at: later(rng),
            reason: Reason::SeatTaken,
            suppress,
        },
        3 => {
            let statuses = [
                IntentStatus::Requested,
                IntentStatus::WaitingForSeat,
                IntentStatus::Reserving,
            ];
            let from = statuses.into_iter().filter(|_| rng.chance(50)).collect();
            let owner = match rng.below(3) {
                0 => None,
                1 => Some(current.user_id.clone()),
                _ => Some(new_user()),
            };
            Transition::Close {
                from,
                owner,
                deadline_passed: rng.chance(30),
                status: rng.pick(&[
                    Terminal::Cancelled,
                    Terminal::WaitExpired,
                    Terminal::FailedRace,
                ]),
                reason: rng.pick(&[Reason::Cancelled, Reason::Deadline, Reason::SeatTaken]),
            }
        }
        _ => Transition::Bump {
            from: rng.pick(&[
                current.status,
                IntentStatus::Requested,
                IntentStatus::WaitingForSeat,
            ]),
            version: rng.near(current.version),
            next_attempt_at: rng.chance(50).then(|| later(rng)),
            due_at: later(rng),
            requeue: rng.chance(50),
        },
    }
}

pub async fn transitions_match_reference_semantics(h: &Harness) {
    const SEED: u64 = 0x5ea7_9a7e_2024_0001;
    const STEPS: usize = 240;
    let mut rng = Rng(SEED);
    let mut now = h.now();
    let mut model: Vec<Intent> = Vec::new();
    for i in 0..4 {
        model.push(if i % 2 == 0 {
            requested_intent(h).await
        } else {
            waiting_intent(h, now.plus(Duration::from_secs(30))).await
        });
    }
    // What the store must answer for each seat's suppression, as far as this case wrote them.
    let mut suppressions: HashMap<SeatId, Suppression> = HashMap::new();
    let (mut applied_n, mut refused_n) = (0, 0);

    for step in 0..STEPS {
        let slot = rng.below(model.len() as u64) as usize;
        now = now.plus(Duration::from_millis(rng.below(3_000)));
        let current = model[slot].clone();
        let transition = random_transition(&mut rng, &current, now, step);
        let req = request(&current, now, transition);
        let context = || format!("step {step} (seed {SEED:#x}): {req:?} on {current:?}");
        match (current.apply(&req), h.intents.transition(&req).await) {
            (Some(expected), Ok(got)) => {
                assert_eq!(got, expected, "{}", context());
                if let Some(s) = req.suppression() {
                    let s = s.clone().over(suppressions.get(&s.seat_id));
                    suppressions.insert(s.seat_id.clone(), s);
                }
                model[slot] = expected;
                applied_n += 1;
            }
            (None, Err(TransitionError::Refused(seen))) => {
                assert_eq!(*seen, current, "refusal's state, {}", context());
                refused_n += 1;
            }
            (expected, got) => panic!(
                "reference says {:?}, store says {got:?}: {}",
                expected.map(|i| i.status),
                context()
            ),
        }
        assert_eq!(
            h.intents
                .get_intent(&current.intent_id)
                .await
                .unwrap()
                .as_ref(),
            Some(&model[slot]),
            "stored state, {}",
            context()
        );
        seat_items_match(h, &current.seat_id, now, &suppressions, &context).await;
        // Keep the sequence interesting: a settled intent makes room for a fresh one.
        if model[slot].status.is_terminal() {
            model[slot] = if rng.chance(50) {
                requested_intent(h).await
            } else {
                waiting_intent(h, now.plus(Duration::from_millis(rng.below(20_000)))).await
            };
        }
    }
    assert!(
        applied_n >= STEPS / 5 && refused_n >= STEPS / 5,
        "the sequence should exercise both outcomes ({applied_n} applied, {refused_n} refused)"
    );
}

/// The seat items the case wrote so far, as the store must answer them: the suppression in
/// force at `now`, and the last one written whatever its window.
async fn seat_items_match(
    h: &Harness,
    seat: &SeatId,
    now: Millis,
    suppressions: &HashMap<SeatId, Suppression>,
    context: &impl Fn() -> String,
) {
    let expected_suppression = suppressions.get(seat).filter(|s| s.until > now).cloned();
    assert_eq!(
        h.intents.suppression(seat, now).await.unwrap(),
        expected_suppression,
        "suppression, {}",
        context()
    );
    assert_eq!(
        h.intents.last_taken(seat).await.unwrap().as_ref(),
        suppressions.get(seat),
        "last taken, {}",
        context()
    );
}
