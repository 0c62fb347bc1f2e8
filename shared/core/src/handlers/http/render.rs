//! The JSON each route answers with, built from the services' values (never from store items),
//! so the HTTP contract in `docs/openapi.yaml` is written against one place.

use crate::domain::{Booking, CheckoutHold, Inventory};
use crate::domain::{Intent, Millis, ReadKey, ReadValue};
use crate::service::Served;
use crate::service::admin::{IntentAudit, SeatState};
use serde_json::{Value, json};

use crate::domain::{
    Action, BookingAnswer, BookingId, FlightHoldKey, FlightId, HoldId, HoldStatus, Page,
};
use crate::ports::WaitlistSummary;
use http::StatusCode;
use lambda_http::{Body, Response};

use super::errors::{self, Failure};

pub(super) fn flight_json(i: &Inventory) -> Value {
    json!({
        "flight_id": i.flight.flight_id,
        "capacity": i.flight.capacity,
        "available": i.available(),
        "held": i.held(),
        "max_per_user": i.flight.max_per_user,
        "shards": i.flight.shards,
        "hold_ttl_secs": i.flight.checkout.hold_ttl_secs,
        "hold_max_secs": i.flight.checkout.hold_max_secs,
        "offer_ttl_secs": i.flight.checkout.offer_ttl_secs,
    })
}

pub(super) fn hold_json(h: &CheckoutHold) -> Value {
    json!({
        "hold_id": h.hold_id,
        "flight_id": h.flight_id,
        "headCount": h.head_count,
        "status": h.status.as_str(),
        "expires_at": h.expires_at.to_rfc3339(),
        "created_at": h.created_at.to_rfc3339(),
    })
}

/// A hold as the operator sees it: whose it is, its shard, when it was resolved, and the
/// waiting-list entry it was offered to, if it is an offer.
pub(super) fn admin_hold_json(h: &CheckoutHold) -> Value {
    json!({
        "hold_id": h.hold_id,
        "user_id": h.user_id,
        "headCount": h.head_count,
        "shard": h.shard,
        "status": h.status.as_str(),
        "created_at": h.created_at.to_rfc3339(),
        "expires_at": h.expires_at.to_rfc3339(),
        "resolved_at": h.resolved_at.map(|at| at.to_rfc3339()),
        "offer_for": h.offer_for,
    })
}

/// An entry as its owner sees it: `position` while it waits, `offer` once served.
pub(super) fn entry_json(v: &crate::service::waitlist::EntryView) -> Value {
    let e = &v.entry;
    json!({
        "entry_id": e.entry_id,
        "flight_id": e.flight_id,
        "headCount": e.head_count,
        "status": e.status.as_str(),
        "position": v.position,
        "offer": e.offer.as_ref().map(|o| json!({
            "hold_id": o.hold_id,
            "expires_at": o.expires_at.to_rfc3339(),
        })),
        "created_at": e.created_at.to_rfc3339(),
    })
}

pub(super) fn booking_json(b: &Booking) -> Value {
    json!({
        "booking_id": b.booking_id,
        "flight_id": b.flight_id,
        "headCount": b.head_count,
        "status": b.status.as_str(),
        "created_at": b.created_at.to_rfc3339(),
        "cancelled_at": b.cancelled_at.map(Millis::to_rfc3339),
    })
}

pub(super) fn reading_json(served: &Served) -> Value {
    let r = &served.reading;
    let mut body = match (&r.key, &r.value) {
        (ReadKey::Seat(seat_id), ReadValue::Seat { available }) => {
            json!({ "seat_id": seat_id, "available": available })
        }
        (ReadKey::Room(room_id), ReadValue::Room { seats }) => {
            json!({ "room_id": room_id, "seats": seats })
        }
        // A reading never pairs a key with another kind's value; say what was asked, nothing more.
        (ReadKey::Seat(seat_id), _) => json!({ "seat_id": seat_id }),
        (ReadKey::Room(room_id), _) => json!({ "room_id": room_id, "seats": [] }),
    };
    body["as_of"] = json!(r.as_of.to_rfc3339());
    body["stale"] = json!(served.stale);
    body
}

pub(super) fn intent_json(intent: &Intent) -> Value {
    json!({
        "intent_id": intent.intent_id,
        "seat_id": intent.seat_id,
        "kind": intent.kind.as_str(),
        "status": intent.status.as_str(),
        "reason": intent.reason,
        "created_at": intent.created_at.to_rfc3339(),
        "updated_at": intent.updated_at.to_rfc3339(),
    })
}

/// `GET /admin/intents/{intent_id}`: the intent, its consent and its history.
pub(super) fn intent_audit_json(a: &IntentAudit) -> Value {
    let i = &a.intent;
    json!({
        "intent": {
            "intent_id": i.intent_id,
            "user_id": i.user_id,
            "seat_id": i.seat_id,
            "kind": i.kind.as_str(),
            "status": i.status.as_str(),
            "reason": i.reason,
            "version": i.version,
            "fencing_token": i.fencing_token,
            "attempts": i.attempts,
            "created_at": i.created_at.to_rfc3339(),
            "updated_at": i.updated_at.to_rfc3339(),
        },
        "consent": a.consent.as_ref().map(|c| json!({
            "user_id": c.user_id,
            "seat_id": c.seat_id,
            "kind": c.kind.as_str(),
            "action_id": c.action_id,
            "consented_at": c.consented_at.to_rfc3339(),
        })),
        "history": a.history.iter().map(|r| json!({
            "version": r.version,
            "at": r.at.to_rfc3339(),
            "from": r.from.map(|s| s.as_str()),
            "to": r.to.as_str(),
            "fencing_token": r.fencing_token,
            "reason": r.reason,
        })).collect::<Vec<_>>(),
        "next_cursor": a.next.map(|v| v.to_string()),
    })
}

