//! The fault decorator's own cases: each armed fault strikes the call it names, and only it.

use super::*;
use std::sync::atomic::{AtomicU32, Ordering};

/// A credential store that counts what reached it.
#[derive(Default)]
struct Counting(AtomicU32);

#[async_trait]
impl Credentials for Counting {
    async fn put_credential(&self, _: &UserId, _: &Secret) -> Result<(), StoreError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    async fn credential(&self, _: &UserId) -> Result<Option<Secret>, StoreError> {
        Ok(None)
    }
}

#[tokio::test]
async fn faults_hit_matching_calls_in_order_then_heal() {
    let store = FaultyStore::new(Counting::default());
    let u = UserId::parse("u").unwrap();
    let s = Secret::new("x");
    store.fail_next(StoreOp::PutCredential, StoreError::Throttled, 2);
    store.fail_after_next(None, StoreError::Unavailable("timeout".into()), 1);
    assert_eq!(
        store.credential(&u).await,
        Err(StoreError::Unavailable("timeout".into()))
    );
    assert_eq!(
        store.put_credential(&u, &s).await,
        Err(StoreError::Throttled)
    );
    assert_eq!(
        store.put_credential(&u, &s).await,
        Err(StoreError::Throttled)
    );
    assert_eq!(
        store.inner().0.load(Ordering::SeqCst),
        0,
        "refused before the store"
    );
    assert_eq!(store.put_credential(&u, &s).await, Ok(()));
    store.fail_after_next(StoreOp::PutCredential, StoreError::TransactionConflict, 1);
    assert_eq!(
        store.put_credential(&u, &s).await,
        Err(StoreError::TransactionConflict)
    );
    assert_eq!(
        store.inner().0.load(Ordering::SeqCst),
        2,
        "the lost-response call wrote"
    );
    assert_eq!(store.calls(StoreOp::PutCredential), 4);
    assert_eq!(store.injected(), 4);
    store.fail_next(None, StoreError::Throttled, 5);
    store.heal();
    assert_eq!(store.credential(&u).await, Ok(None));
}

/// An intents store with no seat claimed (only `seat_claim` is called).
struct NoSeatClaims;

#[async_trait]
impl Intents for NoSeatClaims {
    async fn register_wait(
        &self,
        _intent: &Intent,
        _consent: &ConsentRecord,
    ) -> Result<(), StoreError> {
        unreachable!("not called by this test")
    }

    async fn get_intent(&self, _id: &IntentId) -> Result<Option<Intent>, StoreError> {
        unreachable!("not called by this test")
    }

    async fn get_consent(&self, _id: &IntentId) -> Result<Option<ConsentRecord>, StoreError> {
        unreachable!("not called by this test")
    }

    async fn intents(&self, _ids: &[IntentId]) -> Result<Vec<Intent>, StoreError> {
        unreachable!("not called by this test")
    }

    async fn open_on_seat(
        &self,
        _seat_id: &SeatId,
        _limit: usize,
    ) -> Result<Vec<Intent>, StoreError> {
        unreachable!("not called by this test")
    }

    async fn transition(&self, _request: &TransitionRequest) -> Result<Intent, TransitionError> {
        unreachable!("not called by this test")
    }

    async fn history(
        &self,
        _id: &IntentId,
        _after: Option<u64>,
        _size: PageSize,
    ) -> Result<Page<TransitionRecord, u64>, StoreError> {
        unreachable!("not called by this test")
    }

    async fn seat_claim(&self, _seat_id: &SeatId) -> Result<Option<SeatClaim>, StoreError> {
        Ok(None)
    }

    async fn due_intents(&self, _now: Millis, _limit: usize) -> Result<Vec<Intent>, StoreError> {
        unreachable!("not called by this test")
    }

    async fn suppression(
        &self,
        _seat_id: &SeatId,
        _now: Millis,
    ) -> Result<Option<Suppression>, StoreError> {
        unreachable!("not called by this test")
    }

    async fn last_taken(&self, _seat_id: &SeatId) -> Result<Option<Suppression>, StoreError> {
        unreachable!("not called by this test")
    }
}

/// The seat's claim and the routes' `Retry-After` pauses are different calls: a fault armed
/// for one must not bend the other (the seat's claim read once ran under the routes' op).
#[tokio::test]
async fn a_seats_claim_is_read_under_its_own_op() {
    let store = FaultyStore::new(NoSeatClaims);
    let seat = SeatId::parse("A-1").unwrap();
    store.fail_next(StoreOp::UpstreamPause, StoreError::Throttled, 1);
    assert_eq!(
        store.seat_claim(&seat).await,
        Ok(None),
        "not the routes' op"
    );
    store.heal();
    store.fail_next(StoreOp::SeatClaim, StoreError::Throttled, 1);
    assert_eq!(store.seat_claim(&seat).await, Err(StoreError::Throttled));
    assert_eq!(store.calls(StoreOp::SeatClaim), 2);
    assert_eq!(store.calls(StoreOp::UpstreamPause), 0);
}
