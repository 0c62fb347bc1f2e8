//! `--backend aws`: the ports on DynamoDB (+ Streams) and SQS FIFO through the AWS SDK, against
//! AWS itself or AWS-compatible endpoints (DynamoDB Local, moto).
//!
//! Configured the way every AWS SDK is: `aws_config::load_defaults` reads the region, the
//! credentials and the endpoints from the standard places (`AWS_REGION`, `AWS_PROFILE`,
//! `AWS_ACCESS_KEY_ID`..., and `AWS_ENDPOINT_URL` or the per-service
//! `AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL_DYNAMODB_STREAMS`, `AWS_ENDPOINT_URL_SQS`;
//! the SDK derives each variable from the service id, "DynamoDB Streams" giving
//! `..._DYNAMODB_STREAMS`). The runner adds no endpoint option of its own.
//!
//! With `create` (the default, for local use) the table and the queues are created from the
//! Rust definitions that `template.yaml` is checked against (`seatgate_aws::dynamodb::TABLE` via
//! `create_table`, `seatgate_aws::sqs::QueueDefinition` via `create_queues`), so what the runner
//! runs on and what SAM deploys come from one source. An existing table is used as it is after
//! checking it has seatgate's keys, `due` index and a `NEW_AND_OLD_IMAGES` stream; existing
//! queues are accepted by SQS only if their attributes are the same (a queue created under
//! another `--timing` profile has another visibility timeout and is refused).
//!
//! Every call made while opening is bounded, and a failure names the variable that points at
//! the service, so a wrong or missing endpoint fails at start rather than in the loops.

use anyhow::{Context as _, anyhow, bail, ensure};
use aws_sdk_dynamodb::Client as DynamoClient;
use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::types::{KeyType, TableDescription, TableStatus};
use aws_sdk_dynamodbstreams::Client as StreamsClient;
use aws_sdk_sqs::Client as SqsClient;
use aws_sdk_sqs::types::QueueAttributeName;
use seatgate::config::Timing;
use seatgate_aws::dynamodb::{DynamoStore, RequestCounts, TABLE, create_table};
use seatgate_aws::events::{EventQueueDefinition, SqsEventQueue, create_event_queues};
use seatgate_aws::queue_admin::{QueuePair, SqsQueueAdmin};
use seatgate_aws::sqs::{QueueDefinition, SqsSeatQueue, create_queues};
use std::future::Future;
use std::time::Duration;
use tracing::{info, warn};

/// Default table name (`--table`, `SEATGATE_TABLE`).
pub const DEFAULT_TABLE: &str = "seatgate";
/// Default queue base name (`--queue`, `SEATGATE_QUEUE`): the queue is `<name>.fifo`, its
/// dead-letter queue `<name>-dlq.fifo`.
pub const DEFAULT_QUEUE: &str = "seatgate-seats";

/// How long each call made while opening may take, SDK retries included.
const OPEN_CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// Where the AWS backend's resources are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsOptions {
    pub table: String,
    /// The queue's base name (a trailing `.fifo` is accepted and ignored), or its full URL.
    pub queue: String,
    /// Create the table and the queues when they do not exist.
    pub create: bool,
}

impl Default for AwsOptions {
    fn default() -> Self {
        AwsOptions {
            table: DEFAULT_TABLE.to_owned(),
            queue: DEFAULT_QUEUE.to_owned(),
            create: true,
        }
    }
}

impl AwsOptions {
    /// Unique table and queue names with a prefix: tests and benchmarks use one set per run.
    pub fn unique(prefix: &str) -> Self {
        let tag = &uuid::Uuid::new_v4().simple().to_string()[..12];
        AwsOptions {
            table: format!("{prefix}-{tag}"),
            queue: format!("{prefix}-{tag}"),
            create: true,
        }
    }

    fn queue_base(&self) -> &str {
        self.queue.strip_suffix(".fifo").unwrap_or(&self.queue)
    }

