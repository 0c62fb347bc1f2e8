//! `docs/openapi.yaml` describes exactly what is served: its operations are the handler's route
//! table (`ROUTES`) plus the runner's own `POST /dev/token` and `GET /__metrics`, every path
//! parameter is declared, and the error codes it lists are the ones the handler and the gateway
//! can answer.
//!
//! The document is what clients and the fuzzer (`scripts/schemathesis.sh`) trust, so a route
//! added, removed or renamed on either side must fail here, not drift. YAML is read with
//! yaml-rust2, the parser the template test already uses.

use seatgate::handlers::http::ROUTES;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use yaml_rust2::{Yaml, YamlLoader};

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "patch", "head", "options", "trace",
];

/// The runner's own route, outside the API (`infra/local/src/gateway.rs`).
const DEV_TOKEN: (&str, &str) = ("POST", "/dev/token");
const METRICS: (&str, &str) = ("GET", "/__metrics");
/// What only the local runner serves: unauthenticated, and tagged `local` in the document.
const LOCAL_ONLY: [(&str, &str); 2] = [DEV_TOKEN, METRICS];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn document() -> Yaml {
    let path = repo().join("docs/openapi.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut docs = YamlLoader::load_from_str(&text).expect("docs/openapi.yaml is YAML");
    assert_eq!(docs.len(), 1, "one document");
    docs.remove(0)
}

fn str_of(y: &Yaml) -> &str {
    y.as_str()
        .unwrap_or_else(|| panic!("expected a string, got {y:?}"))
}

/// Every operation: `(METHOD, path template)` -> the operation object, with the path item's own
/// parameters.
fn operations(doc: &Yaml) -> BTreeMap<(String, String), (Yaml, Vec<Yaml>)> {
    let paths = doc["paths"].as_hash().expect("paths");
    let mut ops = BTreeMap::new();
    for (path, item) in paths {
        let item = item.as_hash().expect("a path item");
        let shared = item
            .get(&Yaml::from_str("parameters"))
            .and_then(Yaml::as_vec)
            .cloned()
            .unwrap_or_default();
        for (key, op) in item {
            let key = str_of(key);
            if METHODS.contains(&key) {
                let previous = ops.insert(
                    (key.to_uppercase(), str_of(path).to_owned()),
                    (op.clone(), shared.clone()),
                );
                assert!(previous.is_none());
            } else {
                assert!(
                    ["parameters", "summary", "description"].contains(&key),
                    "{path:?}: unexpected key {key}"
                );
            }
        }
    }
    ops
}

/// A parameter object, through its `$ref` into `components/parameters` if it has one.
fn resolve<'a>(doc: &'a Yaml, p: &'a Yaml) -> &'a Yaml {
    match p["$ref"].as_str() {
        Some(r) => {
            let name = r
                .strip_prefix("#/components/parameters/")
                .unwrap_or_else(|| panic!("parameter $ref outside components: {r}"));
            let target = &doc["components"]["parameters"][name];
            assert!(!target.is_badvalue(), "dangling $ref {r}");
            target
        }
        None => p,
    }
}

fn served() -> BTreeSet<(String, String)> {
    let mut served: BTreeSet<_> = ROUTES
        .iter()
        .map(|r| (r.method.as_str().to_owned(), r.path.to_owned()))
        .collect();
    assert_eq!(served.len(), ROUTES.len(), "ROUTES has no duplicates");
    for (method, path) in LOCAL_ONLY {
        served.insert((method.to_owned(), path.to_owned()));
    }
    served
}

#[test]
fn the_document_has_exactly_the_served_operations() {
    let doc = document();
    assert_eq!(doc["openapi"].as_str(), Some("3.1.0"));
    let documented: BTreeSet<_> = operations(&doc).into_keys().collect();
    let served = served();
    let undocumented: Vec<_> = served.difference(&documented).collect();
    let unserved: Vec<_> = documented.difference(&served).collect();
    assert!(
        undocumented.is_empty() && unserved.is_empty(),
        "docs/openapi.yaml and the route table disagree.\n\
         served but not documented: {undocumented:?}\n\
         documented but not served: {unserved:?}\n\
         (ROUTES in shared/core/src/handlers/http/routes.rs, plus the runner's {LOCAL_ONLY:?})"
    );
}

#[test]
fn every_path_parameter_is_declared_and_every_operation_says_who_may_call_it() {
    let doc = document();
    assert!(
        !doc["components"]["securitySchemes"]["bearer"].is_badvalue(),
        "a bearer scheme"
    );
    assert_eq!(
        doc["security"][0]["bearer"].as_vec().map(Vec::len),
        Some(0),
        "bearer is the default for every operation"
    );
    let mut ids = BTreeSet::new();
    for ((method, path), (op, shared)) in operations(&doc) {
        let label = format!("{method} {path}");
        let id = op["operationId"]
            .as_str()
            .unwrap_or_else(|| panic!("{label}: no operationId"));
        assert!(ids.insert(id.to_owned()), "{label}: operationId {id} twice");

        let in_template: BTreeSet<&str> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .collect();
        let own = op["parameters"].as_vec().cloned().unwrap_or_default();
        let declared: BTreeSet<&str> = shared
            .iter()
            .chain(own.iter())
            .map(|p| resolve(&doc, p))
            .filter(|p| p["in"].as_str() == Some("path"))
            .map(|p| {
                assert_eq!(p["required"].as_bool(), Some(true), "{label}: path params");
                str_of(&p["name"])
            })
            .collect();
        assert_eq!(declared, in_template, "{label}: path parameters");

        let responses = op["responses"].as_hash().expect("responses");
        let has = |status: &str| responses.contains_key(&Yaml::String(status.to_owned()));
        if LOCAL_ONLY.contains(&(method.as_str(), path.as_str())) {
            // Unauthenticated: /dev/token is how a token is had in the first place.
            assert_eq!(op["security"].as_vec().map(Vec::len), Some(0), "{label}");
            assert!(
                op["tags"]
                    .as_vec()
                    .is_some_and(|t| t.contains(&Yaml::from_str("local"))),
                "{label} is tagged local"
            );
            assert!(!has("401"), "{label} takes no token");
        } else {
            assert!(op["security"].is_badvalue(), "{label}: the default bearer");
            assert!(has("401"), "{label}: the authorizer's 401");
            assert!(has("500"), "{label}: documents 500 internal");
        }
        assert!(
            responses.keys().any(|s| str_of(s).starts_with('2')),
            "{label}: a success"
        );
    }
}

/// Every `error` code the document lists (the `const`/`enum` of an error body's `error`).
fn documented_codes(node: &Yaml, out: &mut BTreeSet<String>) {
    match node {
        Yaml::Hash(h) => {
            for (k, v) in h {
                if k.as_str() == Some("error") {
                    if let Some(c) = v["const"].as_str() {
                        out.insert(c.to_owned());
                    }
                    for c in v["enum"].as_vec().into_iter().flatten() {
                        out.insert(str_of(c).to_owned());
                    }
                }
                documented_codes(v, out);
            }
        }
        Yaml::Array(a) => a.iter().for_each(|v| documented_codes(v, out)),
        _ => {}
    }
}

/// The codes a source file answers with: the literal right after a status in
/// `Failure::new(StatusCode::X, "code", ..)`, and the `=> "invalid_..."` arms that pick a code
/// for a refused id.
fn answered_codes(source: &str, out: &mut BTreeSet<String>) {
    let compact: String = source.chars().filter(|c| !c.is_whitespace()).collect();
    let literal_after = |rest: &str| -> Option<String> {
        let rest = rest.strip_prefix('"')?;
        let code = &rest[..rest.find('"')?];
        (!code.is_empty() && code.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            .then(|| code.to_owned())
    };
    for (i, _) in compact.match_indices("Failure::new(StatusCode::") {
        let rest = &compact[i + "Failure::new(StatusCode::".len()..];
        let Some(comma) = rest.find(',') else {
            continue;
        };
        out.extend(literal_after(&rest[comma + 1..]));
    }
    for (i, _) in compact.match_indices("=>\"invalid_") {
        out.extend(literal_after(&compact[i + 2..]));
    }
}

#[test]
fn the_documented_error_codes_are_the_ones_answered() {
    let mut documented = BTreeSet::new();
    documented_codes(&document(), &mut documented);
    let mut answered = BTreeSet::new();
    for file in [
        "shared/core/src/handlers/http/errors.rs",
        "shared/core/src/handlers/http/bodies.rs",
        "shared/core/src/handlers/http/dispatch.rs",
        "infra/local/src/gateway.rs",
    ] {
        let source = std::fs::read_to_string(repo().join(file)).unwrap();
        answered_codes(&source, &mut answered);
    }
    // Sanity: the scan sees codes from each kind of construction.
    for code in ["unauthorized", "invalid_seat_id", "sold_out", "internal"] {
        assert!(answered.contains(code), "the source scan missed {code}");
    }
    // 404 route_not_found and 405 method_not_allowed are described once for the whole API
    // (info.description); the 405 cannot happen on a documented method.
    let api_wide = BTreeSet::from(["method_not_allowed".to_owned()]);
    let undocumented: Vec<_> = answered
        .difference(&documented)
        .filter(|c| !api_wide.contains(*c))
        .collect();
    let unanswered: Vec<_> = documented.difference(&answered).collect();
    assert!(
        undocumented.is_empty() && unanswered.is_empty(),
        "error codes disagree.\nanswered but not in docs/openapi.yaml: {undocumented:?}\n\
         in docs/openapi.yaml but never answered: {unanswered:?}"
    );
}

#[tokio::test]
async fn the_runner_serves_its_own_routes_as_documented() {
    let stack = seatgate_local::start(seatgate_local::RunnerConfig::ephemeral(None))
        .await
        .expect("stack starts");
    let http = reqwest::Client::new();
    let resp = http
        .post(format!("{}{}", stack.api_url, DEV_TOKEN.1))
        .json(&serde_json::json!({"sub": "u1", "admin": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::OK);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert!(body["token"].as_str().is_some_and(|t| !t.is_empty()));
    let resp = http
        .get(format!("{}{}", stack.api_url, METRICS.1))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        reqwest::StatusCode::OK,
        "{:?}",
        resp.headers()
    );
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    // Neither is an API route: the handler itself does not know them.
    for (method, path) in LOCAL_ONLY {
        let method = http::Method::from_bytes(method.as_bytes()).unwrap();
        assert!(seatgate::handlers::http::match_route(&method, path).is_err());
    }
    stack.shutdown().await;
}
