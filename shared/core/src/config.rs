//! Timing, in one place.
//!
//! The numbers here keep invariant 5 of the brief true: a lease outlives the worker function's
//! timeout plus the upstream timeout plus a margin, so when the reaper (after lease + grace)
//! reads the user's charge, the attempt it settles can no longer be in flight. The AWS profile
//! mirrors `template.yaml`; a test checks the two agree.

use crate::backoff::Backoff;
use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timing {
    /// One upstream HTTP call, connect to last byte.
    pub upstream_timeout: Duration,
    /// The worker function's timeout; bounds a whole batch.
    pub worker_timeout: Duration,
    /// Added to `worker_timeout + upstream_timeout` to make the lease.
    pub lease_margin: Duration,
    /// The reaper waits this long past a lease before settling it.
    pub reaper_grace: Duration,
    /// Seat-queue visibility timeout: at least 6x the worker timeout (AWS's guidance for SQS
    /// event source mappings).
    pub visibility_timeout: Duration,
    /// How long a prepared action can be confirmed; also the seat suppression window.
    pub action_ttl: Duration,
    /// A REQUESTED intent untouched this long lost its message: the reaper enqueues it again.
    pub requeue_after: Duration,
    /// After this many requeues a REQUESTED intent is closed FAILED_UPSTREAM.
    pub max_requeues: u32,
    /// Backoff of a wait whose seat was taken: base doubles per attempt up to max.
    pub wait_backoff_base: Duration,
    pub wait_backoff_max: Duration,
    /// The furthest deadline a wait may ask for.
    pub max_wait: Duration,
    /// How often the reaper runs.
    pub reaper_interval: Duration,
    /// Longest pause between charge reads of one attempt whose charge could not be read (the
    /// pause grows with how long the attempt has been overdue, from `reaper_interval` up).
    pub settle_retry_max: Duration,
    /// An attempt unsettled this long after its lease ended is counted and alarmed on: its seat
    /// is held, so someone must look (it is never guessed).
    pub max_unsettled: Duration,
    /// One reaper pass stops starting work after this long, well inside the reaper function's
    /// timeout; what it left is logged and done by the next pass.
    pub reaper_pass_budget: Duration,
    /// Backoff of an event a subscriber did not accept: base doubling per receive up to max,
    /// until the event queue's max receive count dead-letters it.
    pub delivery_backoff_base: Duration,
    pub delivery_backoff_max: Duration,
    /// A seat or room reading younger than this is served as fresh; older, one instance
    /// fleet-wide refreshes it while the others serve it marked stale.
    pub read_ttl: Duration,
    /// How long an instance trusts what it last read of shared state (a reading, the breaker)
    /// before asking the store again: the bound on how late another instance's change is seen.
    pub instance_cache_ttl: Duration,
    /// The breaker opens when, over the last `breaker_window`, at least `breaker_min_calls`
    /// upstream calls of this instance were made and `breaker_failure_percent` of them failed
    /// (5xx, timeouts, 429).
    pub breaker_window: Duration,
    pub breaker_min_calls: u32,
    pub breaker_failure_percent: u32,
    /// The breaker also opens when this many upstream calls of this instance failed in a row,
    /// whatever the window holds: a fresh outage after healthy traffic would otherwise need
    /// half a window of pure failures to move the rate (resilience4j's and gobreaker's
    /// consecutive-failure rule). One or two transient errors do not open it.
    pub breaker_consecutive_failures: u32,
    /// How long an open breaker lets no call through before one probe.
    pub breaker_open_interval: Duration,
    /// The longest `Retry-After` honoured: a longer one holds its route this long (an upstream
    /// that asks for an hour is asked again by the breaker's probes, not by nobody).
    pub retry_after_max: Duration,
    /// The longest pause before a key whose refresh keeps failing is refreshed again: the pause
    /// is `read_ttl` doubled per failure in a row, up to this.
    pub read_failure_max: Duration,
    /// The per-user rate limit: requests per `rate_limit_window`, on each of confirms, waits and
    /// bookings (`domain::rate_limit`, which reads them from here).
    pub rate_limit_requests: u32,
    pub rate_limit_window: Duration,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum TimingError {
    #[error("upstream timeout ({0:?}) must be shorter than the worker timeout ({1:?})")]
    UpstreamSlowerThanWorker(Duration, Duration),
    #[error("visibility timeout ({0:?}) must be at least 6x the worker timeout ({1:?})")]
    VisibilityTooShort(Duration, Duration),
    #[error("requeue_after ({0:?}) must exceed the lease plus grace ({1:?})")]
    RequeueTooEarly(Duration, Duration),
    #[error("{0} is not a whole number")]
    NotANumber(String),
    #[error("TIMING_LEASE_SECS ({0:?}) disagrees with worker + upstream timeouts + margin ({1:?})")]
    LeaseMismatch(Duration, Duration),
    #[error("the reaper's pass budget ({0:?}) must leave room for one more upstream call ({1:?})")]
    PassBudgetTooShort(Duration, Duration),
    #[error(
        "the breaker needs a failure percentage in 1..=100 and at least one call, not {0}% of {1}"
    )]
    BreakerThreshold(u32, u32),
    #[error("the breaker needs at least one failure in a row to open, not {0}")]
    BreakerConsecutive(u32),
    #[error(
        "holds need a Retry-After cap of at least a second ({0:?}) and a read-failure pause of at least the read TTL ({1:?} < {2:?})"
    )]
    HoldBounds(Duration, Duration, Duration),
    #[error(
        "the rate limit needs at least one request per window of at least a second, not {0} per {1:?}"
    )]
    RateLimit(u32, Duration),
}

