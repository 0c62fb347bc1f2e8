//! Wiring for the Lambda functions: configuration read from the environment once per cold start,
//! AWS adapters built once and shared by every invocation.
//!
//! Each `functions/<name>/src/main.rs` calls [`FunctionEnv::from_env`], [`FunctionEnv::connect`]
//! and one service constructor, then hands the matching handler to the runtime. Secrets are
//! never in variables: the webhook signing key is fetched from Secrets Manager by ARN.
//!
//! [`init`] and [`invocation`] are the two calls every `main` makes around its handler: the
//! function's logs and its `service` dimension at the start, and its metrics printed as EMF
//! lines after each invocation (on stdout, which CloudWatch Logs captures like the logs on
//! stderr, and from which the Lambda service extracts the metrics).

use crate::dynamodb::DynamoStore;
use crate::events::SqsEventQueue;
use crate::queue_admin::{QueuePair, SqsQueueAdmin};
use crate::reaper_pass::LambdaReaper;
use crate::sqs::SqsSeatQueue;
use crate::wake_ups::SqsWakeUps;
use anyhow::{Context, Result, bail};
use seatgate::adapters::clock::SystemClock;
use seatgate::adapters::upstream_http::HttpUpstream;
use seatgate::adapters::webhook::{NoSubscribers, Webhook};
use seatgate::config::Timing;
use seatgate::domain::Secret;
use seatgate::ports::Subscribers;
use seatgate::service::{ApiService, Deliverer, Ports, Reaper, Relay, Services, Worker};
use std::sync::Arc;
use std::time::Duration;

/// A function's start: tracing, and metrics kept for EMF under `service` (`api`, `worker`,
/// `relay`, `reaper`, `deliver`).
pub fn init(service: &'static str) {
    seatgate::telemetry::init();
    seatgate::metrics::emit_emf_as(service);
}

/// Runs one invocation, then prints the metrics it recorded, whatever it returned: a failed
/// invocation's counts (its upstream calls, what it settled before failing) are as real.
pub async fn invocation<T>(handler: impl std::future::Future<Output = T>) -> T {
    let out = handler.await;
    seatgate::metrics::flush_emf();
    out
}

/// What a function reads from its environment (see `template.yaml`, `Globals.Function`).
#[derive(Debug, Clone)]
pub struct FunctionEnv {
    pub table: String,
    pub queue_url: Option<String>,
    /// The event queue: the relay sends terminal events to it, the delivery function reads it.
    pub events_queue_url: Option<String>,
    pub upstream_base_url: String,
    pub webhook_url: Option<String>,
    pub webhook_key_secret_arn: Option<String>,
    /// The KMS key that seals users' upstream credentials (the api, worker and reaper need it).
    pub credentials_key_id: Option<String>,
    /// The dead-letter queues of the seat queue and of the event queue: the API's admin routes
    /// report depths and redrive with them.
    pub seat_dead_letter_url: Option<String>,
    pub events_dead_letter_url: Option<String>,
    /// The reaper function, which the API invokes for `POST /admin/reconcile`.
    pub reaper_function: Option<String>,
    /// The wake-up queue: every function whose breaker guards upstream calls (api, worker,
    /// reaper) asks the reaper for runs through it.
    pub wake_queue_url: Option<String>,
    pub timing: Timing,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl FunctionEnv {
    pub fn from_env() -> Result<Self> {
        Ok(FunctionEnv {
            table: var("TABLE_NAME").context("TABLE_NAME is not set")?,
            queue_url: var("QUEUE_URL"),
            events_queue_url: var("EVENTS_QUEUE_URL"),
            upstream_base_url: var("UPSTREAM_BASE_URL").context("UPSTREAM_BASE_URL is not set")?,
            webhook_url: var("WEBHOOK_URL"),
            webhook_key_secret_arn: var("WEBHOOK_SIGNING_KEY_SECRET_ARN"),
            credentials_key_id: var("CREDENTIALS_KEY_ID"),
            seat_dead_letter_url: var("SEAT_DEAD_LETTER_QUEUE_URL"),
            events_dead_letter_url: var("EVENTS_DEAD_LETTER_QUEUE_URL"),
            reaper_function: var("REAPER_FUNCTION_NAME"),
            wake_queue_url: var("WAKE_QUEUE_URL"),
            timing: Timing::from_env(Timing::aws()).context("TIMING_* variables")?,
        })
    }

    /// Builds the shared AWS clients and adapters.
    pub async fn connect(self) -> Result<Wired> {
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let mut store = DynamoStore::new(&aws_sdk_dynamodb::Client::new(&sdk), self.table.clone());
        if let Some(key_id) = &self.credentials_key_id {
            store = store.with_credentials_key(crate::kms::KmsKey::new(
                aws_sdk_kms::Client::new(&sdk),
                key_id.clone(),
            ));
        }
        let store = Arc::new(store);
        let upstream = Arc::new(
            HttpUpstream::new(&self.upstream_base_url, self.timing.upstream_timeout)
                .context("upstream HTTP client")?,
        );
        let mut ports = Ports::from_store(store, upstream, Arc::new(SystemClock));
        // The worker hands back messages it must not process yet through the seat queue.
        if let Some(queue_url) = &self.queue_url {
            ports = ports.with_hand_back(Arc::new(SqsSeatQueue::new(
                aws_sdk_sqs::Client::new(&sdk),
                queue_url.clone(),
            )));
        }
        if let Some(queues) = self.queue_admin(&sdk)? {
            ports = ports.with_queue_admin(Arc::new(queues));
        }
        if let Some(name) = &self.reaper_function {
            ports = ports.with_reaper_pass(Arc::new(LambdaReaper::new(
                aws_sdk_lambda::Client::new(&sdk),
                name.clone(),
            )));
        }
        if let Some(url) = &self.wake_queue_url {
            ports = ports.with_wake_ups(Arc::new(SqsWakeUps::new(
                aws_sdk_sqs::Client::new(&sdk),
                url.clone(),
                Arc::new(SystemClock),
            )));
        }
        let services = Services::new(ports, self.timing.clone());
        Ok(Wired {
            sdk,
            env: self,
            services,
        })
    }
}

impl FunctionEnv {
    /// The queues' admin when the dead-letter queue URLs are set (the API function's); each
    /// needs its source queue's URL too.
    fn queue_admin(&self, sdk: &aws_config::SdkConfig) -> Result<Option<SqsQueueAdmin>> {
        let (seat_dlq, events_dlq) = match (
            &self.seat_dead_letter_url,
            &self.events_dead_letter_url,
        ) {
            (None, None) => return Ok(None),
            (Some(s), Some(e)) => (s.clone(), e.clone()),
            _ => bail!(
                "set both SEAT_DEAD_LETTER_QUEUE_URL and EVENTS_DEAD_LETTER_QUEUE_URL, or neither"
            ),
        };
        let seat = QueuePair {
            queue_url: self
                .queue_url
                .clone()
                .context("SEAT_DEAD_LETTER_QUEUE_URL is set but QUEUE_URL is not")?,
            dead_letter_url: seat_dlq,
        };
        let events = QueuePair {
            queue_url: self
                .events_queue_url
                .clone()
                .context("EVENTS_DEAD_LETTER_QUEUE_URL is set but EVENTS_QUEUE_URL is not")?,
            dead_letter_url: events_dlq,
        };
        Ok(Some(SqsQueueAdmin::new(
            aws_sdk_sqs::Client::new(sdk),
            seat,
            events,
        )))
    }
}

/// The adapters of one function instance.
pub struct Wired {
    sdk: aws_config::SdkConfig,
    env: FunctionEnv,
    services: Services,
}

impl Wired {
    pub fn api(&self) -> ApiService {
        self.services.api()
    }

