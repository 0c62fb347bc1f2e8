//! Operator leases: one holder at a time for an operator action (a redrive, a reconcile pass),
//! so two operators (or two retries of one) cannot run it at once. The store keeps the lease;
//! this is its rule, which the embedded and in-memory backends apply and DynamoDB's condition
//! (`attribute_not_exists(#until) OR #until <= :now`) writes by hand.

use super::Millis;

/// The take rule: a lease may be taken when none is stored under its name, or the stored one
/// has ended at `now` (its end is exclusive: a lease until `t` is free at `t`). A holder that
/// still holds it does not take it again: it waits for its end or releases it first.
pub fn may_take_lease(held_until: Option<Millis>, now: Millis) -> bool {
    held_until.is_none_or(|until| until <= now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_free_when_missing_or_ended() {
        assert!(may_take_lease(None, Millis(5)));
        assert!(may_take_lease(Some(Millis(5)), Millis(5)));
        assert!(!may_take_lease(Some(Millis(6)), Millis(5)));
    }
}
