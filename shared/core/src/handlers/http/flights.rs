//! `POST /admin/flights`, `GET /flights/{flight_id}`, `POST /flights/{flight_id}/bookings`,
//! `GET /me/bookings` and `DELETE /flights/{flight_id}/bookings/{booking_id}`: flights, their
//! bookings and cancels. (Creating a flight is an admin route: the route table says so, and
//! `dispatch` checks it before this runs.)

use crate::domain::{BookingId, CheckoutTimes, Flight, FlightId, UserId};
use crate::service::ApiService;
use http::StatusCode;
use lambda_http::{Body, Request, Response};

use super::bodies::{BookingBody, FlightBody, body_json, cursor, idempotency_key};
use super::errors::{self, Failure};
use super::render;
use super::routes::{FlightRoute, Matched};

pub(super) async fn handle(
    api: &ApiService,
    route: FlightRoute,
    matched: &Matched,
    req: &Request,
    user: &UserId,
) -> Result<Response<Body>, Failure> {
    match route {
        FlightRoute::Create => {
            let body: FlightBody = body_json(req)?;
            let flight_id = FlightId::parse(&body.flight_id).map_err(|e| errors::invalid_id(&e))?;
            let created = api
                .flights()
                .create_with_checkout(
                    flight_id,
                    body.capacity,
                    body.max_per_user,
                    body.shards
                        .unwrap_or_else(|| Flight::default_shards(body.capacity)),
                    checkout_times(&body)?,
                )
                .await?;
            Ok(render::respond(
                StatusCode::CREATED,
                &render::flight_json(&created),
            ))
        }
        FlightRoute::Get => {
            let inventory = api.flights().inventory(&flight_path(matched)?).await?;
            Ok(render::respond(
                StatusCode::OK,
                &render::inventory_json(&inventory),
            ))
        }
        FlightRoute::Book => {
            let flight_id = flight_path(matched)?;
            let key = idempotency_key(req)?;
            let body: BookingBody = body_json(req)?;
            let answer = api
                .flights()
                .book(user, &flight_id, body.head_count, key.as_ref())
                .await?;
            render::booking_answer(&answer)
        }
        FlightRoute::MyBookings => {
            let after = cursor(req, |s| BookingId::parse(s).ok())?;
            let page = api
                .flights()
                .bookings_of(user, after.as_ref())
                .await
                .map_err(|e| errors::store(&e))?;
            Ok(render::respond(
                StatusCode::OK,
                &render::bookings_page_json(&page),
            ))
        }
        FlightRoute::CancelBooking => {
            let not_found = || errors::not_found("booking");
            let flight_id = FlightId::parse(matched.param("flight_id")).map_err(|_| not_found())?;
            let booking_id =
                BookingId::parse(matched.param("booking_id")).map_err(|_| not_found())?;
            let booking = api.flights().cancel(user, &flight_id, &booking_id).await?;
            Ok(render::respond(
                StatusCode::OK,
                &render::booking_json(&booking),
            ))
        }
    }
}

/// The flight's route parameter; an id that cannot exist is a flight that is not found.
pub(super) fn flight_path(matched: &Matched) -> Result<FlightId, Failure> {
    FlightId::parse(matched.param("flight_id")).map_err(|_| errors::not_found("flight"))
}

/// The flight's hold and offer lifetimes: the defaults for any not given.
fn checkout_times(body: &FlightBody) -> Result<CheckoutTimes, Failure> {
    let d = CheckoutTimes::default();
    CheckoutTimes::new(
        body.hold_ttl_secs.unwrap_or(d.hold_ttl_secs),
        body.hold_max_secs.unwrap_or(d.hold_max_secs),
        body.offer_ttl_secs.unwrap_or(d.offer_ttl_secs),
    )
    .map_err(|e| errors::invalid_flight(e.to_string()))
}
