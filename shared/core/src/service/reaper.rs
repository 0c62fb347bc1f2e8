//! The reaper: the scheduled pass that gives every non-terminal intent a path to an end.
//!
//! It queries the due index (`due_at <= now`) and, per intent, RESERVING ones first (each has
//! its seat claimed, so every other intent of that seat waits on it):
//! - RESERVING past its lease + grace: the attempt can no longer be in flight (lease > worker
//!   timeout + upstream timeout + margin), so its outcome is settled by *reading* the user's
//!   current charge, never by sending the reserve again. Charge on this seat -> SUCCEEDED;
//!   none -> FAILED_UPSTREAM (a wait goes back to waiting); credential refused -> FAILED_AUTH.
//!   Each settlement releases the seat's claim. Upstream unreadable -> its due time is pushed out
//!   (a pause that grows with how long it has been overdue), so one unreadable charge never
//!   blocks the rest of the pass; past `max_unsettled` it is counted and logged as an alarm.
//! - WAITING_FOR_SEAT past its deadline -> WAIT_EXPIRED. Due: its seat is read through the
//!   seat-read cache (however many waits ask, at most one upstream read per TTL); free -> a new
//!   version, which the relay enqueues into the seat's group; taken or unreadable -> looked at
//!   again after a pause that grows with the wait's age up to `wait_backoff_max`, jittered so a
//!   thousand waits registered together do not come due together, and never before the seat
//!   can be read again (a failed refresh's pause, the breaker, a `Retry-After` pause).
//! - While the upstream's breaker is open, no charge is read: each expired lease is looked at
//!   again at the breaker's next probe time.
//! - REQUESTED back in line after a busy upstream, once its retry time came -> a new version,
//!   enqueued again. REQUESTED untouched for `requeue_after` (its message was lost or
//!   dead-lettered) -> a new version, enqueued again; after `max_requeues`, FAILED_UPSTREAM.
//!
//! Every action is one conditional write; a refusal means someone else moved the intent first.
//! A pass stops starting work after `reaper_pass_budget`, well inside the function's timeout, and
//! says how much it left for the next one. An invocation ([`Reaper::run`]) runs passes back to
//! back while each finds a full `PASS_LIMIT` and finishes it, within that one budget: intents
//! parked behind an outage all come due at its end, and are woken together, not 500 a minute.
//!
//! Each pass records its duration and what it left ([`Metric::ReaperPassDuration`],
//! [`Metric::ReaperLeft`], [`Metric::UnsettledPastMax`]); each settled lease is a
//! [`Metric::AttemptsSettled`], each wait woken because its seat read free a
//! [`Metric::Waits`] `enqueued`, and every write that ends an intent goes through
//! [`record::if_terminal`] (in [`Reaper::write`], which all of them pass).

use super::with_retry;
use super::{GuardedUpstream, SeatReadError, SeatReads};
use crate::config::Timing;
use crate::domain::{Intent, IntentStatus, Millis, Outcome, Reason, Transition, TransitionRequest};
use crate::metrics::{self, Metric, record};
use crate::ports::{
    ChargeReadError, Clock, Credentials, Intents, StoreError, TransitionError, Upstream,
};
use futures::StreamExt;
use std::sync::Arc;
use tracing::{error, info, warn};

pub use crate::ports::ReaperReport;

/// Due intents one scheduled pass takes at most (an admin pass too); a backlog larger than this
/// is drained over the next passes.
pub const PASS_LIMIT: usize = 500;

/// Passes one invocation runs at most ([`Reaper::run`]): with [`PASS_LIMIT`], 4,000 due intents
/// a schedule period.
pub const MAX_PASSES: usize = 8;

enum Done {
    Succeeded,
    Failed,
    Woken,
    Expired,
    Requeued,
    GivenUp,
    Rechecked,
    Postponed,
    Deferred,
}

/// Logged (and matched by the template's metric filter) for each attempt unsettled past its
/// maximum age.
pub const OVERDUE_MESSAGE: &str = "attempt unsettled past its maximum age";

pub struct Reaper {
    intents: Arc<dyn Intents>,
    checkout: Arc<super::CheckoutService>,
    credentials: Arc<dyn Credentials>,
    upstream: Arc<GuardedUpstream>,
    reads: Arc<SeatReads>,
    clock: Arc<dyn Clock>,
    random: Arc<dyn crate::ports::Random>,
    timing: Timing,
}

