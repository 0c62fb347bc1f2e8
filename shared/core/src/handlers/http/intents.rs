//! `POST /waits`, `GET /intents/{intent_id}` and `DELETE /intents/{intent_id}`: waits and the
//! caller's intents.

use crate::domain::{IntentId, Millis, SeatId, UserId};
use crate::service::ApiService;
use http::StatusCode;
use lambda_http::{Body, Request, Response};

use super::bodies::{WaitBody, body_json};
use super::errors::{self, Failure};
use super::render;
use super::routes::{IntentRoute, Matched};

pub(super) async fn handle(
    api: &ApiService,
    route: IntentRoute,
    matched: &Matched,
    req: &Request,
    user: &UserId,
) -> Result<Response<Body>, Failure> {
    match route {
        IntentRoute::RegisterWait => {
            let body: WaitBody = body_json(req)?;
            let seat_id = SeatId::parse(&body.seat_id).map_err(|e| errors::invalid_id(&e))?;
            let until = Millis::parse_rfc3339(&body.until).ok_or_else(errors::invalid_until)?;
            let intent = api.register_wait(user, seat_id, until).await?;
            Ok(render::respond(
                StatusCode::ACCEPTED,
                &render::intent_status_json(&intent),
            ))
        }
        IntentRoute::Get => {
            let intent = api.intent(user, &intent_path(matched)?).await?;
            Ok(render::respond(
                StatusCode::OK,
                &render::intent_json(&intent),
            ))
        }
        IntentRoute::Cancel => {
            let intent = api.cancel_wait(user, &intent_path(matched)?).await?;
            Ok(render::respond(
                StatusCode::OK,
                &render::intent_json(&intent),
            ))
        }
    }
}

/// The intent's route parameter; an id that cannot exist is an intent that is not found.
fn intent_path(matched: &Matched) -> Result<IntentId, Failure> {
    IntentId::parse(matched.param("intent_id")).map_err(|_| errors::not_found("intent"))
}
