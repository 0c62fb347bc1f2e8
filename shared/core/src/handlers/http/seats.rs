//! `GET /seats/{seat_id}` and `GET /rooms/{room_id}/seats`: seat readings, served through the
//! cache and the breaker.

use crate::domain::{RoomId, SeatId};
use crate::service::ApiService;
use http::StatusCode;
use lambda_http::{Body, Response};

use super::errors::{self, Failure};
use super::render;
use super::routes::{Matched, SeatRoute};

pub(super) async fn handle(
    api: &ApiService,
    route: SeatRoute,
    matched: &Matched,
) -> Result<Response<Body>, Failure> {
    let served = match route {
        SeatRoute::Seat => {
            let seat_id =
                SeatId::parse(matched.param("seat_id")).map_err(|e| errors::invalid_id(&e))?;
            api.seat(&seat_id).await?
        }
        SeatRoute::Room => {
            let room_id =
                RoomId::parse(matched.param("room_id")).map_err(|e| errors::invalid_id(&e))?;
            api.room(&room_id).await?
        }
    };
    Ok(render::respond(
        StatusCode::OK,
        &render::reading_json(&served),
    ))
}
