//! The reaper's edge: a scheduled event in, a report out. The event carries nothing the reaper
//! needs (it always works from "now"), so any payload is accepted.

use crate::ports::StoreError;
pub use crate::service::reaper::PASS_LIMIT;
use crate::service::{Reaper, ReaperReport};

pub async fn handle(reaper: &Reaper) -> Result<ReaperReport, StoreError> {
    reaper.run(PASS_LIMIT).await
}
