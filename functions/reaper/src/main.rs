//! The reaper function: an EventBridge schedule (or an operator's invoke) -> its passes, and the
//! wake-up queue's messages -> a wake run; `handlers::schedule` tells them apart.

use lambda_runtime::{Error, LambdaEvent, run, service_fn};
use seatgate::handlers::schedule;
use seatgate_aws::lambda::{self, FunctionEnv};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init("reaper");
    let reaper = FunctionEnv::from_env()?.connect().await?.reaper();
    let reaper = &reaper;
    run(service_fn(move |event: LambdaEvent<Value>| {
        lambda::invocation(async move {
            Ok::<_, Error>(schedule::handle_event(reaper, &event.payload).await?)
        })
    }))
    .await
}
