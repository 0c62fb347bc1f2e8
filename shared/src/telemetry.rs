//! Tracing set-up shared by every binary: JSON lines in Lambda (CloudWatch parses them), a
//! compact human format locally. Level from `RUST_LOG`, default `info`.

pub fn init(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = if json {
        builder
            .json()
            .with_current_span(false)
            .without_time()
            .with_target(false)
            .try_init()
    } else {
        builder.compact().with_target(false).try_init()
    };
}

/// Whether we run inside the Lambda service.
pub fn in_lambda() -> bool {
    std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some()
}
