//! The one route table ([`ROUTES`]) and its matcher: method and path template (API Gateway's
//! route-key syntax), the operation each runs, and whether it needs the admin claim.

use http::Method;
use std::collections::HashMap;

use super::errors::{self, Failure};

/// What a route does; each [`RouteSpec`] names one. Grouped by the resource it acts on, one
/// handler file per group (`actions.rs`, `intents.rs`, ...), each matching its own routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Operation {
    Actions(ActionRoute),
    Intents(IntentRoute),
    Seats(SeatRoute),
    Flights(FlightRoute),
    Holds(HoldRoute),
    Waitlist(WaitlistRoute),
    Admin(AdminRoute),
}

/// The caller's upstream credential, prepared actions and their confirms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ActionRoute {
    PutCredential,
    Prepare,
    Confirm,
}

/// Waits and the caller's intents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IntentRoute {
    RegisterWait,
    Get,
    Cancel,
}

/// Seat readings, one seat or a room's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SeatRoute {
    Seat,
    Room,
}

/// Flights, their bookings and cancels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FlightRoute {
    Create,
    Get,
    Book,
    MyBookings,
    CancelBooking,
}

/// Checkout holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HoldRoute {
    Create,
    Get,
    Confirm,
    Release,
    Extend,
    Mine,
}

/// A flight's waiting list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WaitlistRoute {
    Join,
    Get,
    Leave,
}

/// The operator's reads and actions (every one behind the admin claim).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AdminRoute {
    Intent,
    Seat,
    Waitlist,
    FlightHolds,
    Queues,
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
    route(
        Method::PUT,
        "/me/credential",
        Operation::Actions(ActionRoute::PutCredential),
    ),
    route(
        Method::POST,
        "/actions",
        Operation::Actions(ActionRoute::Prepare),
    ),
    route(
        Method::POST,
        "/actions/{action_id}/confirm",
        Operation::Actions(ActionRoute::Confirm),
    ),
    route(
        Method::POST,
        "/waits",
        Operation::Intents(IntentRoute::RegisterWait),
    ),
    route(
        Method::GET,
        "/intents/{intent_id}",
        Operation::Intents(IntentRoute::Get),
    ),
    route(
        Method::DELETE,
        "/intents/{intent_id}",
        Operation::Intents(IntentRoute::Cancel),
    ),
    route(
        Method::GET,
        "/seats/{seat_id}",
        Operation::Seats(SeatRoute::Seat),
    ),
    route(
        Method::GET,
        "/rooms/{room_id}/seats",
        Operation::Seats(SeatRoute::Room),
    ),
    admin_route(
        Method::POST,
        "/admin/flights",
        Operation::Flights(FlightRoute::Create),
    ),
    route(
        Method::GET,
        "/flights/{flight_id}",
        Operation::Flights(FlightRoute::Get),
    ),
    route(
        Method::POST,
        "/flights/{flight_id}/bookings",
        Operation::Flights(FlightRoute::Book),
    ),
    route(
        Method::GET,
        "/me/bookings",
        Operation::Flights(FlightRoute::MyBookings),
    ),
    route(
        Method::DELETE,
        "/flights/{flight_id}/bookings/{booking_id}",
        Operation::Flights(FlightRoute::CancelBooking),
    ),
    route(
        Method::POST,
        "/flights/{flight_id}/holds",
        Operation::Holds(HoldRoute::Create),
    ),
    route(
        Method::GET,
        "/flights/{flight_id}/holds/{hold_id}",
        Operation::Holds(HoldRoute::Get),
    ),
    route(
        Method::POST,
        "/flights/{flight_id}/holds/{hold_id}/confirm",
        Operation::Holds(HoldRoute::Confirm),
    ),
    route(
        Method::DELETE,
        "/flights/{flight_id}/holds/{hold_id}",
        Operation::Holds(HoldRoute::Release),
    ),
    route(
        Method::POST,
        "/flights/{flight_id}/holds/{hold_id}/extend",
        Operation::Holds(HoldRoute::Extend),
    ),
    route(Method::GET, "/me/holds", Operation::Holds(HoldRoute::Mine)),
    route(
        Method::POST,
        "/flights/{flight_id}/waitlist",
        Operation::Waitlist(WaitlistRoute::Join),
    ),
    route(
        Method::GET,
        "/flights/{flight_id}/waitlist/{entry_id}",
        Operation::Waitlist(WaitlistRoute::Get),
    ),
    route(
        Method::DELETE,
        "/flights/{flight_id}/waitlist/{entry_id}",
        Operation::Waitlist(WaitlistRoute::Leave),
    ),
    admin_route(
        Method::GET,
        "/admin/intents/{intent_id}",
        Operation::Admin(AdminRoute::Intent),
    ),
    admin_route(
        Method::GET,
        "/admin/seats/{seat_id}",
        Operation::Admin(AdminRoute::Seat),
    ),
    admin_route(
        Method::GET,
        "/admin/flights/{flight_id}/waitlist",
        Operation::Admin(AdminRoute::Waitlist),
    ),
    admin_route(
        Method::GET,
        "/admin/flights/{flight_id}/holds",
        Operation::Admin(AdminRoute::FlightHolds),
    ),
    admin_route(
        Method::GET,
        "/admin/queues",
        Operation::Admin(AdminRoute::Queues),
    ),
    admin_route(
        Method::POST,
        "/admin/reconcile",
        Operation::Admin(AdminRoute::Reconcile),
    ),
    admin_route(
        Method::POST,
        "/admin/dead-letters/redrive",
        Operation::Admin(AdminRoute::Redrive),
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