impl Timing {
    /// Production numbers, as in `template.yaml`.
    pub fn aws() -> Self {
        Timing {
            upstream_timeout: Duration::from_secs(3),
            worker_timeout: Duration::from_secs(30),
            lease_margin: Duration::from_secs(12),
            reaper_grace: Duration::from_secs(15),
            visibility_timeout: Duration::from_secs(180),
            action_ttl: Duration::from_secs(300),
            requeue_after: Duration::from_secs(900),
            max_requeues: 3,
            wait_backoff_base: Duration::from_secs(5),
            wait_backoff_max: Duration::from_secs(60),
            max_wait: Duration::from_secs(7 * 24 * 3600),
            reaper_interval: Duration::from_secs(60),
            settle_retry_max: Duration::from_secs(300),
            max_unsettled: Duration::from_secs(900),
            reaper_pass_budget: Duration::from_secs(30),
            delivery_backoff_base: Duration::from_secs(5),
            delivery_backoff_max: Duration::from_secs(300),
            read_ttl: Duration::from_secs(1),
            instance_cache_ttl: Duration::from_millis(250),
            breaker_window: Duration::from_secs(30),
            breaker_min_calls: 10,
            breaker_failure_percent: 50,
            breaker_open_interval: Duration::from_secs(10),
            breaker_consecutive_failures: 3,
            retry_after_max: Duration::from_secs(120),
            read_failure_max: Duration::from_secs(30),
            rate_limit_requests: 30,
            rate_limit_window: Duration::from_secs(10),
        }
    }

    /// The local runner's numbers: the same shape, shorter, so a killed run recovers in seconds.
    pub fn local() -> Self {
        Timing {
            upstream_timeout: Duration::from_secs(2),
            worker_timeout: Duration::from_secs(5),
            lease_margin: Duration::from_secs(1),
            reaper_grace: Duration::from_secs(1),
            visibility_timeout: Duration::from_secs(30),
            action_ttl: Duration::from_secs(300),
            requeue_after: Duration::from_secs(60),
            max_requeues: 3,
            wait_backoff_base: Duration::from_secs(1),
            wait_backoff_max: Duration::from_secs(3),
            max_wait: Duration::from_secs(7 * 24 * 3600),
            reaper_interval: Duration::from_millis(500),
            settle_retry_max: Duration::from_secs(10),
            max_unsettled: Duration::from_secs(300),
            reaper_pass_budget: Duration::from_secs(5),
            delivery_backoff_base: Duration::from_secs(1),
            delivery_backoff_max: Duration::from_secs(30),
            read_ttl: Duration::from_secs(1),
            instance_cache_ttl: Duration::from_millis(100),
            breaker_window: Duration::from_secs(10),
            breaker_min_calls: 5,
            breaker_failure_percent: 50,
            breaker_open_interval: Duration::from_secs(5),
            breaker_consecutive_failures: 3,
            retry_after_max: Duration::from_secs(30),
            read_failure_max: Duration::from_secs(8),
            rate_limit_requests: 30,
            rate_limit_window: Duration::from_secs(10),
        }
    }

