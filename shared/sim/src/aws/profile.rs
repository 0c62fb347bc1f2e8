//! The AWS timing profile: the latencies and limits a deployed seatgate meets, as one table of
//! distributions, each row with its source, so a prediction can say what it rests on.
//!
//! Why a table and not constants scattered through the drivers: every predicted figure must
//! name its inputs, and a sensitivity run must be able to change one input and nothing else
//! ([`AwsProfile::with`]). The simulator draws from the table with the world's seed, so a
//! prediction is a function of its seed like every other run.
//!
//! Latencies are log-normal, fitted to a published median and 99th percentile: the shape of
//! network service times (a floor, a long right tail), and the one a p50/p99 pair pins down.
//! The sampler is written out ([`Dist::draw`], Box-Muller over the seeded generator) rather
//! than taken from `rand_distr`, one dependency for three lines whose stream must not change
//! between versions.

use rand::Rng;
use std::fmt;
use std::time::Duration;

/// A latency distribution: log-normal with this median and 99th percentile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dist {
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// The 99th percentile of the standard normal distribution.
const Z_99: f64 = 2.326_347_874;

impl Dist {
    pub const fn ms(p50_ms: f64, p99_ms: f64) -> Dist {
        Dist { p50_ms, p99_ms }
    }

    /// Always this long.
    pub const fn fixed(ms: f64) -> Dist {
        Dist::ms(ms, ms)
    }

    /// The log-normal's sigma: how far the p99 sits above the median, in log space.
    fn sigma(self) -> f64 {
        if self.p99_ms <= self.p50_ms || self.p50_ms <= 0.0 {
            return 0.0;
        }
        (self.p99_ms / self.p50_ms).ln() / Z_99
    }

    /// One draw, from `rng`.
    pub fn draw(self, rng: &mut impl Rng) -> Duration {
        if self.p50_ms <= 0.0 {
            return Duration::ZERO;
        }
        let sigma = self.sigma();
        let z = if sigma == 0.0 {
            0.0
        } else {
            // Box-Muller: two uniforms in (0, 1] give one standard normal.
            let u1: f64 = 1.0 - rng.random::<f64>();
            let u2: f64 = rng.random::<f64>();
            (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
        };
        // Whole milliseconds, rounded to the nearest: paused tokio time sleeps in whole
        // milliseconds and rounds a fraction up, which would add half a millisecond a draw.
        let ms = self.p50_ms * (sigma * z).exp();
        Duration::from_millis(ms.round() as u64)
    }

    /// The same shape, every draw `factor` times as long.
    pub fn scaled(self, factor: f64) -> Dist {
        Dist::ms(self.p50_ms * factor, self.p99_ms * factor)
    }
}

impl fmt::Display for Dist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "p50 {} ms / p99 {} ms", self.p50_ms, self.p99_ms)
    }
}

/// One input of the profile, for [`AwsProfile::with`] and the printed inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Input {
    DynamoRead,
    DynamoWrite,
    DynamoTransaction,
    SqsCall,
    StreamDelivery,
    FifoDelivery,
    StandardDelivery,
    ColdStart,
    Upstream,
    TransactionLock,
}

impl Input {
    pub const ALL: [Input; 10] = [
        Input::DynamoRead,
        Input::DynamoWrite,
        Input::DynamoTransaction,
        Input::SqsCall,
        Input::StreamDelivery,
        Input::FifoDelivery,
        Input::StandardDelivery,
        Input::ColdStart,
        Input::Upstream,
        Input::TransactionLock,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Input::DynamoRead => "dynamodb-read",
            Input::DynamoWrite => "dynamodb-write",
            Input::DynamoTransaction => "dynamodb-transaction",
            Input::SqsCall => "sqs-call",
            Input::StreamDelivery => "stream-delivery",
            Input::FifoDelivery => "fifo-delivery",
            Input::StandardDelivery => "standard-delivery",
            Input::ColdStart => "cold-start",
            Input::Upstream => "upstream",
            Input::TransactionLock => "transaction-lock",
        }
    }

    /// Where the figure comes from.
    pub fn source(self) -> &'static str {
        match self {
            Input::DynamoWrite => {
                "alexdebrie/dynamodb-performance-testing, PutItem from Lambda: p50 7.55, p99 16.2 ms"
            }
            Input::DynamoTransaction => {
                "alexdebrie/dynamodb-performance-testing, TransactWrite of 5 items from Lambda: p50 25.3, p99 92.5 ms"
            }
            Input::DynamoRead => {
                "no published figure here: taken as PutItem's (reads are a little faster, so an upper bound)"
            }
            Input::SqsCall => {
                "no published figure here: taken as PutItem's (one HTTPS round trip in the region)"
            }
            Input::StreamDelivery => {
                "bitesizedserverless, serverless messaging latency compared (eu-west-1): DynamoDB Streams to Lambda p50 213, p99 552 ms"
            }
            Input::FifoDelivery => {
                "bitesizedserverless, same study: SQS FIFO to Lambda p50 28, p99 645 ms"
            }
            Input::StandardDelivery => {
                "bitesizedserverless, same study: SQS standard to Lambda p50 16, p99 105 ms"
            }
            Input::ColdStart => {
                "docs/measurements/metrics-spike: the function's own init, 1.7 to 2.2 ms on the host (the platform's share is not in it)"
            }
            Input::Upstream => {
                "seed 000: a confirm that wrote to the school's system directly had p95 1.50 s (the range's p95 here); the shape below it is assumed"
            }
            Input::TransactionLock => {
                "no published figure: assumed a tenth of TransactWrite's (its prepare-to-commit span on the item); \
                 so with random arrivals one item's conflicts pass 10% at 36 transactions/s and half at 235/s, and it applies at most about 340/s: \
                 the few hundred a second at which users of DynamoDB counters meet TransactionConflict (gumroad PR #7452, PynamoDB #1264 report it, no rate)"
            }
        }
    }
}

