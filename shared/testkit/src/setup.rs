//! The one set-up every test file uses: the upstream simulator on a loopback port, and clients
//! for the emulators (DynamoDB Local, moto's SQS) from the standard AWS environment.
//!
//! A missing emulator is a failure, never a skip: each client probes its endpoint once per test
//! binary and panics with [`HOW`] when the variable is unset or the endpoint does not answer.
//! Clients are built afresh per call because each `#[tokio::test]` has its own runtime, and an
//! SDK client's connection pool must not outlive the runtime it was used on.

use seatgate::adapters::upstream_http::HttpUpstream;
use seatgate::config::Timing;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::OnceCell;
use upstream_sim::Simulator;

/// What to do when an emulator is missing.
pub const HOW: &str = "start the emulators from the repository root with \
                       `eval \"$(scripts/emulators.sh start)\"`, then run the tests again";

/// How long a probe waits for an emulator's first answer.
const PROBE_PATIENCE: Duration = Duration::from_secs(10);

/// The simulator's routes, as its stats name them.
pub const POSTS: &str = "POST /api/reservations";
pub const CHARGE_READS: &str = "GET /api/charge";

/// A simulator serving on `127.0.0.1:<free port>`, and an upstream adapter aimed at it.
pub struct Upstream {
    pub sim: Simulator,
    pub url: String,
    pub http: Arc<HttpUpstream>,
}

/// Starts a fresh simulator; the adapter uses `timing`'s upstream timeout.
pub async fn upstream(timing: &Timing) -> Upstream {
    let (sim, url) = simulator().await;
    let http = Arc::new(
        HttpUpstream::new(&url, timing.upstream_timeout).expect("an upstream HTTP client"),
    );
    Upstream { sim, url, http }
}

/// A fresh simulator and its base URL, without an adapter: for tests that hand the URL to a
/// runner (in this process or a child) instead of calling the upstream themselves.
pub async fn simulator() -> (Simulator, String) {
    let sim = Simulator::new();
    let addr = sim
        .clone()
        .spawn("127.0.0.1:0".parse().expect("a socket address"))
        .await
        .expect("the upstream simulator binds a loopback port");
    (sim, format!("http://{addr}"))
}

/// `prefix` followed by 12 random hex digits: names of tables, queues, seats and users that no
/// other case (or earlier run on the same emulator) uses.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

fn endpoint(var: &str, what: &str) -> String {
    std::env::var(var)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| panic!("{var} is not set: this test needs {what}; {HOW}"))
}

/// The SDK config from the standard environment (region, dummy credentials, the
/// `AWS_ENDPOINT_URL_*` endpoints that `scripts/emulators.sh start` exports).
pub async fn sdk_config() -> aws_config::SdkConfig {
    aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await
}

/// Panics with [`HOW`] unless `call` (a cheap read) answers within [`PROBE_PATIENCE`].
async fn probe<T, E: std::error::Error + 'static>(
    service: &str,
    endpoint: &str,
    operation: &str,
    call: impl Future<Output = Result<T, E>>,
) {
    match tokio::time::timeout(PROBE_PATIENCE, call).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => panic!(
            "{service} at {endpoint} did not answer {operation} ({}); {HOW}",
            aws_sdk_dynamodb::error::DisplayErrorContext(e)
        ),
        Err(_) => panic!("{service} at {endpoint} did not answer within {PROBE_PATIENCE:?}; {HOW}"),
    }
}

/// A DynamoDB client, after checking once that DynamoDB Local answers.
pub async fn dynamodb() -> aws_sdk_dynamodb::Client {
    dynamodb_from(&sdk_config().await).await
}

/// [`dynamodb`] on a given config (tests that add interceptors or share one config).
pub async fn dynamodb_from(config: &aws_config::SdkConfig) -> aws_sdk_dynamodb::Client {
    let endpoint = endpoint("AWS_ENDPOINT_URL_DYNAMODB", "DynamoDB Local");
    let client = aws_sdk_dynamodb::Client::new(config);
    static PROBED: OnceCell<()> = OnceCell::const_new();
    let call = client.list_tables().limit(1).send();
    PROBED
        .get_or_init(|| probe("DynamoDB", &endpoint, "ListTables", call))
        .await;
    client
}

/// An SQS client, after checking once that the SQS emulator answers.
pub async fn sqs() -> aws_sdk_sqs::Client {
    sqs_from(&sdk_config().await).await
}

/// [`sqs`] on a given config.
pub async fn sqs_from(config: &aws_config::SdkConfig) -> aws_sdk_sqs::Client {
    let endpoint = endpoint("AWS_ENDPOINT_URL_SQS", "an SQS emulator (moto)");
    let client = aws_sdk_sqs::Client::new(config);
    static PROBED: OnceCell<()> = OnceCell::const_new();
    let call = client.list_queues().max_results(1).send();
    PROBED
        .get_or_init(|| probe("SQS", &endpoint, "ListQueues", call))
        .await;
    client
}

/// A KMS client (moto serves KMS beside SQS), after checking once that it answers.
pub async fn kms() -> aws_sdk_kms::Client {
    let endpoint = endpoint("AWS_ENDPOINT_URL_KMS", "a KMS emulator (moto)");
    let client = aws_sdk_kms::Client::new(&sdk_config().await);
    static PROBED: OnceCell<()> = OnceCell::const_new();
    let call = client.list_keys().limit(1).send();
    PROBED
        .get_or_init(|| probe("KMS", &endpoint, "ListKeys", call))
        .await;
    client
}

/// A fresh symmetric KMS key on the emulator, to seal credentials with: what the stack's
/// `CredentialsKey` is on AWS.
pub async fn credentials_key() -> seatgate_aws::kms::KmsKey {
    let client = kms().await;
    let key = client
        .create_key()
        .description(unique("seatgate-test-credentials"))
        .send()
        .await
        .expect("moto creates a KMS key");
    let id = key
        .key_metadata()
        .map(|m| m.key_id().to_owned())
        .expect("a key id");
    seatgate_aws::kms::KmsKey::new(client, id)
}

/// Checks that the DynamoDB Streams endpoint is configured too (the runner polls the stream).
pub fn require_streams_endpoint() {
    endpoint(
        "AWS_ENDPOINT_URL_DYNAMODB_STREAMS",
        "DynamoDB Local's stream endpoint",
    );
}

fn epoch_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_secs()
}

/// A new table from the production definition, named `<prefix><epoch seconds>-<random>`, after
/// dropping tables of that prefix that earlier runs left more than an hour ago (DynamoDB Local
/// keeps them as long as it runs).
pub async fn fresh_table(client: &aws_sdk_dynamodb::Client, prefix: &str) -> String {
    drop_stale_tables(client, prefix).await;
    let name = format!("{prefix}{}-{}", epoch_secs(), unique(""));
    seatgate_aws::dynamodb::create_table(client, &name)
        .await
        .expect("create_table");
    name
}

async fn drop_stale_tables(client: &aws_sdk_dynamodb::Client, prefix: &str) {
    let Ok(out) = client.list_tables().send().await else {
        return;
    };
    for name in out.table_names() {
        let created = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.split('-').next())
            .and_then(|secs| secs.parse::<u64>().ok());
        if created.is_some_and(|t| t + 3600 < epoch_secs()) {
            let _ = seatgate_aws::dynamodb::delete_table(client, name).await;
        }
    }
}
