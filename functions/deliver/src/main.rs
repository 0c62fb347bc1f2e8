//! The delivery function: event-queue batches -> `handlers::delivery`, posting terminal-intent
//! events to the webhook; events it did not accept are reported and come back after a backoff.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Error, LambdaEvent, run, service_fn};
use seatgate::handlers::delivery;
use seatgate_aws::lambda::{self, FunctionEnv};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init("deliver");
    let deliverer = FunctionEnv::from_env()?
        .connect()
        .await?
        .deliverer()
        .await?;
    let deliverer = &deliverer;
    run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        lambda::invocation(async move {
            Ok::<SqsBatchResponse, Error>(delivery::handle(deliverer, event.payload).await)
        })
    }))
    .await
}
