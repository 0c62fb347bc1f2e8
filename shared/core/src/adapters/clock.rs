//! The system clock. Tests drive `seatgate_testkit::ManualClock` instead, so lease expiry needs
//! no sleep.

use crate::domain::Millis;
use crate::ports::Clock;

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        Millis::now()
    }
}
