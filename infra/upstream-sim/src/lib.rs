//! A fragile, non-idempotent stand-in for the upstream seat system ("Pyxis").
//!
//! Local runs, the contract and end-to-end tests, and the benchmarks all need an upstream that
//! behaves like the real one at its worst: a second write for the same seat is a `409`, not a
//! replay; it can be slow, fail at random, go down for a while, or commit a reservation and never
//! answer. This crate is that upstream, as a library (so tests run it in-process on a random port
//! and poke it through direct helpers) and as the `upstream-sim` binary (for the local runner and
//! scripts).
//!
//! HTTP surface (all JSON):
//! - `GET /api/seats/{seat_id}` -> `{"seat_id","occupied"}`; no credential needed.
//! - `POST /api/reservations` `{"seat_id"}` with `Authorization: Bearer <credential>` ->
//!   `201 {"charge_id","seat_id"}`; seat taken (even by the caller) `409 seat_taken`; caller holds
//!   another seat `409 already_charged`; bad credential `401 unauthorized`; bad body `400`.
//! - `GET /api/rooms/{room_id}/seats` -> `{"room_id","seats":[{"seat_id","occupied"}]}` in one
//!   call, or `404 room_not_found`; no credential needed.
//! - `GET /api/charge` (bearer) -> `200 {"charge_id","seat_id"}` or `404 no_charge`.
//! - `DELETE /api/reservations/current` (bearer) -> `204` (seat freed) or `404 no_charge`.
//! - `GET /__admin/stats`, `POST /__admin/faults` (see [`Faults`]), `POST /__admin/reset` (clears
//!   seats, charges, faults, counts, the call log, rooms *and users*), `POST /__admin/users`,
//!   `POST /__admin/rooms` `{"rooms":[{"room_id","seats":[...]}]}`, and
//!   `GET /__admin/calls?since_ms=` (each call's arrival time and route, for timelines).
//!
//! Call counts include requests refused by fault injection and those answered 401/409, because
//! what tests and benchmarks measure is how many requests reached the upstream.

mod conn;
mod http;
mod world;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::net::TcpListener;

pub mod judge;
pub use world::{CallRecord, Faults, RetryAfterForm, Stats};

use conn::{ConnectionKill, KillableListener};
use world::World;

/// The simulated upstream. Cheap to clone; clones share one state.
#[derive(Clone, Default)]
pub struct Simulator {
    world: Arc<Mutex<World>>,
}

impl Simulator {
    pub fn new() -> Self {
        Self::default()
    }

    /// All routes, with this simulator as state.
    ///
    /// Served by something other than [`Simulator::spawn`] / [`Simulator::run`], everything works
    /// except that a dropped response cannot abort its connection: the request then never gets an
    /// answer and the caller's own timeout ends it.
    pub fn router(&self) -> axum::Router {
        http::router(self.clone())
    }

    /// Binds `addr` (port 0 picks a free one), serves on the current tokio runtime until the
    /// runtime shuts down, and returns the bound address.
    pub async fn spawn(self, addr: SocketAddr) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind(addr).await?;
        let bound = listener.local_addr()?;
        tokio::spawn(async move {
            if let Err(err) = self.run(listener, std::future::pending()).await {
                tracing::error!(error = %err, "upstream-sim server failed");
            }
        });
        Ok(bound)
    }

    /// Serves on an already bound listener until `shutdown` completes, then drains in-flight
    /// requests. This is what the binary uses; [`Simulator::spawn`] is the fire-and-forget form.
    pub async fn run(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let app = self
            .router()
            .into_make_service_with_connect_info::<ConnectionKill>();
        axum::serve(KillableListener::new(listener), app)
            .with_graceful_shutdown(shutdown)
            .await
    }

    /// Same as `POST /__admin/users` for one user: the credential is the only one the user's
    /// requests are accepted with from now on.
    pub fn register_user(&self, user_id: &str, credential: &str) {
        self.lock().register(user_id, credential);
    }

    /// Same as `GET /__admin/stats`.
    pub fn stats(&self) -> Stats {
        self.lock().stats()
    }

    /// Same as `POST /__admin/faults`: replaces all faults; an outage window starts now.
    pub fn set_faults(&self, faults: Faults) {
        self.lock().set_faults(faults, Instant::now());
    }

    /// Same as `POST /__admin/reset`: seats, charges, faults, counts and users are all cleared.
    pub fn reset(&self) {
        self.lock().reset();
    }

    /// Same as `POST /__admin/rooms` for one room.
    pub fn put_room(&self, room_id: &str, seats: &[&str]) {
        self.lock()
            .put_room(room_id, seats.iter().map(|s| s.to_string()).collect());
    }

    /// Whether a room of this id was registered. Not counted, not subject to faults (the local
    /// runner asks it before seeding its demo room, and must not show up in the call counts).
    pub fn has_room(&self, room_id: &str) -> bool {
        self.lock().room(room_id).is_some()
    }

    /// Same as `GET /__admin/calls?since_ms=`.
    pub fn calls_since(&self, since_ms: u64) -> Vec<CallRecord> {
        self.lock().calls_since(since_ms)
    }

    /// Frees the seat `user_id` holds, as that user leaving would (`DELETE
    /// /api/reservations/current`), without counting a call. `true` if they held one.
    pub fn release(&self, user_id: &str) -> bool {
        self.lock().release(user_id).is_some()
    }

    /// The user holding `seat_id`, if any. Not counted, not subject to faults: it is the test's
    /// view of the truth, not a request to the upstream.
    pub fn occupant(&self, seat_id: &str) -> Option<String> {
        self.lock().occupant(seat_id)
    }

    /// Every mutation is a single short step that leaves `World` consistent, so a panic elsewhere
    /// while holding the lock cannot leave half a reservation behind; recovering from poison keeps
    /// a long benchmark's upstream alive.
    fn lock(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