/// The table: every latency and limit the AWS-path prediction uses.
#[derive(Debug, Clone, PartialEq)]
pub struct AwsProfile {
    /// `GetItem`, `Query`, `BatchGetItem` from Lambda.
    pub dynamo_read: Dist,
    /// `PutItem`, `UpdateItem`, `DeleteItem` from Lambda.
    pub dynamo_write: Dist,
    /// `TransactWriteItems` from Lambda (the 5-item figure for every transaction here: most
    /// hold 2 to 5 items; a flight's creation and its sold-out mark up to 17, and are rare).
    pub dynamo_transaction: Dist,
    /// An SQS API call (`SendMessage`, `DeleteMessageBatch`, `ChangeMessageVisibility`).
    pub sqs_call: Dist,
    /// A change record's time from its write to the relay's invocation.
    pub stream_delivery: Dist,
    /// A seat message's time from its send to the worker's invocation.
    pub fifo_delivery: Dist,
    /// An event's time from its send to the deliverer's invocation.
    pub standard_delivery: Dist,
    /// Added to the first invocation of each execution environment.
    pub cold_start: Dist,
    /// Every upstream call's latency, uniform in this range (ms): by default 100 to 1,574 ms,
    /// whose 95th percentile is seed 000's 1.50 s.
    pub upstream_ms: (u64, u64),
    /// Write units one item takes per second, at most (DynamoDB's per-partition limit, which
    /// a single hot item meets first).
    pub item_write_units_per_s: u32,
    /// Read units one item serves per second, at most.
    pub item_read_units_per_s: u32,
    /// The seat queue mapping's `MaximumConcurrency` (the template's `WorkerConcurrency`).
    pub worker_concurrency: usize,
    /// The HTTP API's stage throttle (the template's `ApiThrottleRateLimit`, `...BurstLimit`).
    pub api_rate_per_s: u32,
    pub api_burst: u32,
    /// The sale routes' own throttle, a bucket per route (`SaleThrottleRateLimit`,
    /// `...BurstLimit`): a booking and a checkout hold.
    pub sale_rate_per_s: u32,
    pub sale_burst: u32,
    /// The functions' timing (the template's: `Timing::aws()`).
    pub timing: seatgate::config::Timing,
    /// Which keys share a throughput limit (`capacity::Scope`; default per item, as once
    /// DynamoDB has split a hot key's items).
    pub limit_scope: super::capacity::Scope,
    /// How long a `TransactWriteItems` holds each of its items (its prepare to its commit on
    /// the item's node): another transaction reaching one of them meanwhile is cancelled
    /// with `TransactionConflict` (`capacity::Capacity::lock`).
    pub transaction_lock: Dist,
    /// What the whole table serves at once, before DynamoDB has adapted to the traffic: a new
    /// on-demand table 4,000 write and 12,000 read units a second ([`NEW_TABLE_UNITS_PER_S`]);
    /// a pre-warmed one its warm throughput ([`AwsProfile::pre_warmed`]; the template's
    /// `TableWarm...UnitsPerSecond`). Never above [`AwsProfile::table_quota_units_per_s`].
    pub table_write_units_per_s: u32,
    pub table_read_units_per_s: u32,
    /// The account's per-table throughput quota (read and write units a second each).
    pub table_quota_units_per_s: u32,
    /// Lambda's scaling of one function: this many more execution environments every 10 s
    /// (the first this many at once), up to the account's unreserved concurrency.
    pub lambda_scale_per_10s: u32,
    /// The account's concurrent executions; the worker's reservation (`worker_concurrency`)
    /// and the other pipeline functions' (`PIPELINE_RESERVED`) come out of it before the API
    /// function.
    pub account_concurrency: u32,
    /// The HTTP API's account-level throttle in the Region, above every stage's own.
    pub api_account_rate_per_s: u32,
    pub api_account_burst: u32,
}

