//! The local runner: the whole seatgate stack in one process, on the embedded (SQLite) backend
//! or, with [`BackendKind::Aws`], on DynamoDB + Streams and SQS FIFO (AWS itself, or DynamoDB
//! Local and moto) configured from the standard AWS environment ([`aws`]).
//!
//! It plays every part the AWS account plays around the Lambda handlers: API Gateway with its
//! JWT authorizer ([`gateway`], [`auth`]), the DynamoDB Streams and SQS event source mappings
//! and the EventBridge schedule ([`mappings`]), and by default the upstream seat system (the
//! `upstream-sim` crate). The handlers it calls are the ones in `seatgate::handlers`, the same
//! functions the Lambda binaries run.
//!
//! It is a library first so that tests and the benchmark start a stack in-process with
//! [`start`] on ephemeral ports and stop it with [`Stack::shutdown`]; the `seatgate-local`
//! binary is a thin shell around it ([`cli`]).
//!
//! Everything that matters is in the SQLite file (or the table and queue), so a killed runner
//! recovers on restart: messages in flight reappear after their visibility timeout, RESERVING
//! intents are settled by the reaper, pending outbox rows (stream records) are relayed; the token
//! key lives next to the file, so tokens issued before the restart still work.

pub mod auth;
pub mod aws;
pub mod cli;
pub mod exposure;
mod gateway;
pub mod history;
pub mod mappings;
pub mod streams;
pub mod ui;

use anyhow::{Context as _, bail};
use seatgate::adapters::clock::SystemClock;
use seatgate::adapters::upstream_http::HttpUpstream;
use seatgate::adapters::wake_timer::WakeTimer;
use seatgate::adapters::webhook::{NoSubscribers, Webhook};
use seatgate::config::Timing;
use seatgate::domain::{Secret, UserId};
use seatgate::ports::WakeUps;
use seatgate::ports::{
    Actions, BreakerStates, Clock, Credentials, EventQueue, Flights, HandBack, Intents,
    OperatorLeases, QueueAdmin, QueueConsumer, RateLimits, Readings, SeatQueue, Subscribers,
    Upstream,
};
use seatgate::service::{Ports, Services};
use seatgate_embedded::{EmbeddedBackend, EmbeddedConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};
use upstream_sim::Simulator;

pub use auth::TokenAuthority;
pub use aws::{AwsBackend, AwsOptions};

/// Which implementation of the ports the stack runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum BackendKind {
    /// SQLite file: intents, outbox and FIFO queue in one database.
    #[default]
    Embedded,
    /// DynamoDB (+ Streams) and SQS FIFO through the AWS SDK, configured from the standard
    /// AWS environment (region, credentials, `AWS_ENDPOINT_URL_*` for emulators).
    Aws,
}

/// Which parts this process runs, so several processes can share one database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Role {
    /// HTTP API, relay, workers and reaper.
    #[default]
    All,
    /// Only the HTTP API.
    Api,
    /// Only the relay, the queue workers and the reaper.
    Workers,
}

impl Role {
    pub fn serves_api(self) -> bool {
        matches!(self, Role::All | Role::Api)
    }

    pub fn runs_workers(self) -> bool {
        matches!(self, Role::All | Role::Workers)
    }
}

/// Where terminal intent events are posted, signed with `key`.
#[derive(Debug, Clone)]
pub struct WebhookTarget {
    pub url: String,
    pub key: Secret,
}

