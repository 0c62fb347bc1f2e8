//! The sale's writes, read back from the store's write log: every booking, every checkout hold
//! (a user's or a waiting-list offer) and every waiting-list entry as the store wrote it, in
//! write order, each with the true time it landed. The hold-life and per-user limit checkers
//! judge these.
//!
//! Why from the log rather than from ledgers: a ledger is sampled, so a state that lived
//! between two samples (a hold confirmed past its deadline and then cancelled, a user over the
//! limit for a moment) would be missed; the log has every write. The backend logs a booking's,
//! a hold's and an entry's image as JSON opening with its id (`{"booking_id":`, `{"hold_id":`,
//! `{"entry_id":`), which no other image it logs does, so a prefix picks them out without
//! parsing every line. A
//! confirmed hold's booking is written with the hold and not logged apart: its image is the
//! hold's.

use seatgate::domain::{Booking, CheckoutHold, Millis, WaitEntry};

/// One write of the sale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaleWrite {
    /// When the write landed (true time).
    pub at: Millis,
    pub item: SaleItem,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaleItem {
    /// A booking made or cancelled.
    Booking(Booking),
    /// A checkout hold made, extended or resolved (a confirm's booking comes with it).
    Hold(CheckoutHold),
    /// A waiting-list entry joined, offered seats or left.
    Entry(WaitEntry),
}

/// The sale's writes in a store write log (`times[i]` is `writes[i]`'s landing time).
pub fn sale_writes(writes: &[String], times: &[Millis]) -> Vec<SaleWrite> {
    assert_eq!(writes.len(), times.len(), "a time for every write");
    writes
        .iter()
        .zip(times)
        .filter_map(|(line, &at)| {
            let (_, json) = line.split_once(' ')?;
            let item = if json.starts_with("{\"hold_id\":") {
                SaleItem::Hold(serde_json::from_str(json).unwrap_or_else(|e| unreadable(&e, json)))
            } else if json.starts_with("{\"booking_id\":") {
                SaleItem::Booking(
                    serde_json::from_str(json).unwrap_or_else(|e| unreadable(&e, json)),
                )
            } else if json.starts_with("{\"entry_id\":") {
                SaleItem::Entry(serde_json::from_str(json).unwrap_or_else(|e| unreadable(&e, json)))
            } else {
                return None;
            };
            Some(SaleWrite { at, item })
        })
        .collect()
}

/// The backend wrote it from the domain's type; one it cannot read back is a bug here.
fn unreadable(e: &serde_json::Error, json: &str) -> ! {
    panic!("a sale write the log cannot give back ({e}): {json}")
}

impl SaleWrite {
    /// The hold this write is of, if it is a hold's.
    pub fn hold(&self) -> Option<&CheckoutHold> {
        match &self.item {
            SaleItem::Hold(h) => Some(h),
            SaleItem::Booking(_) | SaleItem::Entry(_) => None,
        }
    }
}
