//! The catalogue of metrics seatgate emits: one list, so the code that records them, the
//! CloudWatch Embedded Metric Format lines the functions print, the runner's `GET /__metrics`,
//! and the template's alarms and dashboard all name the same things.
//!
//! Conventions are Powertools': one namespace ([`NAMESPACE`]), a `service` dimension (the
//! function, or `local` for the runner) on every metric, and a few low-cardinality dimensions of
//! each metric's own (never an id: a seat or intent id as a dimension would be one CloudWatch
//! metric per seat).
//!
//! Recording is [`count`] and [`observe_ms`] into one process-wide [`Registry`]; a Lambda
//! function prints what each invocation recorded as EMF lines on stdout ([`flush_emf`], after
//! [`emit_emf_as`] at its start), and the local runner serves the totals at `GET /__metrics`
//! ([`prometheus_text`]).
//!
//! Written by hand, and measured against the crates that could replace it (issue 20; the spike,
//! its commands and every figure are in `docs/measurements/metrics-spike/FINDINGS.md`): three
//! arm64 Lambda packages built as `scripts/emulators.sh lambda-build` builds ours, the same
//! catalogue recorded and flushed per invocation.
//!
//! | functions (EMF) | this module | metrique 0.1.33 + its EMF writer |
//! |---|---|---|
//! | arm64 `bootstrap` over a bare function | +35,720 B | +101,432 B |
//! | crates added to the worker function | 0 | +30 (it always enables `metrics`, `metrics-util`, `quanta`, `sketches-ddsketch`) |
//! | init, start to first line (host) | 1.7-2.2 ms | 1.7-2.2 ms |
//! | record + flush one invocation (host) | 18.5 us | 7.3-10.3 us |
//!
//! metrique is faster per invocation (both far under a millisecond) but larger, with thirty
//! more crates in every function, and fits worse: one EMF line per entry (a series recorded
//! ten times in an invocation is ten lines), no catalogue (a struct per dimension shape, no
//! help text), dimension sets unchecked at compile time, distributions without `Max`, `Min`,
//! `Count`, `Sum` or the 100-value folding. So the functions keep this module; its own
//! per-invocation time is mostly allocation in `emf::render`, the place to look if it ever
//! matters. The runner's Prometheus side was measured too ([`prometheus`]'s doc).

mod emf;
pub mod prometheus;
pub mod record;
mod registry;

pub use registry::{
    BUCKETS_MS, Dims, NONE, Registry, count, emit_emf_as, flush_emf, global, observe_ms,
    prometheus_text,
};

/// The CloudWatch namespace of every custom metric.
pub const NAMESPACE: &str = "Seatgate";

/// The dimension every metric carries: which function (or the local runner) emitted it.
pub const SERVICE_DIMENSION: &str = "service";

/// A CloudWatch unit, as EMF spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Milliseconds,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Milliseconds => "Milliseconds",
        }
    }
}