/// Everything [`start`] needs. `Default` is what the binary runs with no flags.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// The HTTP API's address; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Where the upstream simulator listens when one is started; port 0 picks a free one.
    pub upstream_listen: SocketAddr,
    /// An upstream that is already running; then no simulator is started.
    pub upstream_url: Option<String>,
    /// The SQLite file (its directory is created); `None` for a private in-memory database.
    /// With [`BackendKind::Aws`] only its directory is used, for the token key file.
    pub db: Option<PathBuf>,
    pub backend: BackendKind,
    /// Table and queue names for [`BackendKind::Aws`].
    pub aws: AwsOptions,
    /// Concurrent queue pollers, like the worker function's concurrency. Messages of one seat
    /// are still handled one batch at a time, as FIFO message groups demand.
    pub workers: usize,
    pub timing: Timing,
    pub webhook: Option<WebhookTarget>,
    pub role: Role,
    /// Registers `u1..uN` with the upstream, credential `cred-uN`.
    pub demo_users: usize,
    /// The token key; `None` reads `SEATGATE_JWT_SECRET` or the key file next to the database.
    pub jwt_secret: Option<Secret>,
    /// Serve `POST /dev/token` even on a non-loopback address or against remote AWS endpoints
    /// (see [`exposure`]).
    pub insecure_dev_tokens: bool,
    /// Whether the breaker's wake-ups run the reaper when the upstream comes back (on by
    /// default). Off, parked intents wait for the reaper's schedule, as before the wake-ups:
    /// for benches that compare the two side by side.
    pub wake_ups: bool,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 3000)),
            upstream_listen: SocketAddr::from(([127, 0, 0, 1], 3001)),
            upstream_url: None,
            db: Some(PathBuf::from(".seatgate/seatgate.sqlite3")),
            backend: BackendKind::Embedded,
            aws: AwsOptions::default(),
            workers: 1,
            timing: Timing::local(),
            webhook: None,
            role: Role::All,
            demo_users: 0,
            jwt_secret: None,
            insecure_dev_tokens: false,
            wake_ups: true,
        }
    }
}

impl RunnerConfig {
    /// For tests and benchmarks: both servers on free loopback ports, the given database (or
    /// memory), and a fixed token key so nothing is read from the environment.
    pub fn ephemeral(db: Option<PathBuf>) -> Self {
        RunnerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            upstream_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            db,
            jwt_secret: Some(Secret::new("seatgate-local-test-key")),
            ..RunnerConfig::default()
        }
    }

    /// [`RunnerConfig::ephemeral`] on the AWS backend, with a table and queue of their own
    /// (named `<prefix>-<random>`, created on start; delete them with
    /// [`AwsBackend::delete_resources`]), on `Timing::aws()` like the command line's AWS
    /// backend (DynamoDB Local under a burst is slower than `local`'s worker timeout allows).
    pub fn ephemeral_aws(prefix: &str) -> Self {
        RunnerConfig {
            backend: BackendKind::Aws,
            aws: AwsOptions::unique(prefix),
            timing: Timing::aws(),
            ..RunnerConfig::ephemeral(None)
        }
    }
}

/// The backend a stack runs on, for tests that look underneath the API.
#[derive(Debug, Clone)]
pub enum Backend {
    Embedded(EmbeddedBackend),
    /// The DynamoDB store (with its request counters), the queue and their names.
    Aws(Box<AwsBackend>),
}

impl Backend {
    pub fn embedded(&self) -> Option<&EmbeddedBackend> {
        match self {
            Backend::Embedded(b) => Some(b),
            Backend::Aws(_) => None,
        }
    }

    pub fn aws(&self) -> Option<&AwsBackend> {
        match self {
            Backend::Aws(b) => Some(b),
            Backend::Embedded(_) => None,
        }
    }

    pub fn kind(&self) -> BackendKind {
        match self {
            Backend::Embedded(_) => BackendKind::Embedded,
            Backend::Aws(_) => BackendKind::Aws,
        }
    }

    /// The ports, and how a queue poller waits for work.
    fn ports(&self) -> BackendPorts {
        match self {
            Backend::Embedded(b) => BackendPorts {
                actions: Arc::new(b.clone()),
                intents: Arc::new(b.clone()),
                credentials: Arc::new(b.clone()),
                flights: Arc::new(b.clone()),
                holds: Arc::new(b.clone()),
                waitlist: Arc::new(b.clone()),
                readings: Arc::new(b.clone()),
                breaker: Arc::new(b.clone()),
                rate_limits: Arc::new(b.clone()),
                leases: Arc::new(b.clone()),
                queue: Arc::new(b.clone()),
                consumer: Arc::new(b.clone()),
                queue_wake: b.queue_notify(),
                queue_idle: mappings::POLL_INTERVAL,
                hand_back: Arc::new(b.clone()),
                events_queue: Arc::new(b.events()),
                events_consumer: Arc::new(b.events()),
                events_hand_back: Arc::new(b.events()),
                queue_admin: Some(Arc::new(b.clone())),
                ops_breaker: Arc::new(b.clone()),
                ops_intents: Arc::new(b.clone()),
                ops_flights: Arc::new(b.clone()),
            },
            Backend::Aws(b) => BackendPorts {
                actions: Arc::new(b.store.clone()),
                intents: Arc::new(b.store.clone()),
                credentials: Arc::new(b.store.clone()),
                flights: Arc::new(b.store.clone()),
                holds: Arc::new(b.store.clone()),
                waitlist: Arc::new(b.store.clone()),
                readings: Arc::new(b.store.clone()),
                breaker: Arc::new(b.store.clone()),
                rate_limits: Arc::new(b.store.clone()),
                leases: Arc::new(b.store.clone()),
                queue: Arc::new(b.queue.clone()),
                consumer: Arc::new(b.queue.clone()),
                // Nothing in this process signals an SQS queue; the receive's long poll is the
                // wait, so an empty receive is followed by the next one at once.
                queue_wake: Arc::new(Notify::new()),
                queue_idle: Duration::ZERO,
                hand_back: Arc::new(b.queue.clone()),
                events_queue: Arc::new(b.events.clone()),
                events_consumer: Arc::new(b.events.clone()),
                events_hand_back: Arc::new(b.events.clone()),
                queue_admin: b.queue_admin().map(|q| Arc::new(q) as Arc<dyn QueueAdmin>),
                ops_breaker: Arc::new(b.ops_store()),
                ops_intents: Arc::new(b.ops_store()),
                ops_flights: Arc::new(b.ops_store()),
            },
        }
    }
}

