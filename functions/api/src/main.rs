//! The API function: HTTP API (payload v2, JWT authorizer) -> `handlers::http`.

use lambda_http::{Error, Request, run, service_fn};
use seatgate::{handlers::http, lambda_env::FunctionEnv, telemetry};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init(true);
    let api = FunctionEnv::from_env()?.connect().await?.api();
    let api = &api;
    run(service_fn(move |req: Request| async move {
        Ok::<_, Error>(http::handle(api, req).await)
    }))
    .await
}
