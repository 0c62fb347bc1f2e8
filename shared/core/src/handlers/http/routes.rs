//! The one route table ([`ROUTES`]) and its matcher: method and path template (API Gateway's
//! route-key syntax), the operation each runs, and whether it needs the admin claim.

use http::Method;
use std::collections::HashMap;

use super::errors::{self, Failure};

/// What a route does; each [`RouteSpec`] names one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Operation {
    PutCredential,
    PrepareAction,
    Confirm,
    RegisterWait,
    GetIntent,
    CancelIntent,
    GetSeat,
    GetRoomSeats,
    CreateFlight,
    GetFlight,
    Book,
    MyBookings,
    CancelBooking,
    Hold,
    GetHold,
    ConfirmHold,
    ReleaseHold,
    ExtendHold,
    MyHolds,
    JoinWaitlist,
    GetWaitEntry,
    LeaveWaitlist,
    AdminIntent,
    AdminSeat,
    AdminWaitlist,
    AdminFlightHolds,
    AdminQueues,
    Reconcile,
    Redrive,
}

/// One route of the HTTP API: a method and a path template whose `{name}` segments are path
/// parameters, written as API Gateway writes route keys.
#[derive(Debug)]
pub struct RouteSpec {
    pub method: Method,
    pub path: &'static str,
    pub(super) operation: Operation,
    /// Whether the route needs the admin claim: checked once, before the route runs, and read
    /// by the local runner to know which routes its ops page may call.
    pub admin: bool,
}

impl RouteSpec {
    /// The API Gateway route key, e.g. `POST /actions/{action_id}/confirm`.
    pub fn key(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

const fn route(method: Method, path: &'static str, operation: Operation) -> RouteSpec {
    spec(method, path, operation, false)
}

/// A route only a caller with the admin claim may call.
const fn admin_route(method: Method, path: &'static str, operation: Operation) -> RouteSpec {
    spec(method, path, operation, true)
}

const fn spec(method: Method, path: &'static str, operation: Operation, admin: bool) -> RouteSpec {
    RouteSpec {
        method,
        path,
        operation,
        admin,
    }
}

/// Every route the API serves. (`POST /dev/token` is the local runner's own, outside the API.)
pub const ROUTES: &[RouteSpec] = &[
    route(Method::PUT, "/me/credential", Operation::PutCredential),
    route(Method::POST, "/actions", Operation::PrepareAction),
    route(
        Method::POST,
        "/actions/{action_id}/confirm",
        Operation::Confirm,
    ),
    route(Method::POST, "/waits", Operation::RegisterWait),
    route(Method::GET, "/intents/{intent_id}", Operation::GetIntent),
    route(
        Method::DELETE,
        "/intents/{intent_id}",
        Operation::CancelIntent,
    ),
    route(Method::GET, "/seats/{seat_id}", Operation::GetSeat),
    route(
        Method::GET,
        "/rooms/{room_id}/seats",
        Operation::GetRoomSeats,
    ),
    admin_route(Method::POST, "/admin/flights", Operation::CreateFlight),
    route(Method::GET, "/flights/{flight_id}", Operation::GetFlight),
    route(
        Method::POST,
        "/flights/{flight_id}/bookings",
        Operation::Book,
    ),
    route(Method::GET, "/me/bookings", Operation::MyBookings),
    route(
        Method::DELETE,
        "/flights/{flight_id}/bookings/{booking_id}",
        Operation::CancelBooking,
    ),
    route(Method::POST, "/flights/{flight_id}/holds", Operation::Hold),
    route(
        Method::GET,
        "/flights/{flight_id}/holds/{hold_id}",
        Operation::GetHold,
    ),
    route(
        Method::POST,
        "/flights/{flight_id}/holds/{hold_id}/confirm",
        Operation::ConfirmHold,
    ),
    route(
        Method::DELETE,
        "/flights/{flight_id}/holds/{hold_id}",
        Operation::ReleaseHold,
    ),
    route(
        Method::POST,
        "/flights/{flight_id}/holds/{hold_id}/extend",
        Operation::ExtendHold,
    ),
    route(Method::GET, "/me/holds", Operation::MyHolds),
    route(
        Method::POST,
        "/flights/{flight_id}/waitlist",
        Operation::JoinWaitlist,
    ),
    route(
        Method::GET,
        "/flights/{flight_id}/waitlist/{entry_id}",
        Operation::GetWaitEntry,
    ),
    route(
        Method::DELETE,
        "/flights/{flight_id}/waitlist/{entry_id}",
        Operation::LeaveWaitlist,
    ),
    admin_route(
        Method::GET,
        "/admin/intents/{intent_id}",
        Operation::AdminIntent,
    ),
    admin_route(Method::GET, "/admin/seats/{seat_id}", Operation::AdminSeat),
    admin_route(
        Method::GET,
        "/admin/flights/{flight_id}/waitlist",
        Operation::AdminWaitlist,
    ),
    admin_route(
        Method::GET,
        "/admin/flights/{flight_id}/holds",
        Operation::AdminFlightHolds,
    ),
    admin_route(Method::GET, "/admin/queues", Operation::AdminQueues),
    admin_route(Method::POST, "/admin/reconcile", Operation::Reconcile),
    admin_route(
        Method::POST,
        "/admin/dead-letters/redrive",
        Operation::Redrive,
    ),
];

/// A request matched to its route, with its path parameters by name.
#[derive(Debug)]
pub struct Matched {
    pub route: &'static RouteSpec,
    pub params: HashMap<&'static str, String>,
}

impl Matched {
    pub(super) fn param(&self, name: &str) -> &str {
        self.params.get(name).map_or("", String::as_str)
    }
}

fn path_params(template: &'static str, path: &str) -> Option<HashMap<&'static str, String>> {
    let parts: Vec<&'static str> = template.trim_matches('/').split('/').collect();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    if parts.len() != segments.len() {
        return None;
    }
    let mut params = HashMap::new();
    for (part, segment) in parts.into_iter().zip(segments) {
        match part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
            Some(name) if !segment.is_empty() => {
                params.insert(name, segment.to_owned());
            }
            Some(_) => return None,
            None if part == segment => {}
            None => return None,
        }
    }
    Some(params)
}

/// The route `method` + `path` names: `404 route_not_found` when no route has that path,
/// `405 method_not_allowed` (with `Allow`) when some route has it with another method.
pub fn match_route(method: &Method, path: &str) -> Result<Matched, Failure> {
    let mut allowed = Vec::new();
    for route in ROUTES {
        if let Some(params) = path_params(route.path, path) {
            if route.method == *method {
                return Ok(Matched { route, params });
            }
            allowed.push(&route.method);
        }
    }
    Err(if allowed.is_empty() {
        errors::route_not_found()
    } else {
        errors::method_not_allowed(&allowed)
    })
}