    fn queue_is_url(&self) -> bool {
        self.queue.starts_with("http://") || self.queue.starts_with("https://")
    }
}

/// The AWS backend of a running stack.
#[derive(Debug, Clone)]
pub struct AwsBackend {
    /// Actions, intents and credentials; its request counters count every DynamoDB request the
    /// stack's services send (the stream poller's reads go to DynamoDB Streams, and the ops
    /// page's through [`AwsBackend::ops_store`]: neither is counted).
    pub store: DynamoStore,
    /// The seat queue: the relay sends to it, the workers receive from it.
    pub queue: SqsSeatQueue,
    /// A DynamoDB client without the counters, for table administration.
    pub dynamo: DynamoClient,
    pub streams: StreamsClient,
    pub sqs: SqsClient,
    pub table: String,
    /// The table's stream when it was opened (`LatestStreamArn`).
    pub stream_arn: String,
    pub queue_url: String,
    /// Known when the queues were created (or found) by name.
    pub dead_letter_url: Option<String>,
    /// The event queue (terminal events for subscribers): `<queue base>-events`.
    pub events: SqsEventQueue,
    /// The event queue and its dead-letter queue, when created here (deleted with the rest).
    pub event_queue_urls: Vec<String>,
    /// The event queue's dead-letter queue, when created or found by name.
    pub event_dead_letter_url: Option<String>,
}

impl AwsBackend {
    /// Loads the SDK configuration from the environment, makes sure the table and queues exist
    /// (creating them when `options.create`), and checks each endpoint answers.
    pub async fn open(options: &AwsOptions, timing: &Timing) -> anyhow::Result<AwsBackend> {
        let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        if config.region().is_none() {
            bail!(
                "--backend aws needs a region: set AWS_REGION (with the emulators: \
                 eval \"$(scripts/emulators.sh start)\" sets it and the endpoints)"
            );
        }
        let dynamo = DynamoClient::new(&config);
        let streams = StreamsClient::new(&config);
        let sqs = SqsClient::new(&config);

        let table = ensure_table(&dynamo, &options.table, options.create).await?;
        let stream_arn = table
            .latest_stream_arn
            .clone()
            .ok_or_else(|| anyhow!("table {} has no stream", options.table))?;
        bounded(
            "DynamoDB Streams",
            "AWS_ENDPOINT_URL_DYNAMODB_STREAMS",
            streams.describe_stream().stream_arn(&stream_arn).send(),
        )
        .await?
        .map_err(|e| {
            let error = failure(
                "DynamoDB Streams",
                "AWS_ENDPOINT_URL_DYNAMODB_STREAMS",
                "DescribeStream",
                aws_sdk_dynamodbstreams::error::DisplayErrorContext(e),
            );
            let only_dynamodb = std::env::var_os("AWS_ENDPOINT_URL_DYNAMODB").is_some()
                && std::env::var_os("AWS_ENDPOINT_URL_DYNAMODB_STREAMS").is_none()
                && std::env::var_os("AWS_ENDPOINT_URL").is_none();
            if only_dynamodb {
                error.context(
                    "AWS_ENDPOINT_URL_DYNAMODB is set but AWS_ENDPOINT_URL_DYNAMODB_STREAMS is \
                     not: streams are a separate SDK service; DynamoDB Local serves both on one \
                     port, so set both to the same URL",
                )
            } else {
                error
            }
        })?;

        let definition = QueueDefinition::for_timing(timing);
        let (queue_url, dead_letter_url) = ensure_queues(&sqs, options, &definition).await?;
        check_queue(&sqs, &queue_url, &definition).await?;
        let (events_url, event_dead_letter_url, event_queue_urls) =
            ensure_event_queues(&sqs, options).await?;
        let kms = aws_sdk_kms::Client::new(&config);
        let credentials_key = ensure_credentials_key(&kms, options).await?;

        info!(
            table = %options.table,
            stream = %stream_arn,
            queue = %queue_url,
            dynamodb = %endpoint("AWS_ENDPOINT_URL_DYNAMODB"),
            streams = %endpoint("AWS_ENDPOINT_URL_DYNAMODB_STREAMS"),
            sqs = %endpoint("AWS_ENDPOINT_URL_SQS"),
            "aws backend ready"
        );
        Ok(AwsBackend {
            store: DynamoStore::new(&dynamo, &options.table).with_credentials_key(credentials_key),
            queue: SqsSeatQueue::new(sqs.clone(), &queue_url),
            events: SqsEventQueue::new(sqs.clone(), &events_url),
            dynamo,
            streams,
            sqs,
            table: options.table.clone(),
            stream_arn,
            queue_url,
            dead_letter_url,
            event_queue_urls,
            event_dead_letter_url,
        })
    }