const CONCURRENCY: usize = 8;

/// Due intents a wake-up looks at to find one parked behind the upstream (whose seat the
/// probe reads): parked intents come due together, so the first few suffice.
const WAKE_LOOKAHEAD: usize = 16;

/// Whether `intent` waits on the upstream rather than on time alone: REQUESTED and put back in
/// line by the worker (an open breaker, a route's pause, a busy answer: its retry time set after its
/// last write), or a wait (its re-check is a seat read, which the same outage postponed).
fn parked_behind_upstream(intent: &Intent) -> bool {
    match intent.status {
        IntentStatus::Requested => intent
            .next_attempt_at
            .is_some_and(|t| t > intent.updated_at),
        IntentStatus::WaitingForSeat => true,
        _ => false,
    }
}

/// When `intent` counts as due in a pass at `now`: `horizon` (a lease ahead) if it was parked
/// behind the upstream before `early`, the time the upstream was found open; `now` otherwise.
/// Intents parked after that time (the breaker reopened by the woken burst, a busy answer's
/// back-off) wait for their own time, or every pass of the run would wake them again.
fn due_as_of(intent: &Intent, now: Millis, horizon: Millis, early: Option<Millis>) -> Millis {
    match early {
        Some(decided) if parked_behind_upstream(intent) && intent.updated_at < decided => horizon,
        _ => now,
    }
}

/// Whether a wait is due by `as_of`. Its deadline is judged against the pass's own time
/// before this: a wait woken early may end within the lease and is still worth its look.
fn wait_due(intent: &Intent, as_of: Millis) -> bool {
    intent.status == IntentStatus::WaitingForSeat
        && intent.next_attempt_at.is_none_or(|t| t <= as_of)
}

impl Reaper {
    pub(crate) fn new(services: &super::Services, timing: &Timing) -> Self {
        let ports = services.ports();
        Self {
            intents: ports.intents.clone(),
            checkout: services.checkout().clone(),
            credentials: ports.credentials.clone(),
            upstream: services.upstream().clone(),
            reads: services.reads().clone(),
            clock: ports.clock.clone(),
            random: ports.random.clone(),
            timing: timing.clone(),
        }
    }

    /// What one invocation does: a pass over at most `limit` due intents, and, while a pass
    /// found a full `limit` of them and moved every one on (none left, none deferred), another
    /// at once, all within one
    /// `reaper_pass_budget` and at most [`MAX_PASSES`] passes. A backlog (a thousand intents
    /// parked behind an outage come due together) is then woken in seconds, in due order, not
    /// `limit` a schedule period; the queue and the workers' concurrency pace them from there.
    pub async fn run(&self, limit: usize) -> Result<ReaperReport, StoreError> {
        self.run_passes(limit, None).await
    }

    /// What a wake-up does ([`crate::ports::WakeUps`]: the breaker's probe time, a pause's end,
    /// a probe that found the upstream back): `run`, but first, if intents are parked behind
    /// the upstream, the reserve route is asked whether it is open (sending the breaker's probe,
    /// a read of the first parked intent's seat, when one is due). If it is, everything parked
    /// behind the upstream is put back in line at once: also what was parked behind a probe
    /// still in flight, due within one upstream call's lease, which would otherwise wait for
    /// the next schedule. Back in line, they reach the upstream at the pace the seat queue and
    /// the workers' concurrency allow (the fleet's upstream cap), in due order.
    pub async fn wake(&self, limit: usize) -> Result<ReaperReport, StoreError> {
        let horizon = self.clock.now().plus(self.timing.upstream_call_lease());
        let due = with_retry(&*self.random, || {
            self.intents.due_intents(horizon, WAKE_LOOKAHEAD)
        })
        .await?;
        // Only what was parked before the upstream was found open is taken early ([`due_as_of`]).
        let decided = self.clock.now();
        let early = match due.iter().find(|i| parked_behind_upstream(i)) {
            Some(first) => self
                .upstream
                .ready(&first.seat_id)
                .await
                .is_ok()
                .then_some(decided),
            None => None,
        };
        metrics::count(
            Metric::ReaperWakes,
            &[("upstream", if early.is_some() { "open" } else { "shut" })],
            1,
        );
        self.run_passes(limit, early).await
    }

