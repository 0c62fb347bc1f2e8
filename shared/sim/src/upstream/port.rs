//! The upstream port, `seatgate::ports::Upstream`, on the model: reserve, the charge read, the
//! seat and room reads, each answering with the very type the HTTP adapter
//! (`seatgate::adapters::upstream_http`) reads from the wire answer `infra/upstream-sim` gives.
//! The HTTP-facing side of the model, without HTTP.

use super::faults::{Refusal, read_refusal};
use super::model::UpstreamModel;
use super::record::{Commit, Route};
use seatgate::domain::{RoomId, SeatAvailability, SeatId, Secret};
use seatgate::ports::{CallFailure, Charge, ChargeReadError, ReadError, ReserveOutcome, Upstream};

#[async_trait::async_trait]
impl Upstream for UpstreamModel {
    async fn reserve(&self, credential: &Secret, seat_id: &SeatId) -> ReserveOutcome {
        let key = format!("seat={seat_id} {}", self.user_key(credential));
        // Owned: a reserve handled late runs after its caller has gone.
        let (credential, seat_id) = (credential.clone(), seat_id.clone());
        self.call_landing_late(
            Route::Reserve,
            key,
            |refusal| match refusal {
                Refusal::Busy(retry_after, _) => ReserveOutcome::Busy { retry_after },
                Refusal::ServerError => ReserveOutcome::Unknown(CallFailure::Status(500)),
            },
            || ReserveOutcome::Unknown(CallFailure::Timeout),
            move |s, now, lose_drawn| {
                let Some(user) = UpstreamModel::authenticate(s, &credential) else {
                    return (
                        ReserveOutcome::CredentialRejected,
                        "401 unauthorized".into(),
                        false,
                    );
                };
                if s.seats.contains_key(&seat_id) {
                    return (ReserveOutcome::SeatTaken, "409 seat_taken".into(), false);
                }
                if s.charges.contains_key(&user) {
                    return (
                        ReserveOutcome::AlreadyCharged,
                        "409 already_charged".into(),
                        false,
                    );
                }
                // Decided in the commit's critical section, so exactly n answers are lost.
                let lost = lose_drawn || s.lose_next_commits > 0;
                if s.lose_next_commits > 0 && !lose_drawn {
                    s.lose_next_commits -= 1;
                }
                let charge_id = format!("ch-{:06}", s.commits.len() + 1);
                s.seats.insert(seat_id.clone(), user.clone());
                s.charges.insert(user.clone(), s.commits.len());
                s.commits.push(Commit {
                    at: now,
                    user_id: user,
                    seat_id: seat_id.clone(),
                    charge_id: charge_id.clone(),
                    answer_lost: lost,
                    released_at: None,
                });
                let outcome = if lost {
                    format!("201 {charge_id} (answer lost)")
                } else {
                    format!("201 {charge_id}")
                };
                let charge = Charge {
                    charge_id,
                    seat_id: seat_id.clone(),
                };
                (ReserveOutcome::Reserved(charge), outcome, lost)
            },
        )
        .await
    }

    async fn current_charge(&self, credential: &Secret) -> Result<Option<Charge>, ChargeReadError> {
        let key = self.user_key(credential);
        self.call(
            Route::Charge,
            key,
            |refusal| match refusal {
                Refusal::Busy(retry_after, _) => Err(ChargeReadError::Busy { retry_after }),
                Refusal::ServerError => Err(ChargeReadError::Failed(CallFailure::Status(500))),
            },
            || Err(ChargeReadError::Failed(CallFailure::Timeout)),
            |s, _, _| {
                let Some(user) = UpstreamModel::authenticate(s, credential) else {
                    return (
                        Err(ChargeReadError::CredentialRejected),
                        "401 unauthorized".into(),
                        false,
                    );
                };
                match s.charges.get(&user).map(|i| &s.commits[*i]) {
                    Some(c) => (
                        Ok(Some(Charge {
                            charge_id: c.charge_id.clone(),
                            seat_id: c.seat_id.clone(),
                        })),
                        format!("200 {} {}", c.charge_id, c.seat_id),
                        false,
                    ),
                    None => (Ok(None), "404 no_charge".into(), false),
                }
            },
        )
        .await
    }

    async fn seat(&self, seat_id: &SeatId) -> Result<bool, ReadError> {
        self.call(
            Route::Seat,
            format!("seat={seat_id}"),
            read_refusal,
            || Err(ReadError::Failed(CallFailure::Timeout)),
            |s, _, _| {
                let free = !s.seats.contains_key(seat_id);
                let outcome = if free { "200 free" } else { "200 occupied" };
                (Ok(free), outcome.into(), false)
            },
        )
        .await
    }

    async fn room(&self, room_id: &RoomId) -> Result<Vec<SeatAvailability>, ReadError> {
        self.call(
            Route::Room,
            format!("room={room_id}"),
            read_refusal,
            || Err(ReadError::Failed(CallFailure::Timeout)),
            |s, _, _| {
                let Some(seats) = s.rooms.get(room_id) else {
                    return (
                        Err(ReadError::NoSuchRoom),
                        "404 room_not_found".into(),
                        false,
                    );
                };
                let seats: Vec<SeatAvailability> = seats
                    .iter()
                    .map(|seat| SeatAvailability {
                        seat_id: seat.clone(),
                        available: !s.seats.contains_key(seat),
                    })
                    .collect();
                let taken = seats.iter().filter(|a| !a.available).count();
                let outcome = format!("200 {} seats, {taken} occupied", seats.len());
                (Ok(seats), outcome, false)
            },
        )
        .await
    }
}
