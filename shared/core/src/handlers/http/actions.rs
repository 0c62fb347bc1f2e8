//! `PUT /me/credential`, `POST /actions` and `POST /actions/{action_id}/confirm`: the caller's
//! upstream credential, a prepared action and the confirm that turns it into an intent.

use crate::domain::{ActionId, ActionKind, SeatId, UserId};
use crate::service::ApiService;
use http::StatusCode;
use lambda_http::{Body, Request, Response};

use super::bodies::{ActionBody, CredentialBody, body_json};
use super::errors::{self, Failure};
use super::render;
use super::routes::{ActionRoute, Matched};

pub(super) async fn handle(
    api: &ApiService,
    route: ActionRoute,
    matched: &Matched,
    req: &Request,
    user: &UserId,
) -> Result<Response<Body>, Failure> {
    match route {
        ActionRoute::PutCredential => {
            let body: CredentialBody = body_json(req)?;
            api.put_credential(user, &body.upstream_token).await?;
            Ok(render::no_content())
        }
        ActionRoute::Prepare => {
            let body: ActionBody = body_json(req)?;
            let kind =
                ActionKind::parse(&body.kind).ok_or_else(|| errors::unknown_kind(&body.kind))?;
            let seat_id = SeatId::parse(&body.seat_id).map_err(|e| errors::invalid_id(&e))?;
            let action = api.prepare(user, kind, seat_id).await?;
            Ok(render::respond(
                StatusCode::CREATED,
                &render::action_json(&action),
            ))
        }
        ActionRoute::Confirm => {
            let action_id = ActionId::parse(matched.param("action_id"))
                .map_err(|_| errors::not_found("action"))?;
            let confirmed = api.confirm(user, &action_id).await?;
            // 202 for the intent this confirm created; 200 for a repeated confirm's.
            let status = if confirmed.created {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            Ok(render::respond(
                status,
                &render::intent_status_json(&confirmed.intent),
            ))
        }
    }
}
