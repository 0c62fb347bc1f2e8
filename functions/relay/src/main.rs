//! The relay function: the table's stream (the outbox) -> `handlers::stream`, reporting the
//! first failed record so the event source mapping retries from there.

use aws_lambda_events::event::dynamodb::Event;
use lambda_runtime::{Error, LambdaEvent, run, service_fn};
use seatgate::handlers::stream;
use seatgate_aws::dynamodb::stream::change_records;
use seatgate_aws::lambda::{self, FunctionEnv};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init("relay");
    let relay = FunctionEnv::from_env()?.connect().await?.relay()?;
    let relay = &relay;
    run(service_fn(move |event: LambdaEvent<Event>| {
        lambda::invocation(async move {
            let records = change_records(&event.payload);
            Ok::<_, Error>(stream::handle_dynamodb_event(relay, records).await)
        })
    }))
    .await
}