/// Every metric seatgate emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// Calls sent to the upstream, by `route` (reserve, charge, seat, room) and `outcome`
    /// (ok, taken, busy, refused, failed, timeout, dropped, unreadable).
    UpstreamCalls,
    /// Reserve POSTs sent for attempts that settled, by `outcome` (as for
    /// [`Metric::UpstreamCalls`]): counted where the breaker lets one through, so with
    /// [`Metric::AttemptsSettled`] the dashboard shows reserve POSTs per settled attempt (the
    /// brief's headline: one).
    ReservePosts,
    /// Reserve attempts settled (by the worker or the reaper), by `outcome` (reserved,
    /// seat_taken, suppressed, already_charged, credential_rejected, no_credential, refused, busy from the
    /// worker; charge_read, no_charge, credential_rejected, no_credential from the reaper).
    AttemptsSettled,
    /// Intents that reached a terminal status, by `status` and `reason`.
    IntentsTerminal,
    /// Confirms answered, by `kind`: `fresh` (a new intent) or `replay` (the first answer again).
    Confirms,
    /// From an intent's creation to its terminal status, by `status`.
    TimeToTerminal,
    /// How long one reaper pass took.
    ReaperPassDuration,
    /// What a reaper pass left for the next one, by `what`: `budget` (due intents not started
    /// because the pass's time ran out), `limit` (1 for a pass whose due query came back full, so
    /// more may be due), `deferred` (lost races, store errors, not yet due), `postponed` (charges
    /// that could not be read: their seats stay held).
    ReaperLeft,
    /// Reaper runs asked for by a wake-up (the breaker's probe time, a pause's end, a probe that
    /// found the upstream back), by whether the `upstream` was `open` (parked intents woken
    /// early) or `shut` (an ordinary pass).
    ReaperWakes,
    /// Attempts still unsettled past their maximum age (the reaper counts them each pass).
    UnsettledPastMax,
    /// Seats claimed by an intent's claim (the one attempt that may write the seat upstream).
    SeatClaimsTaken,
    /// Waits registered (`POST /waits`) and waits enqueued because their seat read free, by
    /// `event` (registered, enqueued).
    Waits,
    /// Requests refused by the per-user rate limit, by `route`.
    RateLimited,
    /// Breaker phase changes this instance made, by `phase` (open, probing, closed).
    BreakerTransitions,
    /// Flight booking answers, by `outcome` (booked, sold_out, limit_reached).
    Bookings,
    /// `Retry-After` pauses this instance wrote (the upstream said "not now" and when), by the
    /// `route` paused.
    UpstreamPauses,
    /// Upstream calls not sent, by `route` and `by` what: `breaker` (open, or another instance
    /// probing) or `pause` (a `Retry-After` not yet passed).
    UpstreamHeldBack,
    /// Checkout holds, by `event`: `held` (a hold made), `confirmed`, `released` (by its owner),
    /// `lapsed` (past its deadline: by the reaper, or an owner's late release). Offers are holds
    /// the store makes inside a return; they are counted when they resolve, not when made.
    Checkout,
}

impl Metric {
    pub const ALL: [Metric; 18] = [
        Metric::UpstreamCalls,
        Metric::ReservePosts,
        Metric::AttemptsSettled,
        Metric::IntentsTerminal,
        Metric::Confirms,
        Metric::TimeToTerminal,
        Metric::ReaperPassDuration,
        Metric::ReaperLeft,
        Metric::ReaperWakes,
        Metric::UnsettledPastMax,
        Metric::SeatClaimsTaken,
        Metric::Waits,
        Metric::RateLimited,
        Metric::BreakerTransitions,
        Metric::Bookings,
        Metric::UpstreamPauses,
        Metric::UpstreamHeldBack,
        Metric::Checkout,
    ];

