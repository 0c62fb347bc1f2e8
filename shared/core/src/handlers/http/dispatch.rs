//! Runs a matched route: finds the caller, checks the admin claim once from the route table,
//! and hands the request to its resource's handler (`actions.rs`, `intents.rs`, `seats.rs`,
//! `flights.rs`, `holds.rs`, `waitlist.rs`, `admin.rs`). Each handler parses the request into
//! validated domain values, calls the service and renders the answer (`render.rs`); every
//! failure is mapped to its status in `errors.rs`.

use crate::service::ApiService;
use lambda_http::{Body, Request, Response};

use super::bodies::caller;
use super::errors::{self, Failure};
use super::routes::{Operation, match_route};
use super::{actions, admin, flights, holds, intents, seats, waitlist};

pub(super) async fn dispatch(api: &ApiService, req: &Request) -> Result<Response<Body>, Failure> {
    let matched = match_route(req.method(), req.uri().path())?;
    let caller = caller(req).ok_or_else(errors::unauthorized)?;
    if matched.route.admin && !caller.admin {
        return Err(errors::forbidden());
    }
    let user = &caller.user_id;
    match matched.route.operation {
        Operation::Actions(route) => actions::handle(api, route, &matched, req, user).await,
        Operation::Intents(route) => intents::handle(api, route, &matched, req, user).await,
        Operation::Seats(route) => seats::handle(api, route, &matched).await,
        Operation::Flights(route) => flights::handle(api, route, &matched, req, user).await,
        Operation::Holds(route) => holds::handle(api, route, &matched, req, user).await,
        Operation::Waitlist(route) => waitlist::handle(api, route, &matched, req, user).await,
        Operation::Admin(route) => admin::handle(api, route, &matched, req).await,
    }
}
