//! The operator's routes under `/admin/` (the route table marks each as needing the admin
//! claim, and `dispatch` checks it before this runs): an intent's audit, a seat's state, a
//! flight's waiting list and holds, the queues' depths, reconcile and the dead-letter redrive.

use crate::domain::{FlightHoldKey, IntentId, SeatId};
use crate::service::ApiService;
use http::StatusCode;
use lambda_http::{Body, Request, Response};
use serde_json::json;

use super::bodies::{cursor, hold_status, version_cursor};
use super::errors::{self, Failure};
use super::flights::flight_path;
use super::render;
use super::routes::{AdminRoute, Matched};

pub(super) async fn handle(
    api: &ApiService,
    route: AdminRoute,
    matched: &Matched,
    req: &Request,
) -> Result<Response<Body>, Failure> {
    let body = match route {
        AdminRoute::Intent => {
            let intent_id =
                IntentId::parse(matched.param("intent_id")).map_err(|e| errors::invalid_id(&e))?;
            let after = cursor(req, version_cursor)?;
            let audit = api.admin().intent(&intent_id, after).await?;
            render::intent_audit_json(&audit)
        }
        AdminRoute::Seat => {
            let seat_id =
                SeatId::parse(matched.param("seat_id")).map_err(|e| errors::invalid_id(&e))?;
            let state = api.admin().seat(&seat_id).await?;
            render::seat_state_json(&state)
        }
        AdminRoute::Waitlist => {
            let flight_id = flight_path(matched)?;
            let summary = api.waitlist().waitlist_of(&flight_id).await?;
            render::waitlist_summary_json(&flight_id, &summary)
        }
        AdminRoute::FlightHolds => {
            let flight_id = flight_path(matched)?;
            let status = hold_status(req)?;
            let after = cursor(req, FlightHoldKey::parse)?;
            let page = api
                .checkout()
                .flight_holds(&flight_id, status, after.as_ref())
                .await?;
            render::flight_holds_json(&flight_id, status, &page)
        }
        AdminRoute::Queues => json!(api.admin().queues().await?),
        AdminRoute::Reconcile => json!(api.admin().reconcile().await?),
        AdminRoute::Redrive => json!(api.admin().redrive().await?),
    };
    Ok(render::respond(StatusCode::OK, &body))
}
