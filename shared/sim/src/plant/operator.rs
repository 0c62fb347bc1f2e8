//! The operator's plants ([`Plant::DeadLettersUncounted`], [`Plant::HeldPageShort`]): decorators
//! on the ports an operator's reads go through, bending their answers as a buggy adapter would.

use super::Plant;
use async_trait::async_trait;
use seatgate::domain::{
    CheckoutHold, Flight, FlightHoldKey, FlightId, HoldAction, HoldId, HoldStatus, IdempotencyKey,
    Millis, Page, PageSize, UserId,
};
use seatgate::ports::{
    CheckoutHolds, CreateHoldRefusal, QueueAdmin, QueueDepths, QueueError, Redriven,
    ResolveHoldError, StoreError,
};
use std::sync::Arc;

/// `queues` as the buggy adapter would have answered, if [`Plant::DeadLettersUncounted`] is
/// among `plants`; else `queues` itself.
pub fn wrap_queue_admin(queues: Arc<dyn QueueAdmin>, plants: &[Plant]) -> Arc<dyn QueueAdmin> {
    if plants.contains(&Plant::DeadLettersUncounted) {
        Arc::new(DeadLettersUncounted { inner: queues })
    } else {
        queues
    }
}

/// `holds` as the buggy adapter would have answered, if [`Plant::HeldPageShort`] is among
/// `plants`; else `holds` itself.
pub fn wrap_holds(holds: Arc<dyn CheckoutHolds>, plants: &[Plant]) -> Arc<dyn CheckoutHolds> {
    if plants.contains(&Plant::HeldPageShort) {
        Arc::new(HeldPageShort { inner: holds })
    } else {
        holds
    }
}

/// [`Plant::HeldPageShort`]: every page of a flight's holds loses its last item (the cursor,
/// when there is one, still names it); every other call passes through.
struct HeldPageShort {
    inner: Arc<dyn CheckoutHolds>,
}

#[async_trait]
impl CheckoutHolds for HeldPageShort {
    async fn create_hold(
        &self,
        hold: &CheckoutHold,
        max_per_user: Option<u32>,
        answer_to: Option<(&IdempotencyKey, &str)>,
    ) -> Result<(), CreateHoldRefusal> {
        self.inner.create_hold(hold, max_per_user, answer_to).await
    }

    async fn hold(&self, user: &UserId, id: &HoldId) -> Result<Option<CheckoutHold>, StoreError> {
        self.inner.hold(user, id).await
    }

    async fn resolve_hold(
        &self,
        user: &UserId,
        flight: &FlightId,
        id: &HoldId,
        action: HoldAction,
        now: Millis,
    ) -> Result<CheckoutHold, ResolveHoldError> {
        self.inner.resolve_hold(user, flight, id, action, now).await
    }

    async fn holds_of(
        &self,
        user: &UserId,
        after: Option<&HoldId>,
        size: PageSize,
    ) -> Result<Page<CheckoutHold, HoldId>, StoreError> {
        self.inner.holds_of(user, after, size).await
    }

    async fn flight_holds(
        &self,
        flight: &Flight,
        status: HoldStatus,
        after: Option<&FlightHoldKey>,
        size: PageSize,
    ) -> Result<Page<CheckoutHold, FlightHoldKey>, StoreError> {
        let mut page = self.inner.flight_holds(flight, status, after, size).await?;
        page.items.pop();
        Ok(page)
    }

    async fn due_holds(&self, now: Millis, limit: usize) -> Result<Vec<CheckoutHold>, StoreError> {
        self.inner.due_holds(now, limit).await
    }
}

/// [`Plant::DeadLettersUncounted`].
struct DeadLettersUncounted {
    inner: Arc<dyn QueueAdmin>,
}

#[async_trait]
impl QueueAdmin for DeadLettersUncounted {
    async fn depths(&self) -> Result<QueueDepths, QueueError> {
        let mut depths = self.inner.depths().await?;
        // Nobody receives from a dead-letter queue: its in-flight count is always zero.
        depths.webhook_deliveries.dead = 0;
        Ok(depths)
    }

    async fn redrive(&self, limit: usize) -> Result<Redriven, QueueError> {
        self.inner.redrive(limit).await
    }
}