    /// Passes as [`Reaper::run`] describes; `early`: the upstream was found open at that time,
    /// so what was parked behind it before then is due up to one upstream call's lease ahead.
    async fn run_passes(
        &self,
        limit: usize,
        early: Option<Millis>,
    ) -> Result<ReaperReport, StoreError> {
        let started = self.clock.now();
        let budget = self.timing.reaper_pass_budget;
        let mut total = ReaperReport::default();
        for _pass in 0..MAX_PASSES {
            let spent = self.clock.now().since(started);
            let report = self
                .run_within(limit, budget.saturating_sub(spent), early)
                .await?;
            let full = report.examined + report.left >= limit && limit > 0;
            // Deferred intents (a store error, a lost race) are still due: another pass now
            // would meet them again, so a pass that deferred any ends the invocation.
            let finished = report.left == 0 && report.deferred == 0;
            total.absorb(&report);
            if !(full && finished) || self.clock.now().since(started) >= budget {
                break;
            }
        }
        Ok(total)
    }

    /// One pass over at most `limit` due intents, within the whole `reaper_pass_budget`.
    pub async fn run_once(&self, limit: usize) -> Result<ReaperReport, StoreError> {
        self.run_within(limit, self.timing.reaper_pass_budget, None)
            .await
    }

    /// One pass over at most `limit` due intents, starting none after `budget`; `early` as in
    /// [`Reaper::run_passes`].
    async fn run_within(
        &self,
        limit: usize,
        budget: std::time::Duration,
        early: Option<Millis>,
    ) -> Result<ReaperReport, StoreError> {
        let started = self.clock.now();
        let now = self.clock.now();
        // The time "due" is judged by: now, or a lease ahead for what was parked behind an
        // upstream before it was found open again. Nothing else is taken early.
        let horizon = match early {
            Some(_) => now.plus(self.timing.upstream_call_lease()),
            None => now,
        };
        let as_of = |i: &Intent| due_as_of(i, now, horizon, early);
        let mut due =
            with_retry(&*self.random, || self.intents.due_intents(horizon, limit)).await?;
        due.retain(|i| i.due_at.is_some_and(|d| d <= now) || as_of(i) > now);
        // Claimed seats first; otherwise the index's order (oldest due first). A stable sort.
        due.sort_by_key(|i| i.status != IntentStatus::Reserving);
        let mut report = ReaperReport::default();
        let overdue = std::sync::atomic::AtomicUsize::new(0);
        // Collected first so the iterator's closure is not part of the future: keeps it `Send`.
        let passes: Vec<_> = due
            .iter()
            .map(|i| self.reap(i, now, as_of(i), &overdue))
            .collect();
        // At most CONCURRENCY at once, and none started once the budget is spent. (A plain loop
        // rather than stream combinators, whose closures would make this future not `Send`.)
        let mut pending = passes.into_iter();
        let mut running = futures::stream::FuturesUnordered::new();
        let mut outcomes: Vec<Done> = Vec::with_capacity(due.len());
        loop {
            while running.len() < CONCURRENCY && self.clock.now().since(started) < budget {
                match pending.next() {
                    Some(pass) => running.push(pass),
                    None => break,
                }
            }
            match running.next().await {
                Some(outcome) => outcomes.push(outcome),
                None => break,
            }
        }
        drop((pending, running));
        report.examined = outcomes.len();
        report.left = due.len() - outcomes.len();
        report.overdue = overdue.load(std::sync::atomic::Ordering::Relaxed);
        // Checkout holds past their deadline, in what is left of the budget: each one
        // conditional transaction, so a hold confirmed meanwhile is simply not returned.
        let spent = self.clock.now().since(started);
        let holds = self
            .checkout
            .lapse_due(limit, budget.saturating_sub(spent))
            .await?;
        report.holds_lapsed = holds.lapsed;
        report.holds_left = holds.left;
        for outcome in outcomes {
            match outcome {
                Done::Succeeded => report.settled_succeeded += 1,
                Done::Failed => report.settled_failed += 1,
                Done::Woken => report.woken += 1,
                Done::Expired => report.expired += 1,
                Done::Requeued => report.requeued += 1,
                Done::GivenUp => report.given_up += 1,
                Done::Rechecked => report.rechecked += 1,
                Done::Postponed => report.postponed += 1,
                Done::Deferred => report.deferred += 1,
            }
        }
        record_pass(&report, due.len() >= limit, self.clock.now().since(started));
        if report.left > 0 {
            warn!(
                ?report,
                budget_ms = budget.as_millis() as u64,
                "reaper pass out of time; the rest is for the next pass"
            );
        } else if report.examined > 0 {
            info!(?report, "reaper pass");
        }
        Ok(report)
    }

