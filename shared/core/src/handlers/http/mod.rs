//! The HTTP API handler (API Gateway HTTP API, payload v2).
//!
//! The caller is the `sub` claim the JWT authorizer put in the request context: on AWS the HTTP
//! API's authorizer verifies the token; locally the runner verifies its own tokens and fills in
//! the same context, so this code cannot tell the two apart.
//!
//! [`ROUTES`] is the one route table: this handler matches requests on it, the local runner's
//! gateway declares exactly these routes to its authorizer, and a test checks that
//! `template.yaml` declares the same set of method + path on the HTTP API.
//!
//! Every error leaves as `{"error": "<stable code>", "message": "..."}`; the status for each
//! service error is decided in [`errors`], and nowhere else.
//!
//! One file per concern: `routes` (the table and matcher), `bodies` (the caller and request
//! bodies), `dispatch` (from a matched route to its handler), one handler per resource
//! (`actions`, `intents`, `seats`, `flights`, `holds`, `waitlist`, `admin`), `render` (every
//! success as JSON) and [`errors`] (every failure and its status). Requests flow one way:
//! `routes` and `bodies` parse, a handler calls the service, `render` or `errors` answer;
//! neither of the last two reads a request, and `errors` imports none of the others.

mod actions;
mod admin;
mod bodies;
mod dispatch;
pub mod errors;
mod flights;
mod holds;
mod intents;
mod render;
mod routes;
mod seats;
mod waitlist;

pub use bodies::{Caller, caller};
pub use errors::{Failure, respond};
pub use routes::{Matched, ROUTES, RouteSpec, match_route};

use lambda_http::{Body, Request, Response};

use crate::service::ApiService;

/// Largest request body accepted (here, not in `bodies`, because `errors` names it too).
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// Handles one API request. Never fails: every error becomes a JSON error response.
pub async fn handle(api: &ApiService, req: Request) -> Response<Body> {
    match dispatch::dispatch(api, &req).await {
        Ok(resp) => resp,
        Err(failure) => failure.into_response(),
    }
}