    /// The CloudWatch metric name (the Prometheus name is its snake case, see
    /// [`Metric::prometheus_name`]).
    pub fn name(self) -> &'static str {
        match self {
            Metric::UpstreamCalls => "UpstreamCalls",
            Metric::ReservePosts => "ReservePosts",
            Metric::AttemptsSettled => "AttemptsSettled",
            Metric::IntentsTerminal => "IntentsTerminal",
            Metric::Confirms => "Confirms",
            Metric::TimeToTerminal => "TimeToTerminal",
            Metric::ReaperPassDuration => "ReaperPassDuration",
            Metric::ReaperLeft => "ReaperLeft",
            Metric::ReaperWakes => "ReaperWakes",
            Metric::UnsettledPastMax => "UnsettledPastMax",
            Metric::SeatClaimsTaken => "SeatClaimsTaken",
            Metric::Waits => "Waits",
            Metric::RateLimited => "RateLimited",
            Metric::BreakerTransitions => "BreakerTransitions",
            Metric::Bookings => "Bookings",
            Metric::UpstreamPauses => "UpstreamPauses",
            Metric::UpstreamHeldBack => "UpstreamHeldBack",
            Metric::Checkout => "Checkout",
        }
    }

    /// One line for `# HELP`.
    pub fn help(self) -> &'static str {
        match self {
            Metric::UpstreamCalls => "Calls sent to the upstream, by route and outcome.",
            Metric::ReservePosts => "Reserve POSTs sent to the upstream, by outcome.",
            Metric::AttemptsSettled => "Reserve attempts settled, by outcome.",
            Metric::IntentsTerminal => {
                "Intents that reached a terminal status, by status and reason."
            }
            Metric::Confirms => "Confirms answered, fresh or replay.",
            Metric::TimeToTerminal => {
                "Milliseconds from an intent's creation to its terminal status."
            }
            Metric::ReaperPassDuration => "Milliseconds one reaper pass took.",
            Metric::ReaperLeft => "What reaper passes left for the next one, by what.",
            Metric::ReaperWakes => "Reaper runs asked for by a wake-up, by upstream open or shut.",
            Metric::UnsettledPastMax => "Attempts seen unsettled past their maximum age.",
            Metric::SeatClaimsTaken => "Seats claimed by an intent's claim.",
            Metric::Waits => "Waits registered and enqueued.",
            Metric::RateLimited => "Requests refused by the per-user rate limit, by route.",
            Metric::BreakerTransitions => "Breaker phase changes made by this instance.",
            Metric::Bookings => "Flight booking answers, by outcome.",
            Metric::UpstreamPauses => "Retry-After pauses written, by route.",
            Metric::UpstreamHeldBack => "Upstream calls held back, by route and by what.",
            Metric::Checkout => "Checkout holds made, confirmed, released and lapsed, by event.",
        }
    }

    pub fn unit(self) -> Unit {
        match self {
            Metric::TimeToTerminal | Metric::ReaperPassDuration => Unit::Milliseconds,
            _ => Unit::Count,
        }
    }

    /// The metric's own dimensions, besides [`SERVICE_DIMENSION`].
    pub fn dimensions(self) -> &'static [&'static str] {
        match self {
            Metric::UpstreamCalls => &["route", "outcome"],
            Metric::ReservePosts | Metric::AttemptsSettled | Metric::Bookings => &["outcome"],
            Metric::IntentsTerminal => &["status", "reason"],
            Metric::Confirms => &["kind"],
            Metric::TimeToTerminal => &["status"],
            Metric::ReaperLeft => &["what"],
            Metric::ReaperWakes => &["upstream"],
            Metric::Waits | Metric::Checkout => &["event"],
            Metric::RateLimited | Metric::UpstreamPauses => &["route"],
            Metric::UpstreamHeldBack => &["route", "by"],
            Metric::BreakerTransitions => &["phase"],
            Metric::ReaperPassDuration | Metric::UnsettledPastMax | Metric::SeatClaimsTaken => &[],
        }
    }

    /// `seatgate_` and the name in snake case, with `_total` for counts and `_milliseconds`
    /// for durations, as Prometheus names them.
    pub fn prometheus_name(self) -> String {
        let mut snake = String::from("seatgate_");
        for (i, c) in self.name().chars().enumerate() {
            if c.is_ascii_uppercase() {
                if i > 0 {
                    snake.push('_');
                }
                snake.push(c.to_ascii_lowercase());
            } else {
                snake.push(c);
            }
        }
        snake.push_str(match self.unit() {
            Unit::Count => "_total",
            Unit::Milliseconds => "_milliseconds",
        });
        snake
    }

    /// The metric of this CloudWatch name, if seatgate emits one.
    pub fn named(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_metric_once_with_distinct_names() {
        let names: std::collections::BTreeSet<_> = Metric::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(names.len(), Metric::ALL.len());
        for m in Metric::ALL {
            assert_eq!(Metric::named(m.name()), Some(m));
        }
        assert_eq!(
            Metric::UpstreamCalls.prometheus_name(),
            "seatgate_upstream_calls_total"
        );
        assert_eq!(
            Metric::TimeToTerminal.prometheus_name(),
            "seatgate_time_to_terminal_milliseconds"
        );
    }
}