    /// Both queues' depths and redrive, when both dead-letter queues are known (a queue given
    /// by URL leaves its dead-letter queue unknown).
    pub fn queue_admin(&self) -> Option<SqsQueueAdmin> {
        let seat = QueuePair {
            queue_url: self.queue_url.clone(),
            dead_letter_url: self.dead_letter_url.clone()?,
        };
        let events = QueuePair {
            queue_url: self.events.queue_url().to_owned(),
            dead_letter_url: self.event_dead_letter_url.clone()?,
        };
        Some(SqsQueueAdmin::new(self.sqs.clone(), seat, events))
    }

    /// DynamoDB requests the stack's services sent so far, per operation (the ops page's reads
    /// go through [`AwsBackend::ops_store`] and are not among them).
    pub fn requests(&self) -> RequestCounts {
        self.store.requests()
    }

    /// A store on the same table for the ops page, with counters of its own.
    pub fn ops_store(&self) -> DynamoStore {
        DynamoStore::new(&self.dynamo, &self.table)
    }

    /// Deletes the table and the queues (tests and benchmarks clean up their unique ones).
    /// Stop the stack first.
    pub async fn delete_resources(&self) -> anyhow::Result<()> {
        seatgate_aws::dynamodb::delete_table(&self.dynamo, &self.table)
            .await
            .with_context(|| format!("deleting table {}", self.table))?;
        for url in std::iter::once(&self.queue_url)
            .chain(&self.dead_letter_url)
            .chain(&self.event_queue_urls)
        {
            seatgate_aws::sqs::delete_queue(&self.sqs, url)
                .await
                .with_context(|| format!("deleting queue {url}"))?;
        }
        Ok(())
    }
}

/// The endpoint a service variable points at, for messages.
fn endpoint(variable: &str) -> String {
    std::env::var(variable)
        .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
        .unwrap_or_else(|_| "the AWS default endpoint".to_owned())
}

fn failure(
    service: &str,
    variable: &str,
    operation: &str,
    error: impl std::fmt::Display,
) -> anyhow::Error {
    anyhow!(
        "{service} at {} ({variable}) failed {operation}: {error}",
        endpoint(variable)
    )
}

/// Runs one opening call with [`OPEN_CALL_TIMEOUT`].
async fn bounded<T>(
    service: &str,
    variable: &str,
    call: impl Future<Output = T>,
) -> anyhow::Result<T> {
    tokio::time::timeout(OPEN_CALL_TIMEOUT, call)
        .await
        .map_err(|_| {
            anyhow!(
                "{service} at {} ({variable}) did not answer within {OPEN_CALL_TIMEOUT:?}",
                endpoint(variable)
            )
        })
}

const DDB: (&str, &str) = ("DynamoDB", "AWS_ENDPOINT_URL_DYNAMODB");
const SQS: (&str, &str) = ("SQS", "AWS_ENDPOINT_URL_SQS");