    /// Tests: everything in a few hundred milliseconds.
    pub fn fast() -> Self {
        Timing {
            upstream_timeout: Duration::from_millis(300),
            worker_timeout: Duration::from_millis(800),
            lease_margin: Duration::from_millis(100),
            reaper_grace: Duration::from_millis(100),
            visibility_timeout: Duration::from_millis(4_800),
            action_ttl: Duration::from_secs(60),
            requeue_after: Duration::from_secs(10),
            max_requeues: 2,
            wait_backoff_base: Duration::from_millis(100),
            wait_backoff_max: Duration::from_millis(400),
            max_wait: Duration::from_secs(3600),
            reaper_interval: Duration::from_millis(100),
            settle_retry_max: Duration::from_millis(800),
            max_unsettled: Duration::from_secs(20),
            reaper_pass_budget: Duration::from_secs(2),
            delivery_backoff_base: Duration::from_millis(100),
            delivery_backoff_max: Duration::from_millis(400),
            read_ttl: Duration::from_millis(200),
            instance_cache_ttl: Duration::from_millis(20),
            breaker_window: Duration::from_secs(2),
            breaker_min_calls: 3,
            breaker_failure_percent: 50,
            breaker_open_interval: Duration::from_millis(300),
            breaker_consecutive_failures: 3,
            retry_after_max: Duration::from_secs(2),
            read_failure_max: Duration::from_millis(1_600),
            rate_limit_requests: 30,
            rate_limit_window: Duration::from_secs(10),
        }
    }

    /// `base`, with any `TIMING_*` variable that is set taking precedence (how `template.yaml`
    /// passes its `Timing` mapping to the functions). Whole seconds (`_SECS`), milliseconds (`_MS`)
    /// or counts.
    pub fn from_env(base: Timing) -> Result<Timing, TimingError> {
        Self::from_lookup(base, |k| std::env::var(k).ok())
    }

