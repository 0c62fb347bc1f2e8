//! `POST /flights/{flight_id}/holds` (made by the sale, as a booking is), then `GET` and
//! `DELETE` (release) of `/flights/{flight_id}/holds/{hold_id}`, its `POST .../confirm` and
//! `POST .../extend` (the checkout service's), and `GET /me/holds`: checkout holds.

use crate::domain::{FlightId, HoldId, UserId};
use crate::service::ApiService;
use http::StatusCode;
use lambda_http::{Body, Request, Response};

use super::bodies::{BookingBody, body_json, cursor, idempotency_key};
use super::errors::{self, Failure};
use super::flights::flight_path;
use super::render;
use super::routes::{HoldRoute, Matched};

pub(super) async fn handle(
    api: &ApiService,
    route: HoldRoute,
    matched: &Matched,
    req: &Request,
    user: &UserId,
) -> Result<Response<Body>, Failure> {
    match route {
        HoldRoute::Create => {
            let flight_id = flight_path(matched)?;
            let key = idempotency_key(req)?;
            let body: BookingBody = body_json(req)?;
            let answer = api
                .flights()
                .hold(user, &flight_id, body.head_count, key.as_ref())
                .await?;
            render::booking_answer(&answer)
        }
        HoldRoute::Get => {
            let (flight_id, hold_id) = hold_path(matched)?;
            let hold = api.checkout().hold_of(user, &flight_id, &hold_id).await?;
            Ok(render::respond(StatusCode::OK, &render::hold_json(&hold)))
        }
        HoldRoute::Confirm => {
            let (flight_id, hold_id) = hold_path(matched)?;
            let confirmed = api
                .checkout()
                .confirm_hold(user, &flight_id, &hold_id)
                .await?;
            // 201 for the booking this confirm made; 200 for a repeated confirm's.
            let status = if confirmed.new {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(render::respond(
                status,
                &render::booking_json(&confirmed.booking),
            ))
        }
        HoldRoute::Release => {
            let (flight_id, hold_id) = hold_path(matched)?;
            let hold = api
                .checkout()
                .release_hold(user, &flight_id, &hold_id)
                .await?;
            Ok(render::respond(StatusCode::OK, &render::hold_json(&hold)))
        }
        HoldRoute::Extend => {
            let (flight_id, hold_id) = hold_path(matched)?;
            let hold = api
                .checkout()
                .extend_hold(user, &flight_id, &hold_id)
                .await?;
            Ok(render::respond(StatusCode::OK, &render::hold_json(&hold)))
        }
        HoldRoute::Mine => {
            let after = cursor(req, |s| HoldId::parse(s).ok())?;
            let page = api
                .checkout()
                .holds_of(user, after.as_ref())
                .await
                .map_err(|e| errors::store(&e))?;
            Ok(render::respond(
                StatusCode::OK,
                &render::holds_page_json(&page),
            ))
        }
    }
}

/// A hold's route parameters; an id that cannot exist is a hold that is not found.
fn hold_path(matched: &Matched) -> Result<(FlightId, HoldId), Failure> {
    let not_found = || errors::not_found("hold");
    let flight_id = FlightId::parse(matched.param("flight_id")).map_err(|_| not_found())?;
    let hold_id = HoldId::parse(matched.param("hold_id")).map_err(|_| not_found())?;
    Ok((flight_id, hold_id))
}
