//! The worker: turns queued intents into at most one upstream reserve write per seat.
//!
//! A batch arrives from the FIFO queue (up to 10 messages, group = seat). Groups are independent,
//! so they run concurrently, [`SEAT_GROUPS_AT_ONCE`] at a time: that bound, times the worker's
//! concurrency, is the fleet's cap on reserves in flight, whatever the batches carry (a backlog
//! spread over many seats fills batches of many groups; a burst of many messages per seat fills
//! each batch from one). Inside a group messages run strictly in order and the first failure
//! stops the group: it and every later message of that group are reported as failed, so the
//! queue hands them back in the same order (Powertools' FIFO batch processor behaves the same).
//!
//! Per seat:
//! 1. If the seat is suppressed (taken within the action TTL), intents are closed FAILED_RACE
//!    locally, with no upstream call; a wait backs off instead.
//! 2. Otherwise the first intent is claimed: one transaction gives it a new fencing token and a
//!    lease and claims the seat. The reserve is sent once, outside any transaction, and the
//!    outcome is written (releasing the seat's claim) with one transaction valid only under that token.
//!    If this system last won the seat for the same user (an earlier intent whose answer they
//!    may never have read), their charge is read before any reserve: on the seat, the attempt
//!    succeeds with it and nothing is written (a second reserve for a seat the user holds would
//!    be a wasted write, answered `seat_taken`).
//! 3. Once the seat is known taken, the rest are closed FAILED_RACE. If the winner failed without
//!    taking the seat (bad credential, a charge elsewhere, a refused request), the next in line
//!    tries. Lost races do not depend on each other's order, so a group's closes are sent
//!    together and their answers read in queue order. And the group that finds the seat taken
//!    closes the seat's other REQUESTED intents, wherever their messages are in line, from the
//!    store's open-intent index (`Intents::open_on_seat`), 32 at a time: a same-seat burst of a
//!    thousand learns it lost within a few dozen round trips of the win, not after a hundred
//!    batches. Their messages then find them terminal by one batch read and cost only their
//!    delete; an intent the index missed closes by its own message, as before.
//! 4. If the reserve's outcome is unknown (timeout, dropped response, 500), the intent stays
//!    RESERVING, the seat claimed, until the reaper settles it by reading the user's charge. The
//!    rest of the group is handed back, and so is any message of that seat that arrives while
//!    the claim lasts, in this batch or a later one: sending another write could only be a
//!    duplicate or a doomed race.
//! 5. If the upstream is busy (429, 503), nothing was written: the intent goes back in line, not
//!    before the upstream's `Retry-After`, and the rest of the group is handed back. No intent
//!    fails because of the upstream's load.
//! 6. If the upstream's circuit breaker is open, or a `Retry-After` pauses the reserve route,
//!    nothing is claimed: the message's intent and the rest of its group are put back in line
//!    until the breaker's next probe time or the pause's end (one conditional write each; the
//!    reaper's due index wakes them), and their messages are done. Handing them back instead
//!    would spend the queue's receive count on an outage and dead-letter them.
//! 7. A wait reaches the queue only when a read said its seat was free. A suppression (this
//!    system took the seat within the action TTL) closes immediate intents, but a wait asks the
//!    seat's reading instead: the seat may have been freed since, and that is what it waits for.
//!    Outcomes are written through to the seat-read cache at once, by the settlement's own
//!    transaction (`TransitionRequest::reading`).
//!
//! Counted where the writes are answered: a claim is a [`Metric::SeatClaimsTaken`], an outcome
//! written under its token an [`Metric::AttemptsSettled`], and every write that ends an intent
//! (a settlement, a lost race, a wait past its deadline) goes through [`record::if_terminal`].

use super::with_retry;
use super::{GuardedUpstream, SeatReads};
use crate::config::Timing;
use crate::domain::IntentId;
use crate::domain::{
    Intent, IntentKind, IntentStatus, Millis, Outcome, Reason, SeatMessage, Transition,
    TransitionRequest,
};
use crate::metrics::{self, Metric, record};
use crate::ports::{
    ChargeReadError, Clock, Credentials, HandBack, Intents, ReserveOutcome, StoreError,
    TransitionError, Upstream,
};
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tracing::{Instrument, error, info, info_span, warn};

mod losers;

