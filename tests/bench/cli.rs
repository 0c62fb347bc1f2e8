//! The bench's command line: one scenario and its knobs, each with its default and its unit.

use super::*;

#[derive(Debug, Clone, Parser)]
#[command(
    name = "seatgate-bench",
    about = "Load scenarios against the seatgate HTTP API"
)]
pub(super) struct Cli {
    /// The scenario (positional, or --scenario).
    #[arg(value_enum)]
    pub(super) scenario: Option<Scenario>,
    #[arg(long = "scenario", value_enum, conflicts_with = "scenario")]
    pub(super) scenario_flag: Option<Scenario>,
    /// Users (and confirms) in the burst.
    #[arg(long, default_value_t = 100)]
    pub(super) n: usize,
    /// Repetitions; the summary shows medians.
    #[arg(long, default_value_t = 1)]
    pub(super) repeat: usize,
    /// API of a running stack; without it an in-process stack is started per repetition.
    #[arg(long, requires = "upstream")]
    pub(super) api: Option<String>,
    /// The running stack's upstream simulator (admin routes are used).
    #[arg(long, requires = "api")]
    pub(super) upstream: Option<String>,
    /// Queue consumers of the in-process stack.
    #[arg(long, default_value_t = 1)]
    pub(super) workers: usize,
    /// Backend of the in-process stack. `aws` uses the endpoints of AWS_ENDPOINT_URL_DYNAMODB,
    /// AWS_ENDPOINT_URL_DYNAMODB_STREAMS and AWS_ENDPOINT_URL_SQS (or AWS itself), a fresh
    /// table and queue per repetition, and reports DynamoDB write requests.
    #[arg(long, value_enum, default_value = "embedded", conflicts_with = "api")]
    pub(super) backend: BackendKind,
    /// Timing profile of the in-process stack; default `local` on the embedded backend, `aws`
    /// on the AWS one. (DynamoDB Local runs one transaction at a time, so during a burst a
    /// worker's requests queue behind the confirms for seconds; `local`'s 5 s worker timeout
    /// can cut an invocation off after its claim, leaving that intent to the reaper.)
    #[arg(long, value_enum)]
    pub(super) timing: Option<TimingProfile>,
    /// How long to wait for every intent to become terminal, e.g. 60s, 1500ms.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub(super) settle_timeout: Duration,
    /// Pause between polling rounds. Time to terminal comes from `updated_at`, so this only
    /// changes how much read load the poller adds and how soon "all settled" is noticed.
    #[arg(long, default_value = "20ms", value_parser = parse_duration)]
    pub(super) poll_interval: Duration,
    /// Concurrent requests during setup and polling (the burst itself is all N at once).
    #[arg(long, default_value_t = 32)]
    pub(super) setup_concurrency: usize,
    /// same-seat-burst and its variants: `warm` opens each user's connection before the burst
    /// (a user about to confirm has the page and its prepare on a kept-alive connection), so
    /// the burst measures the service; `cold` opens most of the N connections during the burst
    /// itself, as the figures before this option did.
    #[arg(long, value_enum, default_value = "warm")]
    pub(super) connections: Connections,
    /// `lost-response`: how long the charge endpoint is down from the burst on.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub(super) charge_outage: Duration,
    /// read-storm, outage, waiters: runner instances (in-process stacks, each with its own
    /// caches and breaker copy) sharing one store and one upstream simulator.
    #[arg(long, default_value_t = 4)]
    pub(super) instances: usize,
    /// read-storm: reads of one seat.
    #[arg(long, default_value_t = 24_000)]
    pub(super) reads: usize,
    /// read-storm: the time the reads are spread over.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub(super) storm_for: Duration,
    /// read-storm: concurrent clients (each paced to its share of the schedule).
    #[arg(long, default_value_t = 128)]
    pub(super) clients: usize,
    /// outage: requests per second, open model (sent on schedule, answered or not); default
    /// 25. flash-sale: iterations (login + booking) per second; default 400.
    #[arg(long)]
    pub(super) rate: Option<f64>,
    /// outage: how long the load runs.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub(super) load_for: Duration,
    /// outage: when the upstream starts failing every call, from the load's start.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub(super) outage_at: Duration,
    /// outage: how long it fails.
    #[arg(long, default_value = "40s", value_parser = parse_duration)]
    pub(super) outage_for: Duration,
    /// outage: when above 0, the outage's 503s carry `Retry-After` of this many seconds (the
    /// routes are then held rather than the breaker opened), and the run counts the calls that
    /// reached a route before a `Retry-After` it was given had passed.
    #[arg(long, default_value_t = 0)]
    pub(super) outage_retry_after: u64,
    /// outage (and the other protection scenarios): with the breaker's wake-ups (`on`, the
    /// runner's default), without them (`off`: parked intents wait for the reaper's schedule),
    /// or `both`, each repetition once with and once without, side by side in one run.
    #[arg(long, value_enum, default_value = "on")]
    pub(super) wake_ups: WakeUpsArg,
    /// outage: share of the requests that are confirms (a distinct user on a distinct free
    /// seat: prepare + confirm); the rest are seat reads.
    #[arg(long, default_value_t = 0.2)]
    pub(super) confirm_share: f64,
    /// outage: seats the reads go round (read once before the load, so cached).
    #[arg(long, default_value_t = 20)]
    pub(super) read_seats: usize,
    /// outage: share of the reads that go to a seat never read before (nothing cached).
    #[arg(long, default_value_t = 0.05)]
    pub(super) cold_read_share: f64,
    /// outage: how often the breaker item is read from the store for the timeline.
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    pub(super) breaker_poll: Duration,
    /// waiters: waits (distinct users) on the one held seat.
    #[arg(long, default_value_t = 1000)]
    pub(super) waiters: usize,
    /// waiters: each wait's deadline, from its registration.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub(super) wait_deadline: Duration,
    /// waiters: how long the seat stays held once every wait is registered.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub(super) hold_for: Duration,
    /// waiters: how long to keep watching after the first waiter got the seat.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub(super) observe_after: Duration,
    /// outage: requests in flight at most (a semaphore in front of the load); default 128.
    /// flash-sale: iterations in flight at most (a slot finding it full is dropped); default
    /// 2000.
    #[arg(long)]
    pub(super) max_in_flight: Option<usize>,
    /// flash-sale: how long the load runs (each --find-saturation step too).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub(super) duration: Duration,
    /// flash-sale: seats of the flight (created fresh per run).
    #[arg(long, default_value_t = 300)]
    pub(super) capacity: u32,
    /// flash-sale: counter shards of the flight (1..16).
    #[arg(long, default_value_t = 1)]
    pub(super) shards: u32,
    /// flash-sale: distinct users; iteration i logs in as `u{i % users}`.
    #[arg(long, default_value_t = 300)]
    pub(super) users: usize,
    /// flash-sale: an iteration that cannot start this long past its slot is dropped.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub(super) lateness: Duration,
    /// flash-sale: step the rate up (--saturation-rates, each for --duration on a fresh
    /// flight) until booking p95 passes 100 ms or any error or drop appears.
    #[arg(long)]
    pub(super) find_saturation: bool,
    /// flash-sale: each booking under an `Idempotency-Key` of its own (a fresh key per
    /// iteration: every answer is a first answer, stored as the key's record).
    #[arg(long)]
    pub(super) keys: bool,
    /// flash-sale --find-saturation: the rates tried, in order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "400,1000,2000,3000,5000,7500,10000"
    )]
    pub(super) saturation_rates: Vec<f64>,
    /// flash-sale --find-saturation: each step's flight: `default` (--capacity seats) or
    /// `demand` (rate x duration seats, so every iteration can book).
    #[arg(long, value_enum, default_value = "default")]
    pub(super) step_capacity: flash::StepCapacity,
    /// flash-sale: run the sale as a checkout (`checkout.rs`): hold, pay, confirm, a share of
    /// buyers abandoning, and a waiting list behind the sell-out. Each buyer is its own user.
    #[arg(long)]
    pub(super) checkout: bool,
    /// flash-sale --checkout: the share of buyers who hold and never come back.
    #[arg(long, default_value_t = 0.2)]
    pub(super) abandon_share: f64,
    /// flash-sale --checkout: how long a buyer takes to pay, between its hold (or offer) and
    /// its confirm.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub(super) pay_for: Duration,
    /// flash-sale --checkout: the flight's hold TTL (short, so abandoned seats come back within
    /// the run).
    #[arg(long, default_value_t = 5)]
    pub(super) hold_ttl_secs: u32,
    /// flash-sale --checkout: the flight's offer TTL.
    #[arg(long, default_value_t = 10)]
    pub(super) offer_ttl_secs: u32,
    /// flash-sale: the latency-over-time SVG (default target/flash-sale.svg; with
    /// --find-saturation one per step, named <stem>-<rate>.svg).
    #[arg(long)]
    pub(super) plot: Option<PathBuf>,
    /// simulate: how many seeds.
    #[arg(long, default_value_t = 1_000)]
    pub(super) seeds: u64,
    /// simulate: the first seed (the run covers seed .. seed + seeds).
    #[arg(long, default_value_t = 1)]
    pub(super) seed: u64,
    /// simulate: the fault kinds, `all`, `none` or a comma-separated list of latency, errors,
    /// busy, outage, lost-commits, late-commits, store, replays, crashes, restarts, clock-steps.
    #[arg(long, default_value = "all", value_parser = seatgate_sim::FaultsSpec::parse)]
    pub(super) faults: seatgate_sim::FaultsSpec,
    /// simulate: who the users are besides the bookers, `all` (the default workload), `none`
    /// (the bookers alone) or a comma-separated list of holders (checkout holds), waiters (the
    /// waiting list).
    #[arg(long, default_value = "all", value_parser = seatgate_sim::workload::Mix::parse)]
    pub(super) mix: seatgate_sim::workload::Mix,
    /// simulate: OS threads running seeds (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub(super) jobs: usize,
    /// simulate: predict the AWS path instead (`seatgate_sim::aws`): the same-seat and spread
    /// bursts, seed 000's storm and the flash sale on the published timing profile, `--seeds`
    /// seeds each (default here 21; the storm takes at most 5 and the sale sweep 3).
    #[arg(long)]
    pub(super) aws: bool,
    /// compare: the targets, `all` or a comma-separated list of seatgate, maria-optimistic,
    /// maria-optimistic-retry, maria-pessimistic, maria-named-lock, maria-conditional,
    /// maria-seed-bug, postgres, redis-always, redis-everysec; `none` runs only the same-seat
    /// burst of `--burst`, `ceiling` only the generator's ceiling (`--ceiling-rates`).
    #[arg(long, default_value = "all")]
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    pub(super) targets: String,
    /// compare: users in seed 000's same-seat burst, run on seatgate's intent worker and on
    /// the seed's direct confirm before the flash-sale targets (`--repeat` times, the order
    /// alternating); 0 skips it.
    #[arg(long, default_value_t = 100)]
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    pub(super) burst: usize,
    /// compare: each saturation step's (and each generator-ceiling step's) length.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    pub(super) step_duration: Duration,
    /// compare: the capacity-above-demand scenario's rate (a seat and a user per iteration),
    /// also the rate of the pool calibration.
    #[arg(long, default_value_t = 1000.0)]
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    pub(super) demand_rate: f64,
    /// compare: connection pool sizes each baseline tries; it keeps the best.
    #[arg(long, value_delimiter = ',', default_value = "4,16,64")]
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    pub(super) pool_sizes: Vec<u32>,
    /// compare: how long each pool size is tried.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    pub(super) calibrate_for: Duration,
    /// compare: the rates of the generator-ceiling search against the no-op target (given with
    /// no value, `--ceiling-rates` alone: skip it).
    #[arg(
        long,
        value_delimiter = ',',
        num_args = 0..,
        default_value = "1000,2000,5000,10000,15000,20000"
    )]
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    pub(super) ceiling_rates: Vec<f64>,
    /// compare: where the load generator runs: `process` (a `drive` child per step, so the
    /// generator and the target each have their own runtime and neither schedules the other's
    /// tasks) or `in-process` (beside the targets, as before).
    #[arg(long, value_enum, default_value = "process")]
    #[cfg_attr(not(feature = "baselines"), allow(dead_code))]
    pub(super) generator: Generator,
    /// drive: the flash-sale API to load (a seatgate stack or a `compare` baseline).
    #[arg(long)]
    pub(super) target: Option<String>,
}

