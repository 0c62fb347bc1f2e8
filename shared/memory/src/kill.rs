//! A run killed between two calls, as a Lambda is killed mid-invocation: the simulator runs an
//! API call, a relay pass or a delivery batch under a budget of calls ([`killed_after`]), and
//! once the budget is spent every further store call of that run is refused unapplied, as if
//! the function had died just before it.
//!
//! Why a budget of calls and not of time: this backend answers in no simulated time unless it
//! is given service times, so a run that only touches the store starts and ends in one instant
//! and a kill timed in milliseconds would always land before it or after it, never between its
//! writes, where the combinations that matter are (a booking's record begun and the booking not
//! made; the booking made and its record not finished). The budget lives in a tokio task-local,
//! so it binds the run's own futures (those it polls) and nothing another task does.
//!
//! A dead run's later calls fail as the store's `Unavailable`, which the services may still
//! react to (they cannot write: every call fails); the caller discards whatever the run
//! answers and treats it as killed.

use std::cell::Cell;
use std::future::Future;

struct Budget {
    left: Cell<u32>,
    died: Cell<bool>,
}

tokio::task_local! {
    static BUDGET: Budget;
}

/// Runs `run` with `calls` calls to spend: its output, and whether it died (wanted a call past
/// its budget).
pub async fn killed_after<F: Future>(calls: u32, run: F) -> (F::Output, bool) {
    let budget = Budget {
        left: Cell::new(calls),
        died: Cell::new(false),
    };
    BUDGET
        .scope(budget, async move {
            let out = run.await;
            (out, BUDGET.with(|b| b.died.get()))
        })
        .await
}

/// Spends one call of the running budget, if the caller runs under one: `false` if the run
/// is dead (its budget was spent), and from then on it stays dead. `true` outside a budget.
pub fn spend() -> bool {
    BUDGET
        .try_with(|b| {
            if b.died.get() {
                return false;
            }
            match b.left.get() {
                0 => {
                    b.died.set(true);
                    false
                }
                n => {
                    b.left.set(n - 1);
                    true
                }
            }
        })
        .unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_run_dies_at_its_budget_and_stays_dead() {
        let (spent, died) = killed_after(2, async { [spend(), spend(), spend(), spend()] }).await;
        assert_eq!(spent, [true, true, false, false]);
        assert!(died);
        let (spent, died) = killed_after(2, async { [spend(), spend()] }).await;
        assert_eq!(spent, [true, true]);
        assert!(!died, "a run within its budget lives");
        assert!(spend(), "outside a budget every call goes through");
    }
}