    /// Moves one due intent on; `as_of` is when a wait or a parked intent counts as due.
    async fn reap(
        &self,
        intent: &Intent,
        now: Millis,
        as_of: Millis,
        overdue: &std::sync::atomic::AtomicUsize,
    ) -> Done {
        let result = match intent.status {
            IntentStatus::Reserving => self.settle_expired_lease(intent, now, overdue).await,
            IntentStatus::WaitingForSeat => self.move_wait(intent, now, as_of).await,
            IntentStatus::Requested => self.requeue(intent, now, as_of).await,
            _ => Ok(Done::Deferred),
        };
        result.unwrap_or_else(|e| {
            warn!(intent_id = %intent.intent_id, error = %e, "reaper write failed; next pass");
            Done::Deferred
        })
    }

    async fn settle_expired_lease(
        &self,
        intent: &Intent,
        now: Millis,
        overdue_count: &std::sync::atomic::AtomicUsize,
    ) -> Result<Done, StoreError> {
        // The index may lag the item; the lease itself is the rule.
        let Some(settle_from) = intent.lease_until.map(|l| l.plus(self.timing.reaper_grace)) else {
            return Ok(Done::Deferred);
        };
        if settle_from > now {
            return Ok(Done::Deferred);
        }
        let overdue = now.since(settle_from);
        if overdue >= self.timing.max_unsettled {
            overdue_count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            error!(intent_id = %intent.intent_id, seat_id = %intent.seat_id, overdue_s = overdue.as_secs(), "{OVERDUE_MESSAGE}");
        }
        let credential = with_retry(&*self.random, || {
            self.credentials.credential(&intent.user_id)
        })
        .await?;
        let outcome = match credential {
            None => Outcome::NoCredential,
            Some(credential) => match self.upstream.current_charge(&credential).await {
                Ok(Some(charge)) if charge.seat_id == intent.seat_id => Outcome::Charged {
                    charge_id: charge.charge_id,
                    how: Reason::ChargeRead,
                },
                Ok(_) => Outcome::NoCharge,
                Err(ChargeReadError::CredentialRejected) => Outcome::CredentialRejected,
                Err(ChargeReadError::HeldBack(until)) => {
                    let request = TransitionRequest::new(
                        intent.intent_id.clone(),
                        now,
                        Transition::postpone(intent.version, until.max(now)),
                    );
                    return Ok(self
                        .write(intent, &request)
                        .await?
                        .map_or(Done::Deferred, |_| Done::Postponed));
                }
                Err(
                    why @ (ChargeReadError::Busy { .. }
                    | ChargeReadError::Failed(_)
                    | ChargeReadError::Refused(_)),
                ) => {
                    let mut pause = self.timing.settle_retry(overdue);
                    // Never before the upstream said it may be asked again.
                    if let ChargeReadError::Busy {
                        retry_after: Some(d),
                    } = why
                    {
                        pause = pause.max(d.min(self.timing.retry_after_max));
                    }
                    warn!(intent_id = %intent.intent_id, reason = %why, retry_in_ms = pause.as_millis() as u64, "charge unreadable; the seat stays claimed");
                    let request = TransitionRequest::new(
                        intent.intent_id.clone(),
                        now,
                        Transition::postpone(intent.version, now.plus(pause)),
                    );
                    return Ok(self
                        .write(intent, &request)
                        .await?
                        .map_or(Done::Deferred, |_| Done::Postponed));
                }
            },
        };
        let request = intent.settle(outcome.clone(), now, &self.timing);
        match self.write(intent, &request).await? {
            Some(done) => {
                record::attempt_settled(&outcome);
                info!(intent_id = %intent.intent_id, seat_id = %intent.seat_id, status = done.status.as_str(), "expired lease settled by charge read");
                if done.status == IntentStatus::Succeeded {
                    // The settlement recorded the seat taken; this instance's copy is older.
                    self.reads.forget(&intent.seat_id).await;
                }
                Ok(if done.status == IntentStatus::Succeeded {
                    Done::Succeeded
                } else {
                    Done::Failed
                })
            }
            None => Ok(Done::Deferred),
        }
    }

