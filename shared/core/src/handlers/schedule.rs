//! The reaper's edge: a scheduled event in, a report out. The event carries nothing the reaper
//! needs (it always works from "now"), so any payload is accepted.

use crate::ports::StoreError;
use crate::service::{Reaper, ReaperReport};

/// Intents handled per pass; a backlog larger than this is drained over the next passes.
pub const PASS_LIMIT: usize = 500;

pub async fn handle(reaper: &Reaper) -> Result<ReaperReport, StoreError> {
    reaper.run_once(PASS_LIMIT).await
}