    fn from_lookup(
        mut t: Timing,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Timing, TimingError> {
        let number = |key: &str| -> Result<Option<u64>, TimingError> {
            get(key)
                .map(|v| {
                    v.trim()
                        .parse::<u64>()
                        .map_err(|_| TimingError::NotANumber(key.to_owned()))
                })
                .transpose()
        };
        let secs = |key: &str, slot: &mut Duration| -> Result<(), TimingError> {
            if let Some(n) = number(key)? {
                *slot = Duration::from_secs(n);
            }
            Ok(())
        };
        let millis = |key: &str, slot: &mut Duration| -> Result<(), TimingError> {
            if let Some(n) = number(key)? {
                *slot = Duration::from_millis(n);
            }
            Ok(())
        };
        let count = |key: &str, slot: &mut u32| -> Result<(), TimingError> {
            if let Some(n) = number(key)? {
                *slot = u32::try_from(n).map_err(|_| TimingError::NotANumber(key.to_owned()))?;
            }
            Ok(())
        };
        secs("TIMING_UPSTREAM_TIMEOUT_SECS", &mut t.upstream_timeout)?;
        secs("TIMING_WORKER_TIMEOUT_SECS", &mut t.worker_timeout)?;
        secs("TIMING_LEASE_MARGIN_SECS", &mut t.lease_margin)?;
        secs("TIMING_REAPER_GRACE_SECS", &mut t.reaper_grace)?;
        secs("TIMING_VISIBILITY_TIMEOUT_SECS", &mut t.visibility_timeout)?;
        secs("TIMING_ACTION_TTL_SECS", &mut t.action_ttl)?;
        secs("TIMING_REQUEUE_AFTER_SECS", &mut t.requeue_after)?;
        secs("TIMING_WAIT_BACKOFF_BASE_SECS", &mut t.wait_backoff_base)?;
        secs("TIMING_WAIT_BACKOFF_MAX_SECS", &mut t.wait_backoff_max)?;
        secs("TIMING_MAX_WAIT_SECS", &mut t.max_wait)?;
        secs("TIMING_REAPER_INTERVAL_SECS", &mut t.reaper_interval)?;
        secs("TIMING_SETTLE_RETRY_MAX_SECS", &mut t.settle_retry_max)?;
        secs("TIMING_MAX_UNSETTLED_SECS", &mut t.max_unsettled)?;
        secs("TIMING_REAPER_PASS_BUDGET_SECS", &mut t.reaper_pass_budget)?;
        secs(
            "TIMING_DELIVERY_BACKOFF_BASE_SECS",
            &mut t.delivery_backoff_base,
        )?;
        secs(
            "TIMING_DELIVERY_BACKOFF_MAX_SECS",
            &mut t.delivery_backoff_max,
        )?;
        millis("TIMING_READ_TTL_MS", &mut t.read_ttl)?;
        millis("TIMING_INSTANCE_CACHE_MS", &mut t.instance_cache_ttl)?;
        secs("TIMING_BREAKER_WINDOW_SECS", &mut t.breaker_window)?;
        secs("TIMING_BREAKER_OPEN_SECS", &mut t.breaker_open_interval)?;
        count("TIMING_BREAKER_MIN_CALLS", &mut t.breaker_min_calls)?;
        count(
            "TIMING_BREAKER_CONSECUTIVE_FAILURES",
            &mut t.breaker_consecutive_failures,
        )?;
        secs("TIMING_RETRY_AFTER_MAX_SECS", &mut t.retry_after_max)?;
        secs("TIMING_READ_FAILURE_MAX_SECS", &mut t.read_failure_max)?;
        count(
            "TIMING_BREAKER_FAILURE_PERCENT",
            &mut t.breaker_failure_percent,
        )?;
        count("TIMING_MAX_REQUEUES", &mut t.max_requeues)?;
        count("TIMING_RATE_LIMIT_REQUESTS", &mut t.rate_limit_requests)?;
        secs("TIMING_RATE_LIMIT_WINDOW_SECS", &mut t.rate_limit_window)?;
        // A lease stated outright must agree with the one derived from its parts.
        if let Some(v) = get("TIMING_LEASE_SECS") {
            let lease: u64 = v
                .trim()
                .parse()
                .map_err(|_| TimingError::NotANumber("TIMING_LEASE_SECS".into()))?;
            if Duration::from_secs(lease) != t.lease() {
                return Err(TimingError::LeaseMismatch(
                    Duration::from_secs(lease),
                    t.lease(),
                ));
            }
        }
        t.validate()?;
        Ok(t)
    }

    pub fn lease(&self) -> Duration {
        self.worker_timeout + self.upstream_timeout + self.lease_margin
    }

    /// How long one upstream call can take at most, with a margin: the lease of a breaker probe
    /// and of a reading's refresh, after which another instance may take over.
    pub fn upstream_call_lease(&self) -> Duration {
        self.upstream_timeout + self.lease_margin
    }

    /// The pause before the next charge read of an attempt overdue by `overdue` whose charge could
    /// not be read: as long as it has been overdue (so the pauses double), at least one reaper
    /// interval and at most `settle_retry_max`. Derived from the attempt's own times, so no
    /// counter needs writing.
    pub fn settle_retry(&self, overdue: Duration) -> Duration {
        overdue.clamp(
            self.reaper_interval,
            self.settle_retry_max.max(self.reaper_interval),
        )
    }

    /// The pause before a due wait whose seat read taken is looked at again: as long as the wait
    /// is old (so a new wait is checked often, an old one less), between `wait_backoff_base` and
    /// `wait_backoff_max`, then jittered down by up to half so waits registered together spread
    /// out. Checks go through the seat-read cache, so their count does not reach the upstream.
    ///
    /// `draw(max)` is a uniform draw from `0..=max` (the services' injected `Random` port).
    pub fn wait_recheck(&self, age: Duration, draw: impl FnOnce(u64) -> u64) -> Duration {
        let pause = age.clamp(
            self.wait_backoff_base,
            self.wait_backoff_max.max(self.wait_backoff_base),
        );
        let half = pause.as_millis() as u64 / 2;
        Duration::from_millis(half + draw(half))
    }

    /// Backoff before a wait's next attempt, after `attempts` attempts.
    pub fn wait_backoff(&self, attempts: u32) -> Duration {
        Backoff::new(self.wait_backoff_base, self.wait_backoff_max).delay(attempts)
    }

    pub fn validate(&self) -> Result<(), TimingError> {
        if self.upstream_timeout >= self.worker_timeout {
            return Err(TimingError::UpstreamSlowerThanWorker(
                self.upstream_timeout,
                self.worker_timeout,
            ));
        }
        if self.visibility_timeout < self.worker_timeout * 6 {
            return Err(TimingError::VisibilityTooShort(
                self.visibility_timeout,
                self.worker_timeout,
            ));
        }
        if self.reaper_pass_budget <= self.upstream_timeout {
            return Err(TimingError::PassBudgetTooShort(
                self.reaper_pass_budget,
                self.upstream_timeout,
            ));
        }
        if !(1..=100).contains(&self.breaker_failure_percent) || self.breaker_min_calls == 0 {
            return Err(TimingError::BreakerThreshold(
                self.breaker_failure_percent,
                self.breaker_min_calls,
            ));
        }
        if self.breaker_consecutive_failures == 0 {
            return Err(TimingError::BreakerConsecutive(
                self.breaker_consecutive_failures,
            ));
        }
        if self.retry_after_max < Duration::from_secs(1) || self.read_failure_max < self.read_ttl {
            return Err(TimingError::HoldBounds(
                self.retry_after_max,
                self.read_failure_max,
                self.read_ttl,
            ));
        }
        if self.rate_limit_requests == 0 || self.rate_limit_window < Duration::from_secs(1) {
            return Err(TimingError::RateLimit(
                self.rate_limit_requests,
                self.rate_limit_window,
            ));
        }
        if self.requeue_after <= self.lease() + self.reaper_grace {
            return Err(TimingError::RequeueTooEarly(
                self.requeue_after,
                self.lease() + self.reaper_grace,
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_keeps_the_lease_invariant() {
        for t in [Timing::aws(), Timing::local(), Timing::fast()] {
            t.validate().unwrap();
            assert!(t.lease() > t.worker_timeout + t.upstream_timeout);
        }
    }

    #[test]
    fn validation_catches_a_short_visibility_timeout() {
        let mut t = Timing::aws();
        t.visibility_timeout = t.worker_timeout * 5;
        assert!(matches!(
            t.validate(),
            Err(TimingError::VisibilityTooShort(..))
        ));
    }

    #[test]
    fn env_overrides_apply_and_are_checked() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let t = Timing::from_lookup(
            Timing::aws(),
            env(&[
                ("TIMING_WORKER_TIMEOUT_SECS", "20"),
                ("TIMING_VISIBILITY_TIMEOUT_SECS", "120"),
            ]),
        )
        .unwrap();
        assert_eq!(t.worker_timeout, Duration::from_secs(20));
        assert_eq!(
            Timing::from_lookup(Timing::aws(), env(&[("TIMING_LEASE_SECS", "45")])).unwrap(),
            Timing::aws()
        );
        assert!(matches!(
            Timing::from_lookup(Timing::aws(), env(&[("TIMING_LEASE_SECS", "44")])),
            Err(TimingError::LeaseMismatch(..))
        ));
        assert!(matches!(
            Timing::from_lookup(Timing::aws(), env(&[("TIMING_ACTION_TTL_SECS", "soon")])),
            Err(TimingError::NotANumber(_))
        ));
    }

    #[test]
    fn a_wait_recheck_grows_with_age_within_its_bounds_and_is_jittered_down() {
        let t = Timing::local();
        for (age, pause) in [
            (Duration::ZERO, t.wait_backoff_base),
            (Duration::from_millis(1_500), Duration::from_millis(1_500)),
            (Duration::from_secs(3_600), t.wait_backoff_max),
        ] {
            let mut seen = std::collections::BTreeSet::new();
            for _ in 0..200 {
                let d = t.wait_recheck(age, |max| rand::random_range(0..=max));
                assert!(d >= pause / 2 && d <= pause, "{age:?}: {d:?}");
                seen.insert(d);
            }
            assert!(seen.len() > 10, "jittered: {seen:?}");
        }
    }

    #[test]
    fn wait_backoff_doubles_and_caps() {
        let t = Timing::fast();
        assert_eq!(t.wait_backoff(1), Duration::from_millis(100));
        assert_eq!(t.wait_backoff(2), Duration::from_millis(200));
        assert_eq!(t.wait_backoff(30), Duration::from_millis(400));
    }
}