    async fn move_wait(
        &self,
        intent: &Intent,
        now: Millis,
        as_of: Millis,
    ) -> Result<Done, StoreError> {
        if intent.deadline.is_some_and(|d| d <= now) {
            let request = TransitionRequest::new(
                intent.intent_id.clone(),
                now,
                Transition::expire_wait(true),
            );
            return Ok(self
                .write(intent, &request)
                .await?
                .map_or(Done::Deferred, |_| Done::Expired));
        }
        if !wait_due(intent, as_of) {
            return Ok(Done::Deferred);
        }
        // While the seat cannot be read (its last refresh failed, the breaker is open, a
        // Retry-After pauses seat reads) the wait looks again only once it can be.
        let (free, not_before) = match self.reads.seat(&intent.seat_id).await {
            Ok(served) => (
                served.reading.seat_available() == Some(true),
                served.retry_at,
            ),
            Err(SeatReadError::Unavailable { retry_at }) => {
                info!(intent_id = %intent.intent_id, seat_id = %intent.seat_id, "seat unreadable; the wait looks again once it can be read");
                (false, Some(retry_at))
            }
            Err(e) => {
                info!(intent_id = %intent.intent_id, seat_id = %intent.seat_id, error = %e, "seat unreadable; the wait looks again later");
                (false, None)
            }
        };
        if !free {
            let pause = self
                .timing
                .wait_recheck(now.since(intent.created_at), |max| self.random.up_to(max));
            let mut recheck_at = now.plus(pause);
            if let Some(t) = not_before {
                recheck_at = recheck_at.max(t);
            }
            let request = TransitionRequest::new(
                intent.intent_id.clone(),
                now,
                intent.recheck_at(recheck_at),
            );
            return Ok(self
                .write(intent, &request)
                .await?
                .map_or(Done::Deferred, |_| Done::Rechecked));
        }
        // Due again after `requeue_after` in case this wake-up's message is lost too.
        let mut due_at = now.plus(self.timing.requeue_after);
        if let Some(deadline) = intent.deadline {
            due_at = due_at.min(deadline);
        }
        // Woken early (the seat read it waited for is possible again sooner), its re-check
        // time becomes now, so the relay does not hold it back; otherwise it stays as it was.
        let request = TransitionRequest::new(
            intent.intent_id.clone(),
            now,
            Transition::wake(
                intent.version,
                intent.next_attempt_at.map(|t| t.min(now)),
                due_at,
            ),
        );
        let woken = self.write(intent, &request).await?;
        if woken.is_some() {
            metrics::count(Metric::Waits, &[("event", "enqueued")], 1);
        }
        Ok(woken.map_or(Done::Deferred, |_| Done::Woken))
    }

    async fn requeue(
        &self,
        intent: &Intent,
        now: Millis,
        as_of: Millis,
    ) -> Result<Done, StoreError> {
        // Put back in line by a busy upstream (its retry time set after its last write) and not
        // yet woken: wake it once that time has come. It is not a lost message.
        if let Some(retry_at) = intent.next_attempt_at.filter(|t| *t > intent.updated_at) {
            if retry_at > as_of {
                return Ok(Done::Deferred);
            }
            let request = TransitionRequest::new(
                intent.intent_id.clone(),
                now,
                // Its attempt time: as it was, or now if woken before it.
                Transition::retry(
                    intent.version,
                    retry_at.min(now),
                    now.plus(self.timing.requeue_after),
                ),
            );
            return Ok(self
                .write(intent, &request)
                .await?
                .map_or(Done::Deferred, |_| Done::Woken));
        }
        if intent.updated_at.plus(self.timing.requeue_after) > now {
            return Ok(Done::Deferred);
        }
        // Its message is not lost but handed back while another attempt has claimed the seat (and may
        // even have been dead-lettered meanwhile): requeuing would only count it towards giving
        // up. Once that attempt is settled, a later pass requeues it if it is still here.
        let claim = with_retry(&*self.random, || self.intents.seat_claim(&intent.seat_id)).await?;
        if claim.is_some_and(|h| h.intent_id != intent.intent_id) {
            return Ok(Done::Deferred);
        }
        let (transition, done) = if intent.requeues >= self.timing.max_requeues {
            (Transition::never_processed(), Done::GivenUp)
        } else {
            (
                Transition::requeue(intent.version, now.plus(self.timing.requeue_after)),
                Done::Requeued,
            )
        };
        let request = TransitionRequest::new(intent.intent_id.clone(), now, transition);
        let written = self.write(intent, &request).await?;
        if written.is_some() {
            warn!(intent_id = %intent.intent_id, requeues = intent.requeues, "REQUESTED intent without progress: requeued or closed");
        }
        Ok(written.map_or(Done::Deferred, |_| done))
    }