struct BackendPorts {
    actions: Arc<dyn Actions>,
    intents: Arc<dyn Intents>,
    credentials: Arc<dyn Credentials>,
    flights: Arc<dyn Flights>,
    holds: Arc<dyn seatgate::ports::CheckoutHolds>,
    waitlist: Arc<dyn seatgate::ports::WaitingLists>,
    readings: Arc<dyn Readings>,
    breaker: Arc<dyn BreakerStates>,
    rate_limits: Arc<dyn RateLimits>,
    leases: Arc<dyn OperatorLeases>,
    queue: Arc<dyn SeatQueue>,
    consumer: Arc<dyn QueueConsumer>,
    queue_wake: Arc<Notify>,
    queue_idle: Duration,
    hand_back: Arc<dyn HandBack>,
    events_queue: Arc<dyn EventQueue>,
    events_consumer: Arc<dyn QueueConsumer>,
    events_hand_back: Arc<dyn HandBack>,
    queue_admin: Option<Arc<dyn QueueAdmin>>,
    /// What the ops page reads (`GET /__ops`, its history sampler, its intent view): the same
    /// store, but on AWS through a store value of its own, so the request counters count what
    /// the services send and not the operator's page (it reads the breaker and the holds every
    /// second).
    ops_breaker: Arc<dyn BreakerStates>,
    ops_intents: Arc<dyn Intents>,
    ops_flights: Arc<dyn Flights>,
}

/// A running stack. Dropping it leaves the tasks running until the runtime ends; call
/// [`Stack::shutdown`] to stop them in order.
pub struct Stack {
    /// `http://<addr>` of the HTTP API; empty when this process does not serve it
    /// ([`Role::Workers`]).
    pub api_url: String,
    /// The upstream the workers call.
    pub upstream_url: String,
    /// The in-process simulator, when this stack started one.
    pub upstream: Option<Simulator>,
    pub backend: Backend,
    /// Issues and checks the tokens the API accepts.
    pub tokens: TokenAuthority,
    pub timing: Timing,
    pub role: Role,
    stop: watch::Sender<bool>,
    tasks: Vec<(&'static str, JoinHandle<()>)>,
    upstream_stop: Option<(watch::Sender<bool>, JoinHandle<()>)>,
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("api_url", &self.api_url)
            .field("upstream_url", &self.upstream_url)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl Stack {
    /// A bearer token for `user`, as `POST /dev/token` would issue it.
    pub fn token(&self, user: &str, admin: bool) -> anyhow::Result<String> {
        let user = UserId::parse(user).context("user id")?;
        self.tokens.issue(&user, admin)
    }

    /// Stops the HTTP server (letting requests in flight finish), then the loops (a worker
    /// batch in flight completes, bounded by the worker timeout), then the simulator last, as
    /// the workers may still be talking to it.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let grace = self.timing.worker_timeout + Duration::from_secs(2);
        for (name, task) in self.tasks {
            let abort = task.abort_handle();
            match tokio::time::timeout(grace, task).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) if e.is_cancelled() => {}
                Ok(Err(e)) => warn!(task = name, error = %e, "task ended abnormally"),
                Err(_) => {
                    warn!(task = name, "task did not stop in time; aborting it");
                    abort.abort();
                }
            }
        }
        if let Some((stop, task)) = self.upstream_stop {
            let _ = stop.send(true);
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(2), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        info!("stack stopped");
    }
}

