//! What every fault test here shares: `Rig` (a table of its own, the real `DynamoStore` on it, the
//! same store behind `FaultyStore`, a manual clock and the upstream simulator), API Gateway requests
//! through the HTTP handler, and the queue message for an intent.
//!
//! Holds no test of its own.

use aws_lambda_events::event::apigw::{
    ApiGatewayRequestAuthorizer, ApiGatewayRequestAuthorizerJwtDescription,
    ApiGatewayV2httpRequestContext,
};
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::request::RequestContext;
use lambda_http::{Body, RequestExt};
use seatgate::adapters::upstream_http::HttpUpstream;
use seatgate::config::Timing;
use seatgate::domain::{ActionKind, Intent, IntentId, Millis, SeatId, SeatMessage, Secret, UserId};
use seatgate::handlers::http;
use seatgate::ports::{Clock, Credentials, Intents, Upstream};
use seatgate::service::{ApiService, Ports, QueueRecord, Reaper, Services, Worker};
use seatgate_aws::dynamodb::{DynamoStore, create_table, delete_table};
use seatgate_testkit::FaultyStore;
use seatgate_testkit::ManualClock;
use seatgate_testkit::setup::{self};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use upstream_sim::Simulator;

/// `service::with_retry`'s budget.
pub(crate) const ATTEMPTS: u64 = 4;

/// A table of its own, the real store on it, the same store behind `FaultyStore`, a manual
/// clock and the upstream simulator.
pub(crate) struct Rig {
    client: aws_sdk_dynamodb::Client,
    table: String,
    pub(crate) timing: Timing,
    pub(crate) clock: Arc<ManualClock>,
    pub(crate) sim: Simulator,
    pub(crate) upstream: Arc<HttpUpstream>,
    /// The store without faults (setting up state, reading it back). Shares its request
    /// counter with `faulty`'s inner store.
    pub(crate) plain: Arc<DynamoStore>,
    pub(crate) faulty: Arc<FaultyStore<DynamoStore>>,
}

pub(crate) async fn rig() -> Rig {
    let client = setup::dynamodb().await;
    let table = setup::unique("seatgate-faults-");
    create_table(&client, &table).await.expect("create_table");
    let store =
        DynamoStore::new(&client, &table).with_credentials_key(setup::credentials_key().await);
    let timing = Timing::aws();
    let setup::Upstream {
        sim,
        http: upstream,
        ..
    } = setup::upstream(&timing).await;
    Rig {
        client,
        table,
        timing,
        clock: Arc::new(ManualClock::new(Millis::now())),
        sim,
        upstream,
        faulty: Arc::new(FaultyStore::new(store.clone())),
        plain: Arc::new(store),
    }
}

impl Rig {
    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    fn services_on<S>(&self, store: Arc<S>, upstream: Arc<dyn Upstream>) -> Services
    where
        S: seatgate::ports::Store + 'static,
    {
        Services::new(
            Ports::from_store(store, upstream, self.clock()),
            self.timing.clone(),
        )
    }

    fn api_on(&self, store: Arc<FaultyStore<DynamoStore>>) -> ApiService {
        self.services_on(store, self.upstream.clone()).api()
    }

    pub(crate) fn api(&self) -> ApiService {
        self.api_on(self.faulty.clone())
    }

    pub(crate) fn plain_api(&self) -> ApiService {
        self.services_on(self.plain.clone(), self.upstream.clone())
            .api()
    }

    pub(crate) fn worker(&self, intents: Arc<dyn Intents>, upstream: Arc<dyn Upstream>) -> Worker {
        let ports = Ports {
            intents,
            ..Ports::from_store(self.faulty.clone(), upstream, self.clock())
        };
        Services::new(ports, self.timing.clone()).worker()
    }

    pub(crate) fn reaper(&self) -> Reaper {
        self.services_on(self.faulty.clone(), self.upstream.clone())
            .reaper()
    }

    pub(crate) async fn enrol(&self, name: &str) -> UserId {
        let user = UserId::parse(name).unwrap();
        self.sim.register_user(name, &format!("cred-{name}"));
        self.plain
            .put_credential(&user, &Secret::new(format!("cred-{name}")))
            .await
            .unwrap();
        user
    }

