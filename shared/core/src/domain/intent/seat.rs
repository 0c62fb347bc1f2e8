//! What an intent's writes do to its seat: the claim one attempt keeps on it while it may write
//! upstream, and the suppression a won or lost seat leaves behind. Both are seat items an
//! intent's transition writes in the same conditional write or transaction as the intent.

use super::Intent;
use crate::config::Timing;
use crate::domain::{IntentId, Millis, SeatId, UserId};
use serde::{Deserialize, Serialize};

/// A record that a seat was just taken, so later intents for it in the suppression window are
/// closed FAILED_RACE without another upstream write. The latest one of a seat stays after its
/// window (one record per seat, replaced by the next): it remembers whom this system last won
/// the seat for, so that user's next attempt on it reads their charge instead of writing again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suppression {
    pub seat_id: SeatId,
    pub intent_id: IntentId,
    pub until: Millis,
    /// The user `intent_id` won the seat for; `None` when it found the seat taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner: Option<UserId>,
}

impl Suppression {
    /// `intent` found its seat taken at `now`: the seat is suppressed for one action TTL, the
    /// longest an immediate confirm for it can still arrive.
    pub fn of(intent: &Intent, now: Millis, timing: &Timing) -> Self {
        Suppression {
            seat_id: intent.seat_id.clone(),
            intent_id: intent.intent_id.clone(),
            until: now.plus(timing.action_ttl),
            winner: None,
        }
    }

    /// `intent` took its seat at `now`: suppressed as in [`Suppression::of`], and won for its
    /// user.
    pub fn won(intent: &Intent, now: Millis, timing: &Timing) -> Self {
        Suppression {
            winner: Some(intent.user_id.clone()),
            ..Suppression::of(intent, now, timing)
        }
    }

    /// When the seat was taken (or found taken): the window's start.
    pub fn taken_at(&self, timing: &Timing) -> Millis {
        self.until.minus(timing.action_ttl)
    }

    /// This record as written over the seat's `previous` one: a record that found the seat
    /// taken keeps the last winner (the seat was taken by them, or by someone since; either
    /// way their next attempt reads their charge first, which is right both ways), one that won
    /// it names its own. Backends apply it inside the settlement's write.
    pub fn over(self, previous: Option<&Suppression>) -> Suppression {
        match (&self.winner, previous) {
            (None, Some(previous)) if previous.seat_id == self.seat_id => Suppression {
                winner: previous.winner.clone(),
                ..self
            },
            _ => self,
        }
    }

    /// Whether `intent`, claimed on this record's seat, is a later attempt of the user this
    /// system last won the seat for. If so, the user may hold it still: a reserve would be a
    /// second write for a (user, seat) whose charge stands, and the upstream would answer it
    /// `seat_taken`, a loss reported for a seat the user holds. The attempt reads the user's
    /// charge first, and writes only if the charge is gone (released since).
    pub fn was_won_for(&self, intent: &Intent) -> bool {
        self.seat_id == intent.seat_id
            && self.intent_id != intent.intent_id
            && self.winner.as_ref() == Some(&intent.user_id)
    }
}

/// A seat claimed by the one attempt that may write it upstream. Claiming an intent claims its
/// seat in the same write; only that attempt's settlement (the worker's, under its fencing
/// token, or the reaper's, from the charge read) releases it. A lease running out does not: an
/// expired lease with an unknown outcome is exactly when a second write would be wrong. While a
/// seat is claimed, no other intent of it is claimed. (A claim, not a hold: a hold is the
/// checkout's, seats a user keeps while paying; the stored item keeps its first name, `HOLD`.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatClaim {
    pub seat_id: SeatId,
    pub intent_id: IntentId,
    /// When the claim took it.
    pub since: Millis,
}

/// What a transition does to its seat's claim (see [`TransitionRequest::seat_claim_effect`](super::TransitionRequest::seat_claim_effect)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeatClaimEffect {
    None,
    /// A claim: the seat must be free or claimed by this very intent; it is then claimed by it.
    Take(SeatClaim),
    /// A settlement: the claim is released if it is this intent's.
    Release {
        seat_id: SeatId,
        intent_id: IntentId,
    },
}
