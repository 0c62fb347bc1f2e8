//! The API function: HTTP API (payload v2, JWT authorizer) -> `handlers::http`.

use lambda_http::{Error, Request, run, service_fn};
use seatgate::handlers::http;
use seatgate_aws::lambda::{self, FunctionEnv};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda::init("api");
    let api = FunctionEnv::from_env()?.connect().await?.api();
    let api = &api;
    run(service_fn(move |req: Request| {
        lambda::invocation(async move { Ok::<_, Error>(http::handle(api, req).await) })
    }))
    .await
}