/// Where `compare`'s load generator runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[cfg_attr(not(feature = "baselines"), allow(dead_code))]
pub(super) enum Generator {
    Process,
    InProcess,
}

impl Cli {
    pub(super) fn scenario(&self) -> Scenario {
        self.scenario
            .or(self.scenario_flag)
            .unwrap_or(Scenario::SameSeatBurst)
    }

    /// How long to wait for all terminal: a lost-response run first waits out the outage.
    pub(super) fn settle_limit(&self) -> Duration {
        match self.scenario() {
            Scenario::LostResponse => self.charge_outage + self.settle_timeout,
            _ => self.settle_timeout,
        }
    }
}

pub(super) fn parse_duration(s: &str) -> Result<Duration, String> {
    let (number, unit) = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map_or((s, "s"), |i| s.split_at(i));
    let value: f64 = number.parse().map_err(|_| format!("bad duration {s:?}"))?;
    let secs = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => return Err(format!("bad duration unit in {s:?}; use ms, s or m")),
    };
    Ok(Duration::from_secs_f64(secs))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum Scenario {
    /// N users confirm the same seat at once.
    SameSeatBurst,
    /// The burst, while the first reserve's response is lost and the charge endpoint is down.
    LostResponse,
    /// Many clients read one seat through several instances sharing one store.
    ReadStorm,
    /// Mixed reads and confirms at a fixed rate while the upstream fails every call for a while.
    Outage,
    /// A thousand waits on one held seat, then the seat is freed upstream.
    Waiters,
    /// Seed 004: login + book one seat at a constant arrival rate against a 300-seat flight.
    FlashSale,
    /// The deterministic simulator's default workload over many seeds, every checker judging
    /// each (`--seeds`, `--seed`, `--faults`, `--mix`, `--jobs`).
    Simulate,
    /// seatgate beside MariaDB, PostgreSQL and Redis baselines under the flash-sale driver
    /// (`--targets`, `--duration`, `--step-duration`), and seed 000's same-seat burst on the
    /// intent worker and on a direct confirm (`--burst`); needs `--features baselines`.
    Compare,
    /// compare's load generator in a process of its own: one flash-sale step (`--rate`,
    /// `--duration`, `--capacity`, `--users`, `--shards`, `--max-in-flight`, `--lateness`)
    /// against `--target`, its whole result as one JSON line on stdout.
    Drive,
}

impl Scenario {
    pub(super) fn name(self) -> &'static str {
        match self {
            Scenario::SameSeatBurst => "same-seat-burst",
            Scenario::LostResponse => "lost-response",
            Scenario::ReadStorm => "read-storm",
            Scenario::Outage => "outage",
            Scenario::Waiters => "waiters",
            Scenario::FlashSale => "flash-sale",
            Scenario::Simulate => "simulate",
            Scenario::Compare => "compare",
            Scenario::Drive => "drive",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum TimingProfile {
    /// `Timing::local()`: 5 s worker timeout.
    Local,
    /// `Timing::fast()`: 800 ms worker timeout.
    Fast,
    /// `Timing::aws()`: the deployed numbers (30 s worker timeout).
    Aws,
}

impl TimingProfile {
    pub(super) fn timing(self) -> seatgate::config::Timing {
        match self {
            TimingProfile::Local => seatgate::config::Timing::local(),
            TimingProfile::Fast => seatgate::config::Timing::fast(),
            TimingProfile::Aws => seatgate::config::Timing::aws(),
        }
    }
}