    pub fn worker(&self) -> Worker {
        self.services.worker()
    }

    pub fn reaper(&self) -> Reaper {
        self.services.reaper()
    }

    /// The relay needs the seat queue and the event queue.
    pub fn relay(&self) -> Result<Relay> {
        let Some(queue_url) = self.env.queue_url.clone() else {
            bail!("QUEUE_URL is not set");
        };
        let queue = Arc::new(SqsSeatQueue::new(
            aws_sdk_sqs::Client::new(&self.sdk),
            queue_url,
        ));
        Ok(self.services.relay(queue, Arc::new(self.events_queue()?)))
    }

    /// The delivery function posts to the webhook (its signing key read from Secrets Manager)
    /// and hands back, on the event queue, what the webhook did not accept.
    pub async fn deliverer(&self) -> Result<Deliverer> {
        let events: Arc<dyn seatgate::ports::HandBack> = Arc::new(self.events_queue()?);
        let subscribers: Arc<dyn Subscribers> = match &self.env.webhook_url {
            None => Arc::new(NoSubscribers),
            Some(url) => {
                let arn = self
                    .env
                    .webhook_key_secret_arn
                    .as_deref()
                    .context("WEBHOOK_URL is set but WEBHOOK_SIGNING_KEY_SECRET_ARN is not")?;
                let key = self.secret(arn).await?;
                Arc::new(Webhook::new(url, key, Duration::from_secs(5))?)
            }
        };
        Ok(self.services.deliverer(subscribers, Some(events)))
    }

    fn events_queue(&self) -> Result<SqsEventQueue> {
        let url = self
            .env
            .events_queue_url
            .clone()
            .context("EVENTS_QUEUE_URL is not set")?;
        Ok(SqsEventQueue::new(aws_sdk_sqs::Client::new(&self.sdk), url))
    }

    async fn secret(&self, arn: &str) -> Result<Secret> {
        let out = aws_sdk_secretsmanager::Client::new(&self.sdk)
            .get_secret_value()
            .secret_id(arn)
            .send()
            .await
            // The SDK error names the secret id, never its value.
            .context("reading the webhook signing key from Secrets Manager")?;
        let value = out
            .secret_string()
            .context("the webhook signing key secret has no string value")?;
        Ok(Secret::new(value))
    }
}