/// Opens the backend, starts (or connects to) the upstream, and spawns the HTTP API and the
/// event source mappings for the configured role. Returns once every listener is bound.
pub async fn start(config: RunnerConfig) -> anyhow::Result<Stack> {
    check(&config)?;
    let timing = config.timing.clone();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let backend = open_backend(&config, Arc::clone(&clock)).await?;
    let key = auth::load_key(config.jwt_secret.as_ref(), config.db.as_deref())?;
    let tokens = TokenAuthority::new(&key)?;
    let (stop, stop_rx) = watch::channel(false);

    let (upstream_url, upstream, upstream_stop) = match &config.upstream_url {
        Some(url) => (url.trim_end_matches('/').to_owned(), None, None),
        None => {
            let (url, sim, handle) = start_simulator(config.upstream_listen).await?;
            (url, Some(sim), Some(handle))
        }
    };
    let http = reqwest::Client::new();
    if config.demo_users > 0 {
        register_demo_users(&http, &upstream_url, upstream.as_ref(), config.demo_users).await?;
    }

    let ports = backend.ports();
    let upstream_client: Arc<dyn Upstream> =
        Arc::new(HttpUpstream::new(&upstream_url, timing.upstream_timeout)?);
    // The wake-up queue is this process's: only a process that runs the reaper asks for runs
    // (an API-only process's parked intents are the schedule's, as they would be without it).
    let wakes = Arc::new(WakeTimer::new());
    let wake_ups: Option<Arc<dyn WakeUps>> = (config.role.runs_workers() && config.wake_ups)
        .then(|| Arc::clone(&wakes) as Arc<dyn WakeUps>);
    let services = services_of(
        &ports,
        upstream_client,
        Arc::clone(&clock),
        wake_ups,
        &timing,
    );

    let mut launch = Launch {
        config: &config,
        ports: &ports,
        services: &services,
        recent: Arc::new(ui::Recent::default()),
        stop_rx,
        tasks: Vec::new(),
    };
    let api_url = if config.role.serves_api() {
        let ui_upstream = (upstream_url.clone(), upstream.clone(), http.clone());
        launch.serve_api(tokens.clone(), ui_upstream).await?
    } else {
        String::new()
    };
    if config.role.runs_workers() {
        launch.spawn_mappings(&backend, &clock, wakes)?;
    }
    let tasks = launch.tasks;

    info!(api = %api_url, upstream = %upstream_url, backend = ?config.backend, role = ?config.role, workers = config.workers, "stack started");
    Ok(Stack {
        api_url,
        upstream_url,
        upstream,
        backend,
        tokens,
        timing,
        role: config.role,
        stop,
        tasks,
        upstream_stop,
    })
}

/// What [`start`] refuses before it opens anything: a timing profile that breaks its own
/// invariants, a worker role with no workers, dev tokens served where they must not be.
fn check(config: &RunnerConfig) -> anyhow::Result<()> {
    config.timing.validate().context("timing profile")?;
    if config.workers == 0 && config.role.runs_workers() {
        bail!("--workers must be at least 1");
    }
    if config.role.serves_api() {
        exposure::check_dev_tokens(
            config.listen,
            config.backend,
            config.insecure_dev_tokens,
            |v| std::env::var(v).ok(),
        )?;
        if config.insecure_dev_tokens {
            warn!(listen = %config.listen, "serving POST /dev/token with --insecure-dev-tokens: anyone who reaches this address can mint any token, admin included");
        }
    }
    Ok(())
}

/// The services on the backend's ports, as a Lambda's `main` builds them: the OS's randomness,
/// UUIDv7 ids and moka caches, the upstream over HTTP.
fn services_of(
    ports: &BackendPorts,
    upstream: Arc<dyn Upstream>,
    clock: Arc<dyn Clock>,
    wake_ups: Option<Arc<dyn WakeUps>>,
    timing: &Timing,
) -> Services {
    Services::new(
        Ports {
            actions: Arc::clone(&ports.actions),
            intents: Arc::clone(&ports.intents),
            credentials: Arc::clone(&ports.credentials),
            flights: Arc::clone(&ports.flights),
            holds: Arc::clone(&ports.holds),
            waitlist: Arc::clone(&ports.waitlist),
            readings: Arc::clone(&ports.readings),
            breaker: Arc::clone(&ports.breaker),
            rate_limits: Arc::clone(&ports.rate_limits),
            leases: Arc::clone(&ports.leases),
            upstream,
            clock,
            random: Arc::new(seatgate::adapters::entropy::OsRandom),
            ids: Arc::new(seatgate::adapters::entropy::UuidV7),
            cache: seatgate::service::CacheKind::Moka,
            hand_back: Some(Arc::clone(&ports.hand_back)),
            queue_admin: ports.queue_admin.clone(),
            reaper_pass: None,
            wake_ups,
        },
        timing.clone(),
    )
}

