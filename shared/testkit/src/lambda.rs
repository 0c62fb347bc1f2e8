//! A stand-in for the Lambda `Invoke` API on loopback, for the one place the code invokes a
//! function (the API's `POST /admin/reconcile` runs the reaper function's pass). No emulator
//! here runs functions without Docker, so this serves the wire protocol the SDK speaks
//! (`POST /2015-03-31/functions/{name}/invocations`) and answers with a handler the test gives:
//! the reaper's real handler, run against the test's store.
//!
//! What it answers as Lambda does: the handler's JSON with 200; a handler error as a 200 with
//! `X-Amz-Function-Error: Unhandled` and the error as the payload; an unknown function as a 404
//! `ResourceNotFoundException`.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A function's code: the invocation payload in, its answer or its error out.
pub type Handler = Arc<dyn Fn(Value) -> BoxFuture<'static, Result<Value, String>> + Send + Sync>;

#[derive(Clone, Default)]
struct Functions {
    handlers: HashMap<String, Handler>,
    invocations: Arc<Mutex<Vec<(String, Value)>>>,
}

/// The fake Lambda service; stops when dropped.
pub struct FakeLambda {
    endpoint: String,
    invocations: Arc<Mutex<Vec<(String, Value)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeLambda {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn invoke(
    State(functions): State<Functions>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let payload: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    functions
        .invocations
        .lock()
        .unwrap()
        .push((name.clone(), payload.clone()));
    let Some(handler) = functions.handlers.get(&name) else {
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-amzn-errortype",
            HeaderValue::from_static("ResourceNotFoundException"),
        );
        let body = json!({ "Type": "User", "message": format!("Function not found: {name}") });
        return (StatusCode::NOT_FOUND, headers, body.to_string()).into_response();
    };
    match handler(payload).await {
        Ok(answer) => (StatusCode::OK, answer.to_string()).into_response(),
        Err(message) => {
            let mut headers = HeaderMap::new();
            headers.insert(
                "x-amz-function-error",
                HeaderValue::from_static("Unhandled"),
            );
            let body = json!({ "errorType": "Error", "errorMessage": message });
            (StatusCode::OK, headers, body.to_string()).into_response()
        }
    }
}

impl FakeLambda {
    /// Serves `functions` (name, handler) on an ephemeral loopback port.
    pub async fn start(functions: Vec<(&str, Handler)>) -> FakeLambda {
        let state = Functions {
            handlers: functions
                .into_iter()
                .map(|(name, handler)| (name.to_owned(), handler))
                .collect(),
            invocations: Arc::default(),
        };
        let invocations = state.invocations.clone();
        let app = Router::new()
            .route("/2015-03-31/functions/{name}/invocations", post(invoke))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding the fake Lambda service");
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeLambda {
            endpoint,
            invocations,
            task,
        }
    }

    /// A Lambda client of `sdk` (credentials, region) sending to this service.
    pub fn client(&self, sdk: &aws_config::SdkConfig) -> aws_sdk_lambda::Client {
        aws_sdk_lambda::Client::from_conf(self.config(sdk).build())
    }

    /// The client configuration, for a test that adds an interceptor.
    pub fn config(&self, sdk: &aws_config::SdkConfig) -> aws_sdk_lambda::config::Builder {
        aws_sdk_lambda::config::Builder::from(sdk).endpoint_url(&self.endpoint)
    }

    /// Every invocation so far: the function's name and the payload.
    pub fn invocations(&self) -> Vec<(String, Value)> {
        self.invocations.lock().unwrap().clone()
    }
}
