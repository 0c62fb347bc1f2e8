//! The worker function: SQS FIFO batches -> `handlers::queue`, partial failures reported.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Error, LambdaEvent, run, service_fn};
use seatgate::{handlers::queue, telemetry};
use seatgate_aws::lambda::FunctionEnv;

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init();
    let worker = FunctionEnv::from_env()?.connect().await?.worker();
    let worker = &worker;
    run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        Ok::<SqsBatchResponse, Error>(queue::handle(worker, event.payload).await)
    }))
    .await
}