/// The tasks [`start`] spawns, gathered as it goes: each part of the stack adds its own, and
/// every one watches the same stop signal.
struct Launch<'a> {
    config: &'a RunnerConfig,
    ports: &'a BackendPorts,
    services: &'a Services,
    /// The last terminal intents, which the deliverer records and the ops page shows.
    recent: Arc<ui::Recent>,
    stop_rx: watch::Receiver<bool>,
    tasks: Vec<(&'static str, JoinHandle<()>)>,
}

impl Launch<'_> {
    /// API Gateway's part: binds the API's listener, serves the handlers behind the JWT check
    /// with the runner's pages beside them, and samples the ops page's history. Returns the
    /// API's `http://<addr>`.
    async fn serve_api(
        &mut self,
        tokens: TokenAuthority,
        (upstream_url, sim, http): (String, Option<Simulator>, reqwest::Client),
    ) -> anyhow::Result<String> {
        let ports = self.ports;
        let listener = TcpListener::bind(self.config.listen)
            .await
            .with_context(|| format!("binding the API to {}", self.config.listen))?;
        let addr = listener.local_addr()?;
        // The ops page's ten minutes: sampled where they are served.
        let history = Arc::new(history::History::new());
        self.tasks.push((
            "history",
            tokio::spawn(history::sample_loop(
                Arc::clone(&history),
                history::Sources {
                    breaker: Arc::clone(&ports.ops_breaker),
                    queues: ports.queue_admin.clone(),
                    flights: Arc::clone(&ports.ops_flights),
                },
                self.stop_rx.clone(),
            )),
        ));
        let app = gateway::router(Arc::new(gateway::Gateway {
            api: self.services.api(),
            auth: tokens,
            ui: ui::Ui {
                upstream_url,
                sim,
                queues: ports.queue_admin.clone(),
                breaker: Arc::clone(&ports.ops_breaker),
                intents: Arc::clone(&ports.ops_intents),
                recent: Arc::clone(&self.recent),
                history,
                demo_users: self.config.demo_users,
                any_host: self.config.insecure_dev_tokens,
                http,
            },
        }));
        let mut rx = self.stop_rx.clone();
        self.tasks.push((
            "http",
            tokio::spawn(async move {
                let stopped = async move {
                    let _ = rx.wait_for(|s| *s).await;
                };
                if let Err(e) = axum::serve(listener, app)
                    .with_graceful_shutdown(stopped)
                    .await
                {
                    tracing::error!(error = %e, "HTTP server failed");
                }
            }),
        ));
        Ok(format!("http://{addr}"))
    }

    /// The event source mappings and the schedule: the deliverer on the event queue, the relay
    /// on the store's change stream, `--workers` workers on the seat queue, and the reaper on
    /// its interval and the wake-ups.
    fn spawn_mappings(
        &mut self,
        backend: &Backend,
        clock: &Arc<dyn Clock>,
        wakes: Arc<WakeTimer>,
    ) -> anyhow::Result<()> {
        let (config, ports, timing) = (self.config, self.ports, &self.config.timing);
        let subscribers: Arc<dyn Subscribers> = match &config.webhook {
            Some(hook) => Arc::new(
                Webhook::new(&hook.url, hook.key.clone(), timing.upstream_timeout)?
                    .with_clock(Arc::clone(clock)),
            ),
            None => Arc::new(NoSubscribers),
        };
        let subscribers: Arc<dyn Subscribers> = Arc::new(ui::Recording {
            inner: subscribers,
            recent: Arc::clone(&self.recent),
        });
        let relay = Arc::new(
            self.services
                .relay(Arc::clone(&ports.queue), Arc::clone(&ports.events_queue)),
        );
        let deliverer = Arc::new(
            self.services
                .deliverer(subscribers, Some(Arc::clone(&ports.events_hand_back))),
        );
        let queue_idle = ports.queue_idle;
        self.tasks.push((
            "delivery",
            tokio::spawn(mappings::delivery_loop(
                Arc::clone(&ports.events_consumer),
                if queue_idle.is_zero() {
                    queue_idle
                } else {
                    mappings::POLL_INTERVAL
                },
                deliverer,
                timing.worker_timeout,
                self.stop_rx.clone(),
            )),
        ));
        let worker = Arc::new(self.services.worker());
        let reaper = Arc::new(self.services.reaper());
        let relay_task = match backend {
            Backend::Embedded(b) => {
                tokio::spawn(mappings::relay_loop(b.clone(), relay, self.stop_rx.clone()))
            }
            Backend::Aws(b) => tokio::spawn(
                streams::StreamPoller::new(
                    b.dynamo.clone(),
                    b.streams.clone(),
                    b.table.clone(),
                    b.stream_arn.clone(),
                    relay,
                )
                .run(self.stop_rx.clone()),
            ),
        };
        self.tasks.push(("relay", relay_task));
        for _ in 0..config.workers {
            self.tasks.push((
                "worker",
                tokio::spawn(mappings::worker_loop(
                    Arc::clone(&ports.consumer),
                    Arc::clone(&ports.queue_wake),
                    queue_idle,
                    Arc::clone(&worker),
                    timing.clone(),
                    config.workers,
                    self.stop_rx.clone(),
                )),
            ));
        }
        self.tasks.push((
            "reaper",
            tokio::spawn(mappings::reaper_loop(
                reaper,
                wakes,
                timing.reaper_interval,
                self.stop_rx.clone(),
            )),
        ));
        Ok(())
    }
}