/// Concurrency the template reserves for the relay (50), the deliverer (10) and the reaper (4:
/// its schedule and its wake-up queue's two).
pub const PIPELINE_RESERVED: u32 = 64;

/// A new on-demand table's instant capacity, write and read units a second.
pub const NEW_TABLE_UNITS_PER_S: (u32, u32) = (4_000, 12_000);

impl AwsProfile {
    /// The published figures and the template's defaults.
    pub fn published() -> Self {
        AwsProfile {
            dynamo_read: Dist::ms(7.55, 16.2),
            dynamo_write: Dist::ms(7.55, 16.2),
            dynamo_transaction: Dist::ms(25.3, 92.5),
            sqs_call: Dist::ms(7.55, 16.2),
            stream_delivery: Dist::ms(213.0, 552.0),
            fifo_delivery: Dist::ms(28.0, 645.0),
            standard_delivery: Dist::ms(16.0, 105.0),
            cold_start: Dist::fixed(2.0),
            upstream_ms: (100, 1_574),
            item_write_units_per_s: 1_000,
            item_read_units_per_s: 3_000,
            worker_concurrency: 20,
            api_rate_per_s: 50,
            api_burst: 200,
            sale_rate_per_s: 500,
            sale_burst: 1_000,
            limit_scope: super::capacity::Scope::Item,
            timing: seatgate::config::Timing::aws(),
            transaction_lock: Dist::ms(2.53, 9.25),
            // The template's warm throughput.
            table_write_units_per_s: 16_000,
            table_read_units_per_s: 12_000,
            table_quota_units_per_s: 40_000,
            lambda_scale_per_10s: 1_000,
            account_concurrency: 1_000,
            api_account_rate_per_s: 10_000,
            api_account_burst: 5_000,
        }
    }

    /// This profile on a table pre-warmed to `write_units_per_s` (its warm throughput; reads
    /// at least as many), within the table quota; never below a new table's.
    pub fn pre_warmed(&self, write_units_per_s: u32) -> AwsProfile {
        let mut p = self.clone();
        p.table_write_units_per_s = write_units_per_s.max(NEW_TABLE_UNITS_PER_S.0);
        p.table_read_units_per_s = write_units_per_s.max(NEW_TABLE_UNITS_PER_S.1);
        p
    }

    /// This profile on a new on-demand table, not pre-warmed.
    pub fn new_table(&self) -> AwsProfile {
        let mut p = self.clone();
        (p.table_write_units_per_s, p.table_read_units_per_s) = NEW_TABLE_UNITS_PER_S;
        p
    }

    /// The table's write and read units a second at once: its instant capacity, within the
    /// quota.
    pub fn table_units_per_s(&self) -> (u32, u32) {
        (
            self.table_write_units_per_s
                .min(self.table_quota_units_per_s),
            self.table_read_units_per_s
                .min(self.table_quota_units_per_s),
        )
    }

    /// The most execution environments the API function may have `elapsed` after its first
    /// invocation: Lambda's scaling steps, within the account's concurrency less the worker's
    /// reservation and the other functions' share.
    pub fn api_function_concurrency(&self, elapsed: Duration) -> u32 {
        let steps = 1 + u32::try_from(elapsed.as_secs() / 10).unwrap_or(u32::MAX);
        let scaled = self.lambda_scale_per_10s.saturating_mul(steps);
        let reserved = u32::try_from(self.worker_concurrency).unwrap_or(u32::MAX);
        let unreserved = self
            .account_concurrency
            .saturating_sub(reserved)
            .saturating_sub(PIPELINE_RESERVED);
        scaled.min(unreserved).max(1)
    }

    /// The HTTP API throttle a request meets: the stage's, within the account's.
    pub fn api_throttle(&self) -> (u32, u32) {
        (
            self.api_rate_per_s.min(self.api_account_rate_per_s),
            self.api_burst.min(self.api_account_burst),
        )
    }