/// Seat groups of one batch worked at once (each with at most one reserve in flight). The
/// fleet-wide cap on the upstream's reserves in flight is this times the worker's concurrency
/// (the template's `WorkerConcurrency`): 5 x 20 = 100 on AWS's defaults. Half a batch, so a
/// deployment can give the workers more concurrency (what a burst over many seats needs, since
/// SQS fills its batches one seat at a time) without a backlog spread over many seats sending
/// ten times that many reserves at an upstream just back from an outage. A batch of ten
/// one-message groups then takes two rounds of reserves, where one group of ten messages may
/// take ten in a row.
pub const SEAT_GROUPS_AT_ONCE: usize = 5;

/// One queue message, as the event source mapping delivers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueRecord {
    pub message_id: String,
    /// The FIFO message group (the seat id); empty if the queue did not say.
    pub group_id: String,
    pub body: String,
    /// The receipt handle, for handing the message back early; empty if unknown.
    pub receipt: String,
}

/// Why a message could not be processed; it will be delivered again (and dead-lettered after
/// the queue's max receive count).
#[derive(Debug, Error)]
enum MessageError {
    #[error("malformed message body: {0}")]
    Malformed(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a processed message means for the rest of its group. A hand-back carries when the
/// messages are worth trying again, if known (else the queue's visibility timeout decides).
enum Next {
    Continue,
    /// This message is done, but the rest must wait (the seat's state is unknown until the reaper
    /// settles this attempt, or the upstream asked for a pause): hand back the rest.
    StopAfterThis(Option<Duration>),
    /// Another attempt has claimed the seat: hand back this message and the rest, untouched.
    HandBack(Option<Duration>),
    /// The upstream's breaker is open: put this message's intent and the rest back in line
    /// until then.
    Park(Millis),
}

/// What a claim came to.
enum Claim {
    Claimed(Box<Intent>),
    /// The intent moved on (or never existed): the message is done.
    Stale,
    /// Another intent's unsettled attempt (this one) has claimed the seat.
    SeatClaimed(crate::domain::IntentId),
}

/// What the group knows about its seat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SeatState {
    Unknown,
    /// This system took the seat (or found it taken) at `since`, within the action TTL (its
    /// suppression record).
    Suppressed {
        since: Millis,
    },
    /// An upstream answer in this batch said so.
    Taken,
}

/// Where a group goes on after its remaining lost races were closed together.
enum Rest {
    AllDone,
    /// The message at this offset is a wait that may try the seat.
    FreeAt(usize),
    /// The message at this offset failed.
    FailedAt(usize, MessageError),
}

/// What a taken or suppressed seat means for one message.
enum Yield {
    Done,
    /// A wait whose seat a newer reading shows free: try it.
    Free,
}

pub struct Worker {
    intents: Arc<dyn Intents>,
    credentials: Arc<dyn Credentials>,
    upstream: Arc<GuardedUpstream>,
    reads: Arc<SeatReads>,
    clock: Arc<dyn Clock>,
    random: Arc<dyn crate::ports::Random>,
    hand_back: Option<Arc<dyn HandBack>>,
    timing: Timing,
}

impl Worker {
    pub(crate) fn new(services: &super::Services, timing: &Timing) -> Self {
        let ports = services.ports();
        Self {
            intents: ports.intents.clone(),
            credentials: ports.credentials.clone(),
            upstream: services.upstream().clone(),
            reads: services.reads().clone(),
            clock: ports.clock.clone(),
            random: ports.random.clone(),
            hand_back: ports.hand_back.clone(),
            timing: timing.clone(),
        }
    }

