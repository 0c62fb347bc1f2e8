//! Runs a matched route: parse the request into validated domain values, call the service, map
//! the result. The admin claim is checked here once, from the route table.

use crate::domain::{ActionId, ActionKind, IntentId, Millis, RoomId, SeatId};
use crate::domain::{BookingId, CheckoutTimes, EntryId, Flight, FlightHoldKey, FlightId, HoldId};
use crate::service::ApiService;
use http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde_json::{Value, json};

use super::bodies::*;
use super::errors::{self, Failure, respond};
use super::render::*;
use super::routes::{Operation, match_route};

pub(super) async fn dispatch(api: &ApiService, req: &Request) -> Result<Response<Body>, Failure> {
    let matched = match_route(req.method(), req.uri().path())?;
    let caller = caller(req).ok_or_else(errors::unauthorized)?;
    if matched.route.admin && !caller.admin {
        return Err(errors::forbidden());
    }
    let user = &caller.user_id;
    match matched.route.operation {
        Operation::PutCredential => {
            let body: CredentialBody = body_json(req)?;
            api.put_credential(user, &body.upstream_token).await?;
            Ok(Response::builder()
                .status(StatusCode::NO_CONTENT)
                .body(Body::Empty)
                .expect("static response parts are valid"))
        }
        Operation::PrepareAction => {
            let body: ActionBody = body_json(req)?;
            let kind = ActionKind::parse(&body.kind).ok_or_else(|| {
                Failure::new(
                    StatusCode::BAD_REQUEST,
                    "unknown_kind",
                    format!("unknown action kind {:?}; known: reserve_seat", body.kind),
                )
            })?;
            let seat_id = SeatId::parse(&body.seat_id).map_err(|e| errors::invalid_id(&e))?;
            let action = api.prepare(user, kind, seat_id).await?;
            Ok(respond(
                StatusCode::CREATED,
                &json!({
                    "action_id": action.action_id,
                    "kind": action.kind.as_str(),
                    "seat_id": action.seat_id,
                    "expires_at": action.expires_at.to_rfc3339(),
                }),
            ))
        }
        Operation::Confirm => {
            let action_id = ActionId::parse(matched.param("action_id"))
                .map_err(|_| errors::not_found("action"))?;
            let confirmed = api.confirm(user, &action_id).await?;
            let status = if confirmed.created {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            Ok(respond(
                status,
                &json!({
                    "intent_id": confirmed.intent.intent_id,
                    "status": confirmed.intent.status.as_str(),
                }),
            ))
        }
        Operation::RegisterWait => {
            let body: WaitBody = body_json(req)?;
            let seat_id = SeatId::parse(&body.seat_id).map_err(|e| errors::invalid_id(&e))?;
            let until = Millis::parse_rfc3339(&body.until).ok_or_else(|| {
                Failure::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_until",
                    "until must be an RFC 3339 timestamp",
                )
            })?;
            let intent = api.register_wait(user, seat_id, until).await?;
            Ok(respond(
                StatusCode::ACCEPTED,
                &json!({ "intent_id": intent.intent_id, "status": intent.status.as_str() }),
            ))
        }
        Operation::GetIntent => {
            let intent_id = IntentId::parse(matched.param("intent_id"))
                .map_err(|_| errors::not_found("intent"))?;
            let intent = api.intent(user, &intent_id).await?;
            Ok(respond(StatusCode::OK, &intent_json(&intent)))
        }
        Operation::CancelIntent => {
            let intent_id = IntentId::parse(matched.param("intent_id"))
                .map_err(|_| errors::not_found("intent"))?;
            let intent = api.cancel_wait(user, &intent_id).await?;
            Ok(respond(StatusCode::OK, &intent_json(&intent)))
        }
        Operation::GetSeat => {
            let seat_id =
                SeatId::parse(matched.param("seat_id")).map_err(|e| errors::invalid_id(&e))?;
            let served = api.seat(&seat_id).await?;
            Ok(respond(StatusCode::OK, &reading_json(&served)))
        }
        Operation::CreateFlight => {
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
            Ok(respond(StatusCode::CREATED, &flight_json(&created)))
        }
        Operation::GetFlight => {
            let flight_id = FlightId::parse(matched.param("flight_id"))
                .map_err(|_| errors::not_found("flight"))?;
            let inventory = api.flights().inventory(&flight_id).await?;
            Ok(respond(
                StatusCode::OK,
                &json!({
                    "flight_id": inventory.flight.flight_id,
                    "capacity": inventory.flight.capacity,
                    "available": inventory.available(),
                    "held": inventory.held(),
                }),
            ))
        }
        Operation::Book => {
            let flight_id = FlightId::parse(matched.param("flight_id"))
                .map_err(|_| errors::not_found("flight"))?;
            let key = idempotency_key(req)?;
            let body: BookingBody = body_json(req)?;
            let answer = api
                .flights()
                .book(user, &flight_id, body.head_count, key.as_ref())
                .await?;
            errors::booking_answer(&answer)
        }
        Operation::MyBookings => {
            let after = cursor(req, |s| BookingId::parse(s).ok())?;
            let page = api
                .flights()
                .bookings_of(user, after.as_ref())
                .await
                .map_err(|e| errors::store(&e))?;
            let list: Vec<Value> = page.items.iter().map(booking_json).collect();
            Ok(respond(
                StatusCode::OK,
                &json!({ "bookings": list, "next_cursor": page.next }),
            ))
        }
        Operation::CancelBooking => {
            let not_found = || errors::not_found("booking");
            let flight_id = FlightId::parse(matched.param("flight_id")).map_err(|_| not_found())?;
            let booking_id =
                BookingId::parse(matched.param("booking_id")).map_err(|_| not_found())?;
            let booking = api.flights().cancel(user, &flight_id, &booking_id).await?;
            Ok(respond(StatusCode::OK, &booking_json(&booking)))
        }
        Operation::Hold => {
            let flight_id = FlightId::parse(matched.param("flight_id"))
                .map_err(|_| errors::not_found("flight"))?;
            let key = idempotency_key(req)?;
            let body: BookingBody = body_json(req)?;
            let answer = api
                .flights()
                .hold(user, &flight_id, body.head_count, key.as_ref())
                .await?;
            errors::booking_answer(&answer)
        }
        Operation::GetHold => {
            let (flight_id, hold_id) = hold_path(&matched)?;
            let hold = api.flights().hold_of(user, &flight_id, &hold_id).await?;
            Ok(respond(StatusCode::OK, &hold_json(&hold)))
        }
        Operation::ConfirmHold => {
            let (flight_id, hold_id) = hold_path(&matched)?;
            let confirmed = api
                .flights()
                .confirm_hold(user, &flight_id, &hold_id)
                .await?;
            let status = if confirmed.new {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(respond(status, &booking_json(&confirmed.booking)))
        }
        Operation::ReleaseHold => {
            let (flight_id, hold_id) = hold_path(&matched)?;
            let hold = api
                .flights()
                .release_hold(user, &flight_id, &hold_id)
                .await?;
            Ok(respond(StatusCode::OK, &hold_json(&hold)))
        }
        Operation::ExtendHold => {
            let (flight_id, hold_id) = hold_path(&matched)?;
            let hold = api
                .flights()
                .extend_hold(user, &flight_id, &hold_id)
                .await?;
            Ok(respond(StatusCode::OK, &hold_json(&hold)))
        }
        Operation::MyHolds => {
            let after = cursor(req, |s| HoldId::parse(s).ok())?;
            let page = api
                .flights()
                .holds_of(user, after.as_ref())
                .await
                .map_err(|e| errors::store(&e))?;
            let list: Vec<Value> = page.items.iter().map(hold_json).collect();
            Ok(respond(
                StatusCode::OK,
                &json!({ "holds": list, "next_cursor": page.next }),
            ))
        }
        Operation::AdminIntent => {
            let intent_id =
                IntentId::parse(matched.param("intent_id")).map_err(|e| errors::invalid_id(&e))?;
            let after = cursor(req, version_cursor)?;
            let audit = api.admin().intent(&intent_id, after).await?;
            Ok(respond(StatusCode::OK, &intent_audit_json(&audit)))
        }
        Operation::AdminSeat => {
            let seat_id =
                SeatId::parse(matched.param("seat_id")).map_err(|e| errors::invalid_id(&e))?;
            let state = api.admin().seat(&seat_id).await?;
            Ok(respond(StatusCode::OK, &seat_state_json(&state)))
        }
        Operation::AdminWaitlist => {
            let flight_id = FlightId::parse(matched.param("flight_id"))
                .map_err(|_| errors::not_found("flight"))?;
            let summary = api.flights().waitlist_of(&flight_id).await?;
            Ok(respond(
                StatusCode::OK,
                &json!({
                    "flight_id": flight_id,
                    "waiting": summary.waiting,
                    "oldest": summary.oldest.as_ref().map(|e| json!({
                        "entry_id": e.entry_id,
                        "user_id": e.user_id,
                        "headCount": e.head_count,
                        "created_at": e.created_at.to_rfc3339(),
                    })),
                }),
            ))
        }
        Operation::AdminFlightHolds => {
            let flight_id = FlightId::parse(matched.param("flight_id"))
                .map_err(|_| errors::not_found("flight"))?;
            let status = hold_status(req)?;
            let after = cursor(req, FlightHoldKey::parse)?;
            let page = api
                .flights()
                .flight_holds(&flight_id, status, after.as_ref())
                .await?;
            let list: Vec<Value> = page.items.iter().map(admin_hold_json).collect();
            Ok(respond(
                StatusCode::OK,
                &json!({
                    "flight_id": flight_id,
                    "status": status.as_str(),
                    "holds": list,
                    "next_cursor": page.next.map(|k| k.to_string()),
                }),
            ))
        }
        Operation::Reconcile => {
            let report = api.admin().reconcile().await?;
            Ok(respond(StatusCode::OK, &json!(report)))
        }
        Operation::JoinWaitlist => {
            let flight_id = FlightId::parse(matched.param("flight_id"))
                .map_err(|_| errors::not_found("flight"))?;
            let body: BookingBody = body_json(req)?;
            let view = api
                .flights()
                .join_waitlist(user, &flight_id, body.head_count)
                .await?;
            Ok(respond(StatusCode::CREATED, &entry_json(&view)))
        }
        Operation::GetWaitEntry => {
            let (flight_id, entry_id) = entry_path(&matched)?;
            let view = api
                .flights()
                .wait_entry(user, &flight_id, &entry_id)
                .await?;
            Ok(respond(StatusCode::OK, &entry_json(&view)))
        }
        Operation::LeaveWaitlist => {
            let (flight_id, entry_id) = entry_path(&matched)?;
            let entry = api
                .flights()
                .leave_waitlist(user, &flight_id, &entry_id)
                .await?;
            let view = crate::service::waitlist::EntryView {
                entry,
                position: None,
            };
            Ok(respond(StatusCode::OK, &entry_json(&view)))
        }
        Operation::AdminQueues => {
            let depths = api.admin().queues().await?;
            Ok(respond(StatusCode::OK, &json!(depths)))
        }
        Operation::Redrive => {
            let moved = api.admin().redrive().await?;
            Ok(respond(StatusCode::OK, &json!(moved)))
        }
        Operation::GetRoomSeats => {
            let room_id =
                RoomId::parse(matched.param("room_id")).map_err(|e| errors::invalid_id(&e))?;
            let served = api.room(&room_id).await?;
            Ok(respond(StatusCode::OK, &reading_json(&served)))
        }
    }
}

/// A hold's route parameters; an id that cannot exist is a hold that is not found.
fn hold_path(matched: &super::routes::Matched) -> Result<(FlightId, HoldId), Failure> {
    let not_found = || errors::not_found("hold");
    let flight_id = FlightId::parse(matched.param("flight_id")).map_err(|_| not_found())?;
    let hold_id = HoldId::parse(matched.param("hold_id")).map_err(|_| not_found())?;
    Ok((flight_id, hold_id))
}

/// A waiting-list entry's route parameters; an id that cannot exist is an entry not found.
fn entry_path(matched: &super::routes::Matched) -> Result<(FlightId, EntryId), Failure> {
    let not_found = || errors::not_found("waiting-list entry");
    let flight_id = FlightId::parse(matched.param("flight_id")).map_err(|_| not_found())?;
    let entry_id = EntryId::parse(matched.param("entry_id")).map_err(|_| not_found())?;
    Ok((flight_id, entry_id))
}

/// The flight's hold and offer lifetimes: the defaults for any not given.
fn checkout_times(body: &FlightBody) -> Result<CheckoutTimes, Failure> {
    let d = CheckoutTimes::default();
    CheckoutTimes::new(
        body.hold_ttl_secs.unwrap_or(d.hold_ttl_secs),
        body.hold_max_secs.unwrap_or(d.hold_max_secs),
        body.offer_ttl_secs.unwrap_or(d.offer_ttl_secs),
    )
    .map_err(|e| Failure::new(StatusCode::BAD_REQUEST, "invalid_flight", e.to_string()))
}