    /// One conditional write on `before`; `None` if refused (someone else moved the intent
    /// first). A refusal that shows this very write's result (a retry after the first try
    /// committed) is the write's success.
    async fn write(
        &self,
        before: &Intent,
        request: &TransitionRequest,
    ) -> Result<Option<Intent>, StoreError> {
        // The due index's copy pins the write: a stale copy costs a refused try, no read.
        let pinned = request.clone().seen_as(before);
        let written = match with_retry(&*self.random, || self.intents.transition(&pinned)).await {
            Ok(intent) => intent,
            Err(TransitionError::Refused(current)) if current.is_result_of(before, request) => {
                *current
            }
            Err(TransitionError::Refused(_))
            | Err(TransitionError::NotFound)
            | Err(TransitionError::SeatClaimed(_)) => return Ok(None),
            Err(TransitionError::Store(e)) => return Err(e),
        };
        record::if_terminal(&written);
        Ok(Some(written))
    }
}

/// A pass's duration and what it left for the next one.
fn record_pass(report: &ReaperReport, hit_limit: bool, took: std::time::Duration) {
    metrics::observe_ms(Metric::ReaperPassDuration, &[], took.as_millis() as u64);
    for (what, n) in [
        ("budget", report.left),
        ("holds_budget", report.holds_left),
        ("limit", usize::from(hit_limit)),
        ("deferred", report.deferred),
        ("postponed", report.postponed),
    ] {
        metrics::count(Metric::ReaperLeft, &[("what", what)], n as u64);
    }
    metrics::count(Metric::UnsettledPastMax, &[], report.overdue as u64);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ActionId, IntentId, SeatId, UserId};

    fn parked(written: i64, until: i64) -> Intent {
        let mut i = Intent::requested(
            IntentId::generate(),
            UserId::parse("u1").unwrap(),
            SeatId::parse("A-1").unwrap(),
            ActionId::generate(),
            Millis(0),
            Millis(60_000),
        );
        i.updated_at = Millis(written);
        i.next_attempt_at = Some(Millis(until));
        i
    }

    #[test]
    fn only_what_was_parked_before_the_upstream_was_found_open_is_taken_early() {
        let (now, horizon) = (Millis(10_000), Millis(25_000));
        let decided = Some(Millis(9_000));
        // Parked behind the open breaker before the readiness check: due a lease ahead.
        assert_eq!(
            due_as_of(&parked(5_000, 20_000), now, horizon, decided),
            horizon
        );
        // Parked again after it (the woken burst reopened the breaker): its own time.
        assert_eq!(
            due_as_of(&parked(9_500, 20_000), now, horizon, decided),
            now
        );
        assert_eq!(
            due_as_of(&parked(9_000, 20_000), now, horizon, decided),
            now
        );
        // Not parked (attempted from its last write): nothing early. Not a wake run: nothing.
        assert_eq!(due_as_of(&parked(5_000, 5_000), now, horizon, decided), now);
        assert_eq!(due_as_of(&parked(5_000, 20_000), now, horizon, None), now);
    }

    #[test]
    fn a_wait_woken_early_is_due_though_its_deadline_falls_within_the_lease() {
        let mut wait = parked(5_000, 20_000);
        wait.status = IntentStatus::WaitingForSeat;
        wait.deadline = Some(Millis(18_000));
        assert!(wait_due(&wait, Millis(25_000)));
        assert!(
            !wait_due(&wait, Millis(15_000)),
            "its re-check time has not come"
        );
        wait.status = IntentStatus::Requested;
        assert!(!wait_due(&wait, Millis(25_000)), "not a wait");
    }
}