/// `GET /admin/seats/{seat_id}`: the seat's claim, suppression, last reading and the intent behind
/// them. The claim's field keeps its first name, `hold`, so the HTTP contract stays as it was.
pub(super) fn seat_state_json(s: &SeatState) -> Value {
    json!({
        "seat_id": s.seat_id,
        "hold": s.claim.as_ref().map(|h| json!({
            "intent_id": h.intent_id,
            "since": h.since.to_rfc3339(),
        })),
        "suppression": s.suppression.as_ref().map(|x| json!({
            "intent_id": x.intent_id,
            "until": x.until.to_rfc3339(),
        })),
        "reading": s.reading.as_ref().map(|r| json!({
            "available": matches!(r.value, ReadValue::Seat { available: true }),
            "as_of": r.as_of.to_rfc3339(),
        })),
        "last_intent": s.last_intent.as_ref().map(|i| json!({
            "intent_id": i.intent_id,
            "status": i.status.as_str(),
            "reason": i.reason,
            "updated_at": i.updated_at.to_rfc3339(),
        })),
        "queue": s.queue,
    })
}

/// A JSON answer with `status`; the failures' bodies go through it too (`errors::Failure`).
pub(super) use super::errors::respond;

/// `204 No Content`.
pub(super) fn no_content() -> Response<Body> {
    Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(Body::Empty)
        .expect("static response parts are valid")
}

/// A booking or hold request's answer: the same status and body every time it is given (a
/// retry under its idempotency key gets exactly this again). Refusals are the error map's.
pub(super) fn booking_answer(answer: &BookingAnswer) -> Result<Response<Body>, Failure> {
    let body = match answer {
        BookingAnswer::Booked { booking } => json!({
            "booking_id": booking.booking_id,
            "flight_id": booking.flight_id,
            "headCount": booking.head_count,
        }),
        BookingAnswer::Held { hold } => json!({
            "hold_id": hold.hold_id,
            "flight_id": hold.flight_id,
            "headCount": hold.head_count,
            "expires_at": hold.expires_at.to_rfc3339(),
        }),
        BookingAnswer::SoldOut => return Err(errors::sold_out()),
        BookingAnswer::LimitReached => return Err(errors::limit_reached()),
        BookingAnswer::HoldExists => return Err(errors::hold_exists()),
        BookingAnswer::NoSuchFlight => return Err(errors::not_found("flight")),
    };
    Ok(respond(StatusCode::CREATED, &body))
}

pub(super) fn action_json(action: &Action) -> Value {
    json!({
        "action_id": action.action_id,
        "kind": action.kind.as_str(),
        "seat_id": action.seat_id,
        "expires_at": action.expires_at.to_rfc3339(),
    })
}

/// An intent's id and status: the answer to a confirm and to a wait.
pub(super) fn intent_status_json(intent: &Intent) -> Value {
    json!({ "intent_id": intent.intent_id, "status": intent.status.as_str() })
}

/// A flight's seats as any caller sees them.
pub(super) fn inventory_json(inventory: &Inventory) -> Value {
    json!({
        "flight_id": inventory.flight.flight_id,
        "capacity": inventory.flight.capacity,
        "available": inventory.available(),
        "held": inventory.held(),
    })
}

pub(super) fn bookings_page_json(page: &Page<Booking, BookingId>) -> Value {
    let list: Vec<Value> = page.items.iter().map(booking_json).collect();
    json!({ "bookings": list, "next_cursor": page.next })
}

pub(super) fn holds_page_json(page: &Page<CheckoutHold, HoldId>) -> Value {
    let list: Vec<Value> = page.items.iter().map(hold_json).collect();
    json!({ "holds": list, "next_cursor": page.next })
}

/// A flight's waiting list as the operator sees it: its length and who has waited longest.
pub(super) fn waitlist_summary_json(flight_id: &FlightId, summary: &WaitlistSummary) -> Value {
    json!({
        "flight_id": flight_id,
        "waiting": summary.waiting,
        "oldest": summary.oldest.as_ref().map(|e| json!({
            "entry_id": e.entry_id,
            "user_id": e.user_id,
            "headCount": e.head_count,
            "created_at": e.created_at.to_rfc3339(),
        })),
    })
}

/// A page of a flight's holds in one status, for the operator.
pub(super) fn flight_holds_json(
    flight_id: &FlightId,
    status: HoldStatus,
    page: &Page<CheckoutHold, FlightHoldKey>,
) -> Value {
    let list: Vec<Value> = page.items.iter().map(admin_hold_json).collect();
    json!({
        "flight_id": flight_id,
        "status": status.as_str(),
        "holds": list,
        "next_cursor": page.next.as_ref().map(|k| k.to_string()),
    })
}
