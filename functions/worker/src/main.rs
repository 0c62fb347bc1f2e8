//! The worker function: SQS FIFO batches -> `handlers::queue`, partial failures reported.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Error, LambdaEvent, run, service_fn};
use seatgate::handlers::queue;
use seatgate_aws::lambda::{self, FunctionEnv};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init("worker");
    let worker = FunctionEnv::from_env()?.connect().await?.worker();
    let worker = &worker;
    run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        lambda::invocation(async move {
            Ok::<SqsBatchResponse, Error>(queue::handle(worker, event.payload).await)
        })
    }))
    .await
}