    /// Processes a batch; returns the message ids to report as batch item failures.
    pub async fn handle_batch(&self, records: &[QueueRecord]) -> Vec<String> {
        let mut groups: Vec<(&str, Vec<&QueueRecord>)> = Vec::new();
        for record in records {
            match groups.iter_mut().find(|(g, _)| *g == record.group_id) {
                Some((_, members)) => members.push(record),
                None => groups.push((record.group_id.as_str(), vec![record])),
            }
        }
        // Collected first: a stream over the closure itself is not `Send` for every lifetime
        // (the compiler cannot prove it), and every runtime spawns this future.
        let runs: Vec<_> = groups
            .into_iter()
            .map(|(group, members)| {
                self.process_group(members)
                    .instrument(info_span!("seat_group", seat_id = %group))
            })
            .collect();
        futures::stream::iter(runs)
            .buffered(SEAT_GROUPS_AT_ONCE)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    async fn process_group(&self, members: Vec<&QueueRecord>) -> Vec<String> {
        let mut seat = None;
        let failed = self.run_group(&members, &mut seat).await;
        if seat == Some(SeatState::Taken)
            && let Some(seat_id) = members
                .iter()
                .find_map(|r| parse(r).ok())
                .map(|m| m.seat_id)
        {
            // Won (or found taken) here: every other open intent on the seat has lost, whether
            // its message is next in line or a hundred batches back.
            let in_batch: Vec<IntentId> = members
                .iter()
                .filter_map(|r| parse(r).ok())
                .map(|m| m.intent_id)
                .collect();
            self.close_losers(&seat_id, &in_batch).await;
        }
        failed
    }

    async fn run_group(
        &self,
        members: &[&QueueRecord],
        seat: &mut Option<SeatState>,
    ) -> Vec<String> {
        // Messages a concurrent close already finished; they are neither re-run nor handed back.
        let mut settled = vec![false; members.len()];
        let mut i = 0;
        while i < members.len() {
            if settled[i] {
                i += 1;
                continue;
            }
            let known = match *seat {
                Some(state) => Ok(state),
                None => self.seat_state(members[i]).await,
            };
            let step = match known {
                Ok(SeatState::Unknown) => {
                    *seat = Some(SeatState::Unknown);
                    self.try_message(members[i], seat).await
                }
                Ok(state) => {
                    *seat = Some(state);
                    match self
                        .yield_rest(&members[i..], &mut settled[i..], state)
                        .await
                    {
                        Rest::AllDone => return Vec::new(),
                        Rest::FreeAt(k) => {
                            i += k;
                            self.try_message(members[i], seat).await
                        }
                        Rest::FailedAt(k, e) => {
                            i += k;
                            Err(e)
                        }
                    }
                }
                Err(e) => Err(e),
            };
            let rest = unsettled(&members[i..], &settled[i..]);
            match step {
                Ok(Next::Continue) => {}
                Ok(Next::StopAfterThis(after)) => {
                    return self.hand_back(&rest[1..], after).await;
                }
                Ok(Next::HandBack(after)) => {
                    return self.hand_back(&rest, after).await;
                }
                Ok(Next::Park(until)) => {
                    for (j, parked) in rest.iter().enumerate() {
                        if let Err(e) = self.park(parked, until).await {
                            error!(message_id = %parked.message_id, error = %e, "could not put the intent back in line; handing back the rest of its group");
                            return ids(&rest[j..]);
                        }
                    }
                    return Vec::new();
                }
                Err(e) => {
                    error!(message_id = %members[i].message_id, error = %e, "message failed; handing back the rest of its group");
                    return ids(&rest);
                }
            }
            i += 1;
        }
        Vec::new()
    }

    /// The seat is taken or suppressed, so every immediate intent left in the group loses,
    /// whichever order the closes are written in: they go out together (one conditional write
    /// each, which the store may commit as one group) instead of one round trip after another.
    /// The answers are then read in queue order: the first wait that may try the seat, or the
    /// first failure, is where the group goes on, exactly as if they had run one by one.
    async fn yield_rest(
        &self,
        rest: &[&QueueRecord],
        settled: &mut [bool],
        state: SeatState,
    ) -> Rest {
        let now = self.clock.now();
        if matches!(state, SeatState::Suppressed { .. }) {
            self.skip_closed(rest, settled).await;
        }
        let answers = futures::future::join_all(rest.iter().zip(settled.iter()).map(
            |(record, done)| async move {
                if *done {
                    return Ok(Yield::Done);
                }
                let message = parse(record)?;
                self.yield_taken_seat(&message, now, state).await
            },
        ))
        .await;
        let mut first = None;
        for (k, answer) in answers.into_iter().enumerate() {
            match answer {
                Ok(Yield::Done) => settled[k] = true,
                Ok(Yield::Free) => {
                    first.get_or_insert(Rest::FreeAt(k));
                }
                Err(e) => {
                    first.get_or_insert(Rest::FailedAt(k, e));
                }
            }
        }
        first.unwrap_or(Rest::AllDone)
    }

    /// Reports `records` as failed (so the queue keeps them, in order) and, when the worker
    /// knows when they are worth trying again, makes them visible again then rather than after
    /// the whole visibility timeout.
    async fn hand_back(&self, records: &[&QueueRecord], after: Option<Duration>) -> Vec<String> {
        let receipts: Vec<String> = records
            .iter()
            .map(|r| r.receipt.clone())
            .filter(|r| !r.is_empty())
            .collect();
        if let (Some(port), Some(after), false) = (&self.hand_back, after, receipts.is_empty()) {
            let after = after.min(self.timing.visibility_timeout);
            if let Err(e) = port.hand_back(&receipts, after).await {
                warn!(error = %e, "could not hand messages back early; they return after the visibility timeout");
            }
        }
        ids(records)
    }

    /// When the intent that claimed a seat is next due to be settled (its `due_at`, plus one reaper
    /// interval for the pass that acts on it), from now. A read only to schedule the retry.
    async fn claim_settles_in(&self, holder: &crate::domain::IntentId) -> Option<Duration> {
        let intent = self.intents.get_intent(holder).await.ok()??;
        let now = self.clock.now();
        let due = intent.due_at.unwrap_or(now);
        Some(Duration::from_millis((due.0 - now.0).max(0) as u64) + self.timing.reaper_interval)
    }
    /// What the group knows about its seat before its first message: whether this system took
    /// it within the action TTL.
    async fn seat_state(&self, record: &QueueRecord) -> Result<SeatState, MessageError> {
        let message = parse(record)?;
        let now = self.clock.now();
        let suppressed = with_retry(&*self.random, || {
            self.intents.suppression(&message.seat_id, now)
        })
        .await?;
        Ok(match suppressed {
            Some(s) => SeatState::Suppressed {
                since: s.taken_at(&self.timing),
            },
            None => SeatState::Unknown,
        })
    }

    /// Tries the message's intent on the seat: claim, reserve once, settle.
    async fn try_message(
        &self,
        record: &QueueRecord,
        seat: &mut Option<SeatState>,
    ) -> Result<Next, MessageError> {
        let message = parse(record)?;
        let now = self.clock.now();
        if let Err(until) = self.upstream.ready(&message.seat_id).await {
            info!(intent_id = %message.intent_id, "upstream breaker open or reserves paused; not claiming");
            return Ok(Next::Park(until));
        }
        let claimed = match self.claim(&message, now).await? {
            Claim::Claimed(intent) => *intent,
            Claim::Stale => return Ok(Next::Continue),
            Claim::SeatClaimed(holder) => {
                return Ok(Next::HandBack(self.claim_settles_in(&holder).await));
            }
        };
        let (next, taken) = self.attempt(claimed).await?;
        if taken {
            *seat = Some(SeatState::Taken);
        }
        Ok(next)
    }

    /// Claims the intent and its seat.
    async fn claim(&self, message: &SeatMessage, now: Millis) -> Result<Claim, MessageError> {
        let request = message.pin(TransitionRequest::on_seat(
            message.intent_id.clone(),
            message.seat_id.clone(),
            now,
            Transition::claim(now, &self.timing),
        ));
        match with_retry(&*self.random, || self.intents.transition(&request)).await {
            Ok(intent) => {
                metrics::count(Metric::SeatClaimsTaken, &[], 1);
                Ok(Claim::Claimed(Box::new(intent)))
            }
            Err(TransitionError::Refused(current)) => {
                info!(intent_id = %message.intent_id, status = current.status.as_str(), "stale message; intent already moved on");
                Ok(Claim::Stale)
            }
            Err(TransitionError::SeatClaimed(claim)) => {
                info!(intent_id = %message.intent_id, claimed_by = %claim.intent_id, "seat claimed by an unsettled attempt; handed back");
                Ok(Claim::SeatClaimed(claim.intent_id))
            }
            Err(TransitionError::NotFound) => {
                warn!(intent_id = %message.intent_id, "message for an unknown intent; dropped");
                Ok(Claim::Stale)
            }
            Err(TransitionError::Store(e)) => Err(e.into()),
        }
    }

    /// Sends the one reserve write for a claimed intent and records its outcome. Returns what the
    /// group should do next and whether the seat is now known taken.
    async fn attempt(&self, intent: Intent) -> Result<(Next, bool), MessageError> {
        let token = intent.fencing_token;
        let span = info_span!("attempt", intent_id = %intent.intent_id, seat_id = %intent.seat_id, fencing_token = token);
        async move {
            let credential = with_retry(&*self.random, || self.credentials.credential(&intent.user_id)).await?;
            let Some(credential) = credential else {
                self.settle(&intent, Outcome::NoCredential).await?;
                return Ok((Next::Continue, false));
            };
            if let Some((outcome, taken, next)) =
                self.before_reserve(&intent, &credential).await?
            {
                self.settle(&intent, outcome).await?;
                if taken {
                    self.reads.forget(&intent.seat_id).await;
                }
                return Ok((next, taken));
            }
            let (outcome, taken, next) = match self
                .upstream
                .reserve(&credential, &intent.seat_id)
                .await
            {
                ReserveOutcome::Reserved(charge) => (
                    Outcome::Charged {
                        charge_id: charge.charge_id,
                        how: Reason::Reserved,
                    },
                    true,
                    Next::Continue,
                ),
                ReserveOutcome::SeatTaken => (Outcome::SeatTaken, true, Next::Continue),
                ReserveOutcome::AlreadyCharged => {
                    (Outcome::AlreadyCharged, false, Next::Continue)
                }
                ReserveOutcome::CredentialRejected => {
                    (Outcome::CredentialRejected, false, Next::Continue)
                }
                ReserveOutcome::Refused(code) => (Outcome::Refused(code), false, Next::Continue),
                ReserveOutcome::Busy { retry_after } => self.back_in_line(&intent, retry_after),
                ReserveOutcome::Unknown(why) => {
                    warn!(reason = %why, "reserve outcome unknown; the seat stays claimed until the reaper settles it by a charge read");
                    // The reaper can settle it once the lease and grace are over.
                    let settles_in = self.timing.lease()
                        + self.timing.reaper_grace
                        + self.timing.reaper_interval;
                    return Ok((Next::StopAfterThis(Some(settles_in)), false));
                }
            };
            self.settle(&intent, outcome).await?;
            if taken {
                self.reads.forget(&intent.seat_id).await;
            }
            Ok((next, taken))
        }
        .instrument(span)
        .await
    }

    /// Nothing was written upstream and the upstream asked for a pause (or gave no answer to a
    /// read): the attempt goes back in line, not before the upstream's own pause and never
    /// sooner than our backoff, and the rest of the group is handed back until then.
    fn back_in_line(
        &self,
        intent: &Intent,
        retry_after: Option<Duration>,
    ) -> (Outcome, bool, Next) {
        let pause = retry_after
            .unwrap_or_default()
            .max(self.timing.wait_backoff(intent.attempts));
        warn!(
            retry_after_ms = pause.as_millis() as u64,
            "upstream busy; back in line"
        );
        let retry_at = self.clock.now().plus(pause);
        (
            Outcome::Busy { retry_at },
            false,
            Next::StopAfterThis(Some(pause)),
        )
    }

    /// Before a reserve, the seat's latest suppression record (one strongly consistent read;
    /// the seat's claim keeps every other attempt on the seat out meanwhile, and suppressions
    /// are written only by the settlement that releases a claim, so the record cannot change
    /// between this read and the reserve):
    /// - if this system last won the seat for this very user (an earlier intent of theirs,
    ///   whose answer they may never have read), the user may hold it still, and a reserve
    ///   would be a second write for a (user, seat) whose charge stands, which the upstream
    ///   answers `seat_taken`: a loss reported for a seat the user holds. So the user's charge
    ///   is read instead. On this seat, the attempt succeeds with it (`charge_read`) and nothing
    ///   is written; none or elsewhere (released since), the reserve goes ahead. A read without
    ///   an answer puts the attempt back in line (nothing was written); a paused route waits;
    /// - else, if the suppression is in force, the seat was taken within the action TTL by the
    ///   settlement that released the claim before this one: the group read the seat unsuppressed
    ///   before that settlement, so the claim is the first to know. The attempt is closed like
    ///   a taken seat (a wait backs off, unless a reading taken after the win says the seat is
    ///   free again), with no call (the simulator's no-wasted-write checker found the reserve
    ///   it used to send: seed 673 of the default workload, 9.5 s after an unknown outcome's
    ///   win was settled by the reaper);
    /// - else `None`: the reserve goes ahead.
    async fn before_reserve(
        &self,
        intent: &Intent,
        credential: &crate::domain::Secret,
    ) -> Result<Option<(Outcome, bool, Next)>, MessageError> {
        let last = with_retry(&*self.random, || self.intents.last_taken(&intent.seat_id)).await?;
        let Some(last) = last else {
            return Ok(None);
        };
        if !last.was_won_for(intent) {
            if last.until <= self.clock.now() {
                return Ok(None);
            }
            // A wait may still try a seat freed since, on a reading taken after the win.
            let since = last.taken_at(&self.timing);
            if intent.kind == IntentKind::Wait
                && self.seat_reads_free_since(&intent.seat_id, since).await
            {
                return Ok(None);
            }
            info!("seat suppressed since the group looked; closed without an upstream call");
            return Ok(Some((Outcome::Suppressed, true, Next::Continue)));
        }
        info!("seat last won for this user; reading their charge before any reserve");
        Ok(match self.upstream.current_charge(credential).await {
            Ok(Some(charge)) if charge.seat_id == intent.seat_id => Some((
                Outcome::Charged {
                    charge_id: charge.charge_id,
                    how: Reason::ChargeRead,
                },
                true,
                Next::Continue,
            )),
            Ok(_) => None,
            Err(ChargeReadError::CredentialRejected) => {
                Some((Outcome::CredentialRejected, false, Next::Continue))
            }
            Err(ChargeReadError::HeldBack(until)) => {
                let pause = Duration::from_millis((until.0 - self.clock.now().0).max(0) as u64);
                Some(self.back_in_line(intent, Some(pause)))
            }
            Err(ChargeReadError::Busy { retry_after }) => {
                Some(self.back_in_line(intent, retry_after))
            }
            Err(why @ (ChargeReadError::Failed(_) | ChargeReadError::Refused(_))) => {
                warn!(reason = %why, "charge unreadable; not writing blind");
                Some(self.back_in_line(intent, None))
            }
        })
    }

    /// Writes an attempt's outcome under its fencing token. A refusal means the lease was lost
    /// (the reaper settled it from the charge, which is the truth): nothing to do.
    async fn settle(&self, intent: &Intent, outcome: Outcome) -> Result<(), MessageError> {
        let request = intent.settle(outcome.clone(), self.clock.now(), &self.timing);
        match with_retry(&*self.random, || self.intents.transition(&request)).await {
            Ok(done) => {
                record::attempt_settled(&outcome);
                record::if_terminal(&done);
                info!(
                    status = done.status.as_str(),
                    reason = done.reason.map(|r| r.to_string()).unwrap_or_default(),
                    "attempt settled"
                );
                Ok(())
            }
            Err(TransitionError::Refused(current)) if current.is_result_of(intent, &request) => {
                // A retry of this very write after its first try committed (its answer lost).
                record::attempt_settled(&outcome);
                record::if_terminal(&current);
                info!(
                    status = current.status.as_str(),
                    "attempt settled (retried write)"
                );
                Ok(())
            }
            Err(TransitionError::Refused(current)) => {
                warn!(
                    status = current.status.as_str(),
                    fencing_token = current.fencing_token,
                    "late settlement refused: lease lost"
                );
                Ok(())
            }
            Err(TransitionError::NotFound) => Ok(()),
            Err(TransitionError::SeatClaimed(_)) => Err(StoreError::Corrupt(
                "a settlement was refused for a seat's claim".into(),
            )
            .into()),
            Err(TransitionError::Store(e)) => Err(e.into()),
        }
    }

    /// A seat taken or suppressed: close an immediate intent as a lost race without an upstream
    /// call. A wait on a suppressed seat whose reading (newer than the suppression, or it would
    /// say taken) shows it free tries it; otherwise a wait backs off (or ends, past its deadline).
    async fn yield_taken_seat(
        &self,
        message: &SeatMessage,
        now: Millis,
        state: SeatState,
    ) -> Result<Yield, MessageError> {
        let close = message.pin(TransitionRequest::new(
            message.intent_id.clone(),
            now,
            Transition::lost_race(),
        ));
        let current = match with_retry(&*self.random, || self.intents.transition(&close)).await {
            Ok(closed) => {
                record::if_terminal(&closed);
                info!(intent_id = %message.intent_id, "closed without an upstream call: seat taken");
                return Ok(Yield::Done);
            }
            Err(TransitionError::Refused(current)) => current,
            Err(TransitionError::NotFound) | Err(TransitionError::SeatClaimed(_)) => {
                return Ok(Yield::Done);
            }
            Err(TransitionError::Store(e)) => return Err(e.into()),
        };
        if current.status != IntentStatus::WaitingForSeat || !current.is_due_wait(now) {
            return Ok(Yield::Done);
        }
        if let SeatState::Suppressed { since } = state
            && self.seat_reads_free_since(&message.seat_id, since).await
        {
            return Ok(Yield::Free);
        }
        let backoff = TransitionRequest::new(
            message.intent_id.clone(),
            now,
            current.wait_backoff(now, &self.timing),
        )
        .seen_as(&current);
        match with_retry(&*self.random, || self.intents.transition(&backoff)).await {
            Ok(written) => {
                // Past its deadline the back-off is the wait's end.
                record::if_terminal(&written);
                Ok(Yield::Done)
            }
            Err(TransitionError::Refused(_))
            | Err(TransitionError::NotFound)
            | Err(TransitionError::SeatClaimed(_)) => Ok(Yield::Done),
            Err(TransitionError::Store(e)) => Err(e.into()),
        }
    }

    /// Whether the seat's reading (through the cache: at most one upstream read per TTL for
    /// however many waits ask) says it is free, and was taken after `since` (the suppression's
    /// start). An older one cannot know of the win behind the suppression: another instance's
    /// in-process copy may be up to `instance_cache_ttl` old, and a free reading taken just
    /// before the win would send a wait's reserve into a seat this system holds (the
    /// simulator's no-wasted-write checker found it: seed 156 of the default workload). The
    /// reading's stamp is its reader's clock and `since` the winner's, so "after" means more
    /// than `CLOCK_TOLERANCE` after: a free reading taken just before the win by a clock ahead
    /// is stamped after it (the simulator's clock steps found it: seeds 15 and 24).
    async fn seat_reads_free_since(&self, seat_id: &crate::domain::SeatId, since: Millis) -> bool {
        match self.reads.seat(seat_id).await {
            Ok(served) => {
                served.reading.seat_available() == Some(true)
                    && served.reading.as_of > since.plus(crate::domain::CLOCK_TOLERANCE)
            }
            Err(e) => {
                warn!(seat_id = %seat_id, error = %e, "seat unreadable; the wait backs off");
                false
            }
        }
    }

    /// Puts a message's intent back in line until `until` without claiming it (the breaker is
    /// open): one conditional write on the version the message carries. A message whose intent
    /// moved on is simply done.
    async fn park(&self, record: &QueueRecord, until: Millis) -> Result<(), MessageError> {
        let message = parse(record)?;
        let now = self.clock.now();
        let request = message.pin(TransitionRequest::new(
            message.intent_id.clone(),
            now,
            Transition::hold_back(message.version, until),
        ));
        let current = match with_retry(&*self.random, || self.intents.transition(&request)).await {
            Ok(_) => return Ok(()),
            Err(TransitionError::Refused(current)) => current,
            Err(TransitionError::NotFound) | Err(TransitionError::SeatClaimed(_)) => return Ok(()),
            Err(TransitionError::Store(e)) => return Err(e.into()),
        };
        if current.status != IntentStatus::WaitingForSeat || current.version != message.version {
            return Ok(());
        }
        let due_at = current.deadline.map_or(until, |d| d.min(until));
        let request = TransitionRequest::new(
            message.intent_id.clone(),
            now,
            Transition::wake(message.version, Some(until), due_at),
        )
        .seen_as(&current);
        match with_retry(&*self.random, || self.intents.transition(&request)).await {
            Ok(_)
            | Err(TransitionError::Refused(_))
            | Err(TransitionError::NotFound)
            | Err(TransitionError::SeatClaimed(_)) => Ok(()),
            Err(TransitionError::Store(e)) => Err(e.into()),
        }
    }
}

fn parse(record: &QueueRecord) -> Result<SeatMessage, MessageError> {
    serde_json::from_str(&record.body).map_err(|e| MessageError::Malformed(e.to_string()))
}

/// The records not already settled, in order.
fn unsettled<'a>(records: &[&'a QueueRecord], settled: &[bool]) -> Vec<&'a QueueRecord> {
    records
        .iter()
        .zip(settled)
        .filter(|(_, done)| !**done)
        .map(|(r, _)| *r)
        .collect()
}

fn ids(records: &[&QueueRecord]) -> Vec<String> {
    records.iter().map(|r| r.message_id.clone()).collect()
}
