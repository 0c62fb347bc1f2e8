//! Operator leases (`OperatorLeases`): one entry per action name, taken only if absent or
//! ended, released only by its holder, as DynamoDB's conditional put and delete.

use crate::MemoryBackend;
use crate::faults::Op;
use crate::state::Lease;
use async_trait::async_trait;
use seatgate::domain::{Millis, may_take_lease};
use seatgate::ports::{OperatorLeases, StoreError};

#[async_trait]
impl OperatorLeases for MemoryBackend {
    async fn take_lease(
        &self,
        name: &str,
        holder: &str,
        now: Millis,
        until: Millis,
    ) -> Result<bool, StoreError> {
        self.timed(Op::TakeLease, |tx| {
            if !may_take_lease(tx.state.leases.get(name).map(|l| l.until), now) {
                return Ok(false);
            }
            tx.log(&(name, holder, until));
            tx.state.leases.insert(
                name.to_owned(),
                Lease {
                    holder: holder.to_owned(),
                    until,
                },
            );
            Ok(true)
        })
        .await
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        self.timed(Op::ReleaseLease, |tx| {
            if tx
                .state
                .leases
                .get(name)
                .is_some_and(|l| l.holder == holder)
            {
                tx.log(&(name, holder));
                tx.state.leases.remove(name);
            }
            Ok(())
        })
        .await
    }
}
