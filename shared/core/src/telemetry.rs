//! The one tracing set-up every seatgate binary and test uses: JSON lines inside the Lambda
//! service (CloudWatch parses them; fields such as `intent_id` and `seat_id` become queryable),
//! a compact human format anywhere else. Level from `RUST_LOG`, default `info`.
//!
//! Always written to stderr: the local runner prints the lines scripts read (`api: ...`) on
//! stdout, and the Lambda service captures both streams alike.

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Human,
    /// Human, through the test harness's capture: shown only for failing tests.
    Test,
}

impl LogFormat {
    /// JSON inside the Lambda service, human otherwise.
    pub fn detect() -> Self {
        if in_lambda() {
            LogFormat::Json
        } else {
            LogFormat::Human
        }
    }
}

/// Installs the global subscriber in the detected format. A second call is a no-op, so tests
/// may call it from every case.
pub fn init() {
    init_with(LogFormat::detect());
}

pub fn init_with(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    let _ = match format {
        LogFormat::Json => builder
            .with_writer(std::io::stderr)
            .json()
            .with_current_span(false)
            .without_time()
            .try_init(),
        LogFormat::Human => builder.with_writer(std::io::stderr).compact().try_init(),
        LogFormat::Test => builder.with_test_writer().compact().try_init(),
    };
}

/// Whether we run inside the Lambda service.
pub fn in_lambda() -> bool {
    std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some()
}
