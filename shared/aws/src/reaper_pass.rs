//! An on-demand reaper pass on AWS: the API function invokes the reaper function and answers
//! with its report.
//!
//! Invoking rather than running the pass in the API function keeps the roles apart: the reaper
//! reads the due index and opens sealed credentials to read charges upstream, and the API role
//! is granted neither, only `lambda:InvokeFunction` on the reaper. The pass is the scheduled
//! one (`handlers::schedule`, whatever the payload), so an early pass can do nothing the next
//! tick would not.

use async_trait::async_trait;
use aws_sdk_lambda::Client;
use aws_sdk_lambda::error::ProvideErrorMetadata;
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;
use seatgate::ports::{ReaperPass, ReaperPassError};
use seatgate::service::ReaperReport;

/// What the API sends the reaper: the schedule ignores the payload; this says who asked, for
/// the reaper's logs.
pub const PAYLOAD: &str = r#"{"source":"seatgate.admin","detail-type":"reconcile"}"#;

#[derive(Debug, Clone)]
pub struct LambdaReaper {
    client: Client,
    function_name: String,
}

impl LambdaReaper {
    pub fn new(client: Client, function_name: impl Into<String>) -> Self {
        LambdaReaper {
            client,
            function_name: function_name.into(),
        }
    }
}

#[async_trait]
impl ReaperPass for LambdaReaper {
    async fn run_pass(&self) -> Result<ReaperReport, ReaperPassError> {
        let out = self
            .client
            .invoke()
            .function_name(&self.function_name)
            .invocation_type(InvocationType::RequestResponse)
            .payload(Blob::new(PAYLOAD))
            .send()
            .await
            .map_err(|e| {
                let code = e.code().unwrap_or("no answer").to_owned();
                ReaperPassError::Unavailable(format!("Invoke: {code}"))
            })?;
        // A function error is still a 200 from Invoke; its payload is the error, which may
        // name internals, so only its kind is kept.
        if let Some(kind) = out.function_error() {
            return Err(ReaperPassError::Unavailable(format!(
                "the reaper function failed ({kind})"
            )));
        }
        let payload = out.payload().map(|b| b.as_ref()).unwrap_or_default();
        serde_json::from_slice(payload).map_err(|e| {
            ReaperPassError::Unavailable(format!("the reaper's answer is not a report: {e}"))
        })
    }
}
