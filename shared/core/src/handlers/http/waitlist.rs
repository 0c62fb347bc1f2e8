//! `POST /flights/{flight_id}/waitlist`, and `GET` and `DELETE` of
//! `/flights/{flight_id}/waitlist/{entry_id}`: a flight's waiting list.

use crate::domain::{EntryId, FlightId, UserId};
use crate::service::ApiService;
use crate::service::waitlist::EntryView;
use http::StatusCode;
use lambda_http::{Body, Request, Response};

use super::bodies::{BookingBody, body_json};
use super::errors::{self, Failure};
use super::flights::flight_path;
use super::render;
use super::routes::{Matched, WaitlistRoute};

pub(super) async fn handle(
    api: &ApiService,
    route: WaitlistRoute,
    matched: &Matched,
    req: &Request,
    user: &UserId,
) -> Result<Response<Body>, Failure> {
    let waitlist = api.waitlist();
    match route {
        WaitlistRoute::Join => {
            let flight_id = flight_path(matched)?;
            let body: BookingBody = body_json(req)?;
            let view = waitlist
                .join_waitlist(user, &flight_id, body.head_count)
                .await?;
            Ok(render::respond(
                StatusCode::CREATED,
                &render::entry_json(&view),
            ))
        }
        WaitlistRoute::Get => {
            let (flight_id, entry_id) = entry_path(matched)?;
            let view = waitlist.wait_entry(user, &flight_id, &entry_id).await?;
            Ok(render::respond(StatusCode::OK, &render::entry_json(&view)))
        }
        WaitlistRoute::Leave => {
            let (flight_id, entry_id) = entry_path(matched)?;
            let entry = waitlist.leave_waitlist(user, &flight_id, &entry_id).await?;
            // An entry that has left has no place in the line.
            let view = EntryView {
                entry,
                position: None,
            };
            Ok(render::respond(StatusCode::OK, &render::entry_json(&view)))
        }
    }
}

/// A waiting-list entry's route parameters; an id that cannot exist is an entry not found.
fn entry_path(matched: &Matched) -> Result<(FlightId, EntryId), Failure> {
    let not_found = || errors::not_found("waiting-list entry");
    let flight_id = FlightId::parse(matched.param("flight_id")).map_err(|_| not_found())?;
    let entry_id = EntryId::parse(matched.param("entry_id")).map_err(|_| not_found())?;
    Ok((flight_id, entry_id))
}
