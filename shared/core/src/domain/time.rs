//! Wall-clock instants as milliseconds since the Unix epoch.
//!
//! Every store keeps times as integers so conditions such as `lease_until < :now` are plain
//! numeric comparisons in DynamoDB and SQLite alike; RFC 3339 only appears at the HTTP edge.

use serde::{Deserialize, Serialize};
use std::time::Duration;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// How far apart two instances' clocks may read at one instant, as this system assumes where
/// it orders two times stamped by different instances (a seat reading against the win that
/// suppressed the seat): a reading counts as after a win only when it is stamped more than this
/// after it. Lambda's hosts are kept by the Amazon Time Sync Service, well within a
/// millisecond; this allows a badly stepped host, and costs a wait on a just-won seat at most
/// one more reading. The simulator steps its instances' clocks within it.
pub const CLOCK_TOLERANCE: Duration = Duration::from_millis(250);

/// Milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Millis(pub i64);

impl Millis {
    pub fn now() -> Self {
        let now = OffsetDateTime::now_utc();
        Millis((now.unix_timestamp_nanos() / 1_000_000) as i64)
    }

    pub fn plus(self, d: Duration) -> Self {
        Millis(self.0.saturating_add(d.as_millis() as i64))
    }

    pub fn minus(self, d: Duration) -> Self {
        Millis(self.0.saturating_sub(d.as_millis() as i64))
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Millis) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0).max(0) as u64)
    }

    /// Whole seconds since the epoch, rounded up: the unit DynamoDB TTL attributes use.
    pub fn as_epoch_seconds_ceil(self) -> i64 {
        (self.0 + 999).div_euclid(1000)
    }

    pub fn to_rfc3339(self) -> String {
        let nanos = i128::from(self.0) * 1_000_000;
        OffsetDateTime::from_unix_timestamp_nanos(nanos)
            .ok()
            .and_then(|t| t.format(&Rfc3339).ok())
            .unwrap_or_else(|| self.0.to_string())
    }

    pub fn parse_rfc3339(s: &str) -> Option<Millis> {
        let t = OffsetDateTime::parse(s, &Rfc3339).ok()?;
        Some(Millis((t.unix_timestamp_nanos() / 1_000_000) as i64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_to_the_millisecond() {
        let t = Millis(1_764_534_000_123);
        let s = t.to_rfc3339();
        assert_eq!(s, "2025-11-30T20:20:00.123Z");
        assert_eq!(Millis::parse_rfc3339(&s), Some(t));
        assert_eq!(Millis::parse_rfc3339("yesterday"), None);
    }

    #[test]
    fn ttl_seconds_round_up() {
        assert_eq!(Millis(1001).as_epoch_seconds_ceil(), 2);
        assert_eq!(Millis(1000).as_epoch_seconds_ceil(), 1);
    }
}