    /// The throttle a booking or a hold meets: its route's, within the account's.
    pub fn sale_throttle(&self) -> (u32, u32) {
        (
            self.sale_rate_per_s.min(self.api_account_rate_per_s),
            self.sale_burst.min(self.api_account_burst),
        )
    }

    /// This profile with every HTTP API bucket raised to `rate_per_s` and `burst` (within the
    /// account's, as ever).
    pub fn throttled_at(&self, rate_per_s: u32, burst: u32) -> AwsProfile {
        let mut p = self.clone();
        (p.api_rate_per_s, p.api_burst) = (rate_per_s, burst);
        (p.sale_rate_per_s, p.sale_burst) = (rate_per_s, burst);
        p
    }

    /// The distribution of `input`, as a `Dist` (the upstream's uniform range as its bounds).
    pub fn dist(&self, input: Input) -> Dist {
        match input {
            Input::DynamoRead => self.dynamo_read,
            Input::DynamoWrite => self.dynamo_write,
            Input::DynamoTransaction => self.dynamo_transaction,
            Input::SqsCall => self.sqs_call,
            Input::StreamDelivery => self.stream_delivery,
            Input::FifoDelivery => self.fifo_delivery,
            Input::StandardDelivery => self.standard_delivery,
            Input::ColdStart => self.cold_start,
            Input::Upstream => Dist::ms(self.upstream_ms.0 as f64, self.upstream_ms.1 as f64),
            Input::TransactionLock => self.transaction_lock,
        }
    }

    /// `input`'s distribution as the report prints it.
    pub fn describe(&self, input: Input) -> String {
        match input {
            Input::Upstream => format!(
                "uniform {} to {} ms",
                self.upstream_ms.0, self.upstream_ms.1
            ),
            other => self.dist(other).to_string(),
        }
    }

    /// This profile with `input`'s every draw `factor` times as long: one input moved, for a
    /// sensitivity run.
    pub fn with(&self, input: Input, factor: f64) -> AwsProfile {
        let mut p = self.clone();
        let scale = |d: &mut Dist| *d = d.scaled(factor);
        match input {
            Input::DynamoRead => scale(&mut p.dynamo_read),
            Input::DynamoWrite => scale(&mut p.dynamo_write),
            Input::DynamoTransaction => scale(&mut p.dynamo_transaction),
            Input::SqsCall => scale(&mut p.sqs_call),
            Input::StreamDelivery => scale(&mut p.stream_delivery),
            Input::FifoDelivery => scale(&mut p.fifo_delivery),
            Input::StandardDelivery => scale(&mut p.standard_delivery),
            Input::ColdStart => scale(&mut p.cold_start),
            Input::TransactionLock => scale(&mut p.transaction_lock),
            Input::Upstream => {
                let (lo, hi) = p.upstream_ms;
                p.upstream_ms = (
                    (lo as f64 * factor).round() as u64,
                    (hi as f64 * factor).round() as u64,
                );
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn percentile(sorted: &[Duration], p: f64) -> f64 {
        let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted[i].as_secs_f64() * 1000.0
    }

    #[test]
    fn a_dist_draws_its_median_and_its_p99() {
        let dist = Dist::ms(25.3, 92.5);
        let mut rng = StdRng::seed_from_u64(7);
        let mut draws: Vec<Duration> = (0..100_000).map(|_| dist.draw(&mut rng)).collect();
        draws.sort();
        let (p50, p99) = (percentile(&draws, 0.50), percentile(&draws, 0.99));
        // Drawn in whole milliseconds.
        assert!((p50 - 25.3).abs() <= 0.7, "p50 {p50}");
        assert!((p99 - 92.5).abs() < 3.0, "p99 {p99}");
    }

    #[test]
    fn a_fixed_dist_never_varies_and_a_zero_one_takes_no_time() {
        let mut rng = StdRng::seed_from_u64(1);
        assert!((0..100).all(|_| Dist::fixed(2.0).draw(&mut rng) == Duration::from_millis(2)));
        assert_eq!(Dist::fixed(0.0).draw(&mut rng), Duration::ZERO);
    }

    #[test]
    fn with_moves_one_input_only() {
        let base = AwsProfile::published();
        let moved = base.with(Input::StreamDelivery, 2.0);
        for input in Input::ALL {
            let (a, b) = (base.dist(input), moved.dist(input));
            if input == Input::StreamDelivery {
                assert_eq!(b, Dist::ms(426.0, 1104.0));
            } else {
                assert_eq!(a, b, "{}", input.name());
            }
        }
    }
}
