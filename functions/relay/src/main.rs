//! The relay function: the table's stream (the outbox) -> `handlers::stream`, reporting the
//! first failed record so the event source mapping retries from there.

use aws_lambda_events::event::dynamodb::Event;
use lambda_runtime::{Error, LambdaEvent, run, service_fn};
use seatgate::{handlers::stream, lambda_env::FunctionEnv, telemetry};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init(true);
    let relay = FunctionEnv::from_env()?.connect().await?.relay().await?;
    let relay = &relay;
    run(service_fn(move |event: LambdaEvent<Event>| async move {
        Ok::<_, Error>(stream::handle_dynamodb_event(relay, &event.payload).await)
    }))
    .await
}