/// The table, created from [`TABLE`] if missing (and allowed), checked if present.
async fn ensure_table(
    dynamo: &DynamoClient,
    name: &str,
    create: bool,
) -> anyhow::Result<TableDescription> {
    let described = bounded(
        DDB.0,
        DDB.1,
        dynamo.describe_table().table_name(name).send(),
    )
    .await?;
    let table = match described {
        Ok(out) => out.table.context("DescribeTable returned no table")?,
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_resource_not_found_exception()) =>
        {
            ensure!(
                create,
                "table {name} does not exist; create it (template.yaml) or run with --create true"
            );
            info!(
                table = name,
                "creating the table from the schema definition"
            );
            let created = bounded(DDB.0, DDB.1, create_table(dynamo, name)).await?;
            if let Err(e) = created {
                // Another process may have created it meanwhile; the describe below decides.
                warn!(table = name, error = %e, "CreateTable failed; checking whether the table exists now");
            }
            describe_active(dynamo, name).await?
        }
        Err(e) => {
            return Err(failure(
                DDB.0,
                DDB.1,
                "DescribeTable",
                aws_sdk_dynamodb::error::DisplayErrorContext(e),
            ));
        }
    };
    let table = if table.table_status() == Some(&TableStatus::Active) {
        table
    } else {
        describe_active(dynamo, name).await?
    };
    check_table(name, &table)?;
    Ok(table)
}

/// Waits until the table is ACTIVE and returns its description.
async fn describe_active(dynamo: &DynamoClient, name: &str) -> anyhow::Result<TableDescription> {
    let waited = dynamo
        .wait_until_table_exists()
        .table_name(name)
        .wait(Duration::from_secs(120))
        .await
        .map_err(|e| anyhow!("waiting for table {name} to become active: {e}"))?;
    waited
        .into_result()
        .map_err(|e| anyhow!("waiting for table {name}: {e:?}"))?
        .table
        .context("DescribeTable returned no table")
}

/// The table must be shaped as [`TABLE`] says where the code depends on it.
fn check_table(name: &str, table: &TableDescription) -> anyhow::Result<()> {
    let key = |kind: KeyType| {
        table
            .key_schema()
            .iter()
            .find(|k| k.key_type() == &kind)
            .map(|k| k.attribute_name().to_owned())
    };
    let mut problems = Vec::new();
    if key(KeyType::Hash).as_deref() != Some(TABLE.partition_key.name)
        || key(KeyType::Range).as_deref() != Some(TABLE.sort_key.name)
    {
        problems.push(format!(
            "keys are not {} / {}",
            TABLE.partition_key.name, TABLE.sort_key.name
        ));
    }
    for index in [TABLE.due_index, TABLE.flight_holds_index] {
        if !table
            .global_secondary_indexes()
            .iter()
            .any(|i| i.index_name() == Some(index))
        {
            // A table made before the index: UpdateTable adds it (as the template's update does
            // on AWS), or a new table name starts afresh.
            problems.push(format!("no `{index}` index"));
        }
    }
    let stream = table.stream_specification();
    let view = stream
        .and_then(|s| s.stream_view_type())
        .map(|v| v.as_str());
    if !stream.is_some_and(|s| s.stream_enabled()) || view != Some(TABLE.stream_view_type) {
        problems.push(format!("no {} stream", TABLE.stream_view_type));
    }
    if table.latest_stream_arn().is_none() {
        problems.push("no stream ARN".to_owned());
    }
    ensure!(
        problems.is_empty(),
        "table {name} exists but is not a seatgate table: {}",
        problems.join(", ")
    );
    Ok(())
}

/// The alias of the KMS key that seals a table's credentials when the runner creates it.
pub fn credentials_key_alias(table: &str) -> String {
    format!("alias/{table}-credentials")
}