async fn open_backend(config: &RunnerConfig, clock: Arc<dyn Clock>) -> anyhow::Result<Backend> {
    match config.backend {
        BackendKind::Embedded => Ok(Backend::Embedded(open_embedded(config, clock).await?)),
        BackendKind::Aws => {
            // The token key file still lives next to `db`.
            if let Some(dir) = config
                .db
                .as_deref()
                .and_then(|p| p.parent())
                .filter(|d| !d.as_os_str().is_empty())
            {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating the directory {}", dir.display()))?;
            }
            let aws = AwsBackend::open(&config.aws, &config.timing)
                .await
                .context("opening the AWS backend")?;
            Ok(Backend::Aws(Box::new(aws)))
        }
    }
}

async fn open_embedded(
    config: &RunnerConfig,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<EmbeddedBackend> {
    let embedded = EmbeddedConfig::for_timing(&config.timing);
    let Some(path) = config.db.clone() else {
        return Ok(EmbeddedBackend::open_in_memory(clock, embedded)?);
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the database directory {}", dir.display()))?;
    }
    // Opening may wait on another process's write lock (schema creation): off the runtime.
    let shown = path.display().to_string();
    tokio::task::spawn_blocking(move || EmbeddedBackend::open(&path, clock, embedded))
        .await?
        .with_context(|| format!("opening the database {shown}"))
}

type SimulatorHandle = (watch::Sender<bool>, JoinHandle<()>);

async fn start_simulator(addr: SocketAddr) -> anyhow::Result<(String, Simulator, SimulatorHandle)> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the upstream simulator to {addr}"))?;
    let bound = listener.local_addr()?;
    let sim = Simulator::new();
    let (stop, mut rx) = watch::channel(false);
    let serving = sim.clone();
    let task = tokio::spawn(async move {
        let stopped = async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        if let Err(e) = serving.run(listener, stopped).await {
            tracing::error!(error = %e, "upstream simulator failed");
        }
    });
    Ok((format!("http://{bound}"), sim, (stop, task)))
}

/// `u1..uN` with credentials `cred-uN` on the upstream, and the seat map's demo room, so the
/// page at `/` has someone to be and somewhere to sit from the first load.
async fn register_demo_users(
    http: &reqwest::Client,
    upstream_url: &str,
    sim: Option<&Simulator>,
    n: usize,
) -> anyhow::Result<()> {
    let users: Vec<(String, String)> = (1..=n)
        .map(|i| (format!("u{i}"), format!("cred-u{i}")))
        .collect();
    ui::register_users(http, upstream_url, sim, &users)
        .await
        .context("registering demo users with the upstream")?;
    ui::seed_demo_room(http, upstream_url, sim)
        .await
        .context("seeding the demo room")?;
    info!(
        users = n,
        room = ui::DEMO_ROOM,
        "demo users registered with the upstream (credentials as in --help), demo room seeded"
    );
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            warn!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