    pub(crate) async fn requested(&self, user: &UserId, seat: &str) -> Intent {
        let api = self.plain_api();
        let action = api
            .prepare(user, ActionKind::ReserveSeat, SeatId::parse(seat).unwrap())
            .await
            .unwrap();
        api.confirm(user, &action.action_id).await.unwrap().intent
    }

    pub(crate) async fn intent(&self, id: &IntentId) -> Intent {
        self.plain.get_intent(id).await.unwrap().unwrap()
    }

    /// Every item's `pk`, straight from the table.
    pub(crate) async fn keys(&self) -> Vec<String> {
        let out = self
            .client
            .scan()
            .table_name(&self.table)
            .consistent_read(true)
            .send()
            .await
            .unwrap();
        // The per-user rate limit's window counters are written before the request they count,
        // whatever becomes of it; they are not the state these cases check.
        let counter = |i: &std::collections::HashMap<String, AttributeValue>| matches!(i.get("sk"), Some(AttributeValue::S(sk)) if sk.starts_with("RATE#"));
        out.items()
            .iter()
            .filter(|i| !counter(i))
            .filter_map(|i| match i.get("pk") {
                Some(AttributeValue::S(pk)) => Some(pk.clone()),
                _ => None,
            })
            .collect()
    }

    /// DynamoDB requests of one operation that reached the emulator so far.
    pub(crate) fn sent(&self, operation: &str) -> u64 {
        self.plain.requests().get(operation)
    }

    pub(crate) async fn finish(self) {
        let _ = delete_table(&self.client, &self.table).await;
    }
}

/// An API Gateway HTTP API (v2) request as the Lambda runtime hands it to the api function, with
/// the JWT authorizer's claims in the request context.
pub(crate) fn request(
    method: &str,
    path: &str,
    body: Option<&str>,
    sub: &str,
) -> lambda_http::Request {
    let method: lambda_http::http::Method = method.parse().unwrap();
    let mut context = ApiGatewayV2httpRequestContext::default();
    context.route_key = Some(format!("{method} {path}"));
    context.stage = Some("$default".into());
    context.http.method = method.clone();
    context.http.path = Some(path.into());
    let mut jwt = ApiGatewayRequestAuthorizerJwtDescription::default();
    jwt.claims = HashMap::from([("sub".to_owned(), sub.to_owned())]);
    let mut authorizer = ApiGatewayRequestAuthorizer::default();
    authorizer.jwt = Some(jwt);
    context.authorizer = Some(authorizer);
    let mut req =
        lambda_http::http::Request::new(body.map_or(Body::Empty, |b| Body::Text(b.into())));
    *req.method_mut() = method;
    *req.uri_mut() = path.parse().unwrap();
    req.with_request_context(RequestContext::ApiGatewayV2(context))
}

pub(crate) fn json_body(response: &lambda_http::Response<Body>) -> Value {
    match response.body() {
        Body::Text(t) => serde_json::from_str(t).unwrap(),
        Body::Binary(b) => serde_json::from_slice(b).unwrap(),
        _ => Value::Null,
    }
}

/// `POST /actions` through the handler (no faults armed): the action id.
pub(crate) async fn prepare(api: &ApiService, sub: &str, seat: &str) -> String {
    let body = format!(r#"{{"kind":"reserve_seat","seat_id":"{seat}"}}"#);
    let response = http::handle(api, request("POST", "/actions", Some(&body), sub)).await;
    assert_eq!(response.status(), 201);
    json_body(&response)["action_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

pub(crate) async fn confirm(
    api: &ApiService,
    sub: &str,
    action_id: &str,
) -> lambda_http::Response<Body> {
    let path = format!("/actions/{action_id}/confirm");
    http::handle(api, request("POST", &path, None, sub)).await
}

pub(crate) fn message(intent: &Intent) -> QueueRecord {
    QueueRecord {
        message_id: format!("m-{}", intent.intent_id),
        group_id: intent.seat_id.to_string(),
        body: serde_json::to_string(&SeatMessage::for_intent(intent)).unwrap(),
        receipt: String::new(),
    }
}