/// The KMS key that seals credentials (the stack's `CredentialsKey` on AWS): the one named by
/// `SEATGATE_CREDENTIALS_KEY_ID`, else the table's alias, created with `--create true` (so a
/// restarted runner on the same table opens the credentials it sealed before).
async fn ensure_credentials_key(
    kms: &aws_sdk_kms::Client,
    options: &AwsOptions,
) -> anyhow::Result<seatgate_aws::kms::KmsKey> {
    if let Some(id) = std::env::var("SEATGATE_CREDENTIALS_KEY_ID")
        .ok()
        .filter(|v| !v.trim().is_empty())
    {
        return Ok(seatgate_aws::kms::KmsKey::new(kms.clone(), id));
    }
    let alias = credentials_key_alias(&options.table);
    let described = bounded(
        "KMS",
        "AWS_ENDPOINT_URL_KMS",
        kms.describe_key().key_id(&alias).send(),
    )
    .await?;
    match described {
        Ok(_) => return Ok(seatgate_aws::kms::KmsKey::new(kms.clone(), alias)),
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_not_found_exception()) => {}
        Err(e) => {
            return Err(failure(
                "KMS",
                "AWS_ENDPOINT_URL_KMS",
                "DescribeKey",
                aws_sdk_kms::error::DisplayErrorContext(e),
            ));
        }
    }
    ensure!(
        options.create,
        "no KMS key {alias} to seal credentials: set SEATGATE_CREDENTIALS_KEY_ID to the stack's \
         CredentialsKey, or run with --create true"
    );
    let key = kms
        .create_key()
        .description(format!(
            "seatgate-local: credentials of table {}",
            options.table
        ))
        .send()
        .await
        .map_err(|e| {
            failure(
                "KMS",
                "AWS_ENDPOINT_URL_KMS",
                "CreateKey",
                aws_sdk_kms::error::DisplayErrorContext(e),
            )
        })?;
    let id = key
        .key_metadata()
        .map(|m| m.key_id().to_owned())
        .ok_or_else(|| anyhow!("CreateKey answered without a key id"))?;
    kms.create_alias()
        .alias_name(&alias)
        .target_key_id(&id)
        .send()
        .await
        .map_err(|e| {
            failure(
                "KMS",
                "AWS_ENDPOINT_URL_KMS",
                "CreateAlias",
                aws_sdk_kms::error::DisplayErrorContext(e),
            )
        })?;
    info!(alias = %alias, "created the KMS key that seals credentials");
    Ok(seatgate_aws::kms::KmsKey::new(kms.clone(), alias))
}

/// The event queue, `<queue base>-events` (and `-events-dlq`): created with `--create true`,
/// else looked up by name. Returns its URL, its dead-letter queue's if known, and the URLs
/// created here.
async fn ensure_event_queues(
    sqs: &SqsClient,
    options: &AwsOptions,
) -> anyhow::Result<(String, Option<String>, Vec<String>)> {
    let base = if options.queue_is_url() {
        options
            .queue
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .trim_end_matches(".fifo")
            .to_owned()
    } else {
        options.queue_base().to_owned()
    };
    let name = format!("{base}-events");
    if options.create {
        let created = bounded(
            SQS.0,
            SQS.1,
            create_event_queues(sqs, &name, &EventQueueDefinition::default()),
        )
        .await?;
        let (queue, dlq) = created.map_err(|e| anyhow!("creating event queues {name}: {e}"))?;
        return Ok((queue.clone(), Some(dlq.clone()), vec![queue, dlq]));
    }
    let dlq = match bounded(
        SQS.0,
        SQS.1,
        sqs.get_queue_url().queue_name(format!("{name}-dlq")).send(),
    )
    .await
    {
        Ok(Ok(out)) => out.queue_url,
        _ => None,
    };
    let out = bounded(SQS.0, SQS.1, sqs.get_queue_url().queue_name(&name).send()).await?;
    let url = out
        .map_err(|e| {
            failure(
                SQS.0,
                SQS.1,
                "GetQueueUrl",
                aws_sdk_sqs::error::DisplayErrorContext(e),
            )
        })?
        .queue_url
        .context("GetQueueUrl returned no URL")?;
    Ok((url, dlq, Vec::new()))
}

