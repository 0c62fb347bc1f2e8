//! Which AWS request each store call stands for, and the time it takes: the memory backend's
//! [`ServiceTime`] hook filled from the [`AwsProfile`].
//!
//! The classes follow `seatgate-aws`'s adapter call by call: a confirm, a transition, a
//! booking, a flight's creation, a sold-out mark and a wait's registration are one
//! `TransactWriteItems` each, a cancel a `GetItem` then one; the other writes one `PutItem`,
//! `UpdateItem` or `DeleteItem`; reads one `GetItem`, `Query` or `BatchGetItem`; the queue
//! calls one SQS request. Two are free here because the profile times them elsewhere: a
//! mapping's receive (inside the delivery latency, which runs from the send to the function's
//! invocation) and the change stream's reads and acknowledgements (the stream's delivery
//! latency, likewise). Simplified, and so a little fast: a transition sent without the
//! caller's copy reads the intent first (the worker sends the copy its message carries; a
//! user's cancel of a wait does not), and a due scan is 16 `Query`s in parallel, timed as one.

use super::profile::{AwsProfile, Input};
use rand::SeedableRng;
use rand::rngs::StdRng;
use seatgate_memory::{Op, ServiceTime};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The profile's input that times `op`, or `None` if the delivery latency already does.
pub fn input_of(op: Op) -> Option<Input> {
    use Op::*;
    Some(match op {
        Confirm | Transition | Book | CancelBooking | CreateFlight | MarkSoldOut | RegisterWait => {
            Input::DynamoTransaction
        }
        PutAction | PutCredential | LeaseRefresh | RecordReading | RecordReadFailure
        | SwapBreaker | UpstreamPause | BeginRequest | FinishRequest | AbandonRequest
        | TakeRate | TakeLease | ReleaseLease => Input::DynamoWrite,
        CreateCheckoutHold | ResolveHold | JoinWaitlist => Input::DynamoTransaction,
        LeaveWaitlist => Input::DynamoWrite,
        GetAction | GetIntent | Intents | OpenOnSeat | GetConsent | History | DueIntents
        | Suppression | LastTaken | SeatClaim | Credential | ReadingEntry | ReadingEntries
        | Breaker | UpstreamPauses | Inventory | BookingsOf | CheckoutHold | HoldsOf
        | FlightHolds | DueHolds | WaitEntry | WaitingAhead | WaitlistSummary => Input::DynamoRead,
        SeatSend | SeatDelete | SeatHandBack | EventEnqueue | EventDelete | EventHandBack
        | QueueDepths | Redrive => Input::SqsCall,
        SeatReceive | EventReceive | FetchChanges | AckChanges | FailChange => return None,
    })
}

/// The store's service times, drawn from the profile with a seeded generator of their own.
#[derive(Debug)]
pub struct AwsServiceTime {
    profile: AwsProfile,
    rng: Mutex<StdRng>,
}

impl AwsServiceTime {
    pub fn new(profile: AwsProfile, seed: u64) -> Self {
        AwsServiceTime {
            profile,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        }
    }
}

impl AwsServiceTime {
    /// One draw of `input`, from the same seeded stream as the store's calls.
    pub fn draw_input(&self, input: Input) -> Duration {
        let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        self.profile.dist(input).draw(&mut *rng)
    }
}

impl ServiceTime for AwsServiceTime {
    fn draw(&self, op: Op) -> Duration {
        let Some(input) = input_of(op) else {
            return Duration::ZERO;
        };
        let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        let time = self.profile.dist(input).draw(&mut *rng);
        match op {
            // The booking is read before its transaction.
            Op::CancelBooking | Op::ResolveHold => time + self.profile.dynamo_read.draw(&mut *rng),
            _ => time,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_has_a_class_and_only_the_delivered_ones_are_free() {
        let free: Vec<Op> = Op::ALL
            .into_iter()
            .filter(|op| input_of(*op).is_none())
            .collect();
        assert_eq!(
            free,
            vec![
                Op::SeatReceive,
                Op::EventReceive,
                Op::FetchChanges,
                Op::AckChanges,
                Op::FailChange
            ]
        );
        // Every write the adapter sends as a transaction is timed as one.
        for op in [Op::Confirm, Op::Transition, Op::Book, Op::CancelBooking] {
            assert_eq!(input_of(op), Some(Input::DynamoTransaction), "{op:?}");
        }
    }

    #[test]
    fn draws_are_a_function_of_the_seed() {
        let draws = |seed| {
            let t = AwsServiceTime::new(AwsProfile::published(), seed);
            (0..50).map(|_| t.draw(Op::Book)).collect::<Vec<_>>()
        };
        assert_eq!(draws(3), draws(3));
        assert_ne!(draws(3), draws(4));
        let t = AwsServiceTime::new(AwsProfile::published(), 3);
        assert_eq!(t.draw(Op::SeatReceive), Duration::ZERO);
    }
}
