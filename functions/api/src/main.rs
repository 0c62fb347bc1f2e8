//! The API function: HTTP API (payload v2, JWT authorizer) -> `handlers::http`.

use lambda_http::{Error, Request, run, service_fn};
use seatgate::{handlers::http, telemetry};
use seatgate_aws::lambda::FunctionEnv;

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init();
    let api = FunctionEnv::from_env()?.connect().await?.api();
    let api = &api;
    run(service_fn(move |req: Request| async move {
        Ok::<_, Error>(http::handle(api, req).await)
    }))
    .await
}