async fn ensure_queues(
    sqs: &SqsClient,
    options: &AwsOptions,
    definition: &QueueDefinition,
) -> anyhow::Result<(String, Option<String>)> {
    if options.queue_is_url() {
        return Ok((options.queue.clone(), None));
    }
    let base = options.queue_base();
    if options.create {
        let created = bounded(SQS.0, SQS.1, create_queues(sqs, base, definition)).await?;
        let (queue, dlq) = created.map_err(|e| {
            anyhow!(
                "creating queues {base}.fifo and {base}-dlq.fifo at {} (AWS_ENDPOINT_URL_SQS): {e}. \
                 A queue that exists with other attributes (e.g. made under another --timing \
                 profile, whose visibility timeout differs) is refused: delete it or pick another --queue",
                endpoint("AWS_ENDPOINT_URL_SQS")
            )
        })?;
        return Ok((queue, Some(dlq)));
    }
    let url = |name: String| async move {
        let out = bounded(SQS.0, SQS.1, sqs.get_queue_url().queue_name(&name).send()).await?;
        match out {
            Ok(o) => o.queue_url.context("GetQueueUrl returned no URL"),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_queue_does_not_exist()) =>
            {
                bail!(
                    "queue {name} does not exist; create it (template.yaml) or run with --create true"
                )
            }
            Err(e) => Err(failure(
                SQS.0,
                SQS.1,
                "GetQueueUrl",
                aws_sdk_sqs::error::DisplayErrorContext(e),
            )),
        }
    };
    let queue = url(format!("{base}.fifo")).await?;
    let dlq = url(format!("{base}-dlq.fifo")).await.ok();
    Ok((queue, dlq))
}

/// The queue must be FIFO; a visibility timeout shorter than the timing profile's breaks the
/// lease invariant's margin, so it is reported.
async fn check_queue(
    sqs: &SqsClient,
    url: &str,
    definition: &QueueDefinition,
) -> anyhow::Result<()> {
    let out = bounded(
        SQS.0,
        SQS.1,
        sqs.get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::FifoQueue)
            .attribute_names(QueueAttributeName::VisibilityTimeout)
            .send(),
    )
    .await?
    .map_err(|e| {
        failure(
            SQS.0,
            SQS.1,
            "GetQueueAttributes",
            aws_sdk_sqs::error::DisplayErrorContext(e),
        )
    })?;
    let attributes = out.attributes.unwrap_or_default();
    ensure!(
        attributes
            .get(&QueueAttributeName::FifoQueue)
            .is_some_and(|v| v == "true"),
        "queue {url} is not a FIFO queue"
    );
    let visibility = attributes
        .get(&QueueAttributeName::VisibilityTimeout)
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_secs);
    if visibility.is_some_and(|v| v < definition.visibility_timeout) {
        warn!(queue = url, visibility = ?visibility, expected = ?definition.visibility_timeout,
            "the queue's visibility timeout is shorter than this timing profile's");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_and_urls() {
        let o = AwsOptions {
            queue: "q.fifo".into(),
            ..AwsOptions::default()
        };
        assert_eq!(o.queue_base(), "q");
        assert!(!o.queue_is_url());
        let o = AwsOptions {
            queue: "https://sqs.eu-west-1.amazonaws.com/1/q.fifo".into(),
            ..AwsOptions::default()
        };
        assert!(o.queue_is_url());
        let d = AwsOptions::default();
        assert_eq!(
            (d.table.as_str(), d.queue.as_str(), d.create),
            ("seatgate", "seatgate-seats", true)
        );
        let (a, b) = (AwsOptions::unique("t"), AwsOptions::unique("t"));
        assert_ne!(a.table, b.table);
        assert!(a.table.starts_with("t-"));
    }
}
