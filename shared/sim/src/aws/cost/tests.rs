//! The meter counts what a DynamoDB request would bill.

use super::*;

#[test]
fn a_transaction_bills_its_items_twice_and_a_refused_write_is_billed_but_unreported() {
    let meter = CostMeter::default();
    meter.add(&[
        Request::Transaction(vec![Item::Shard, Item::Booking, Item::Idempotency], true),
        Request::Write("UpdateItem", Item::Window, true),
        Request::Write("PutItem", Item::Idempotency, false),
        Request::Read("Query"),
    ]);
    let c = meter.snapshot();
    assert_eq!(c.billed_write_units(), 2 * 3 + 1 + 1);
    assert_eq!(c.applied_single_units.values().sum::<u64>(), 1);
    assert_eq!(c.applied_transactions, 1);
    assert_eq!(c.total_requests(), 4);
    let before = c.clone();
    meter.add(&[Request::Transaction(vec![Item::Shard, Item::Flight], false)]);
    let since = meter.snapshot().since(&before);
    assert_eq!(since.requests("TransactWriteItems"), 1);
    assert_eq!(
        (since.applied_transactions, since.billed_write_units()),
        (0, 4)
    );
}
