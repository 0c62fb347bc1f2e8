//! Where the runner may serve `POST /dev/token`.
//!
//! That route stands in for an identity provider: it signs a token for any `sub`, the admin
//! claim included, for whoever asks. On a developer's loopback interface that is the point; on
//! an address others can reach it hands out the system, and with `--backend aws` against real
//! AWS it would hand out a deployed stack's data. So the runner refuses to start in either case
//! unless `--insecure-dev-tokens` says the operator means it. The check is a pure function of
//! the listen address and the endpoints the AWS SDK would use, so it is tested without sockets.

use crate::BackendKind;
use std::net::{IpAddr, SocketAddr};
use thiserror::Error;

/// The endpoint variables the AWS backend reads, each falling back to `AWS_ENDPOINT_URL`, and
/// with neither set, to the real AWS endpoint of the region.
pub const AWS_ENDPOINT_VARIABLES: [&str; 4] = [
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_DYNAMODB_STREAMS",
    "AWS_ENDPOINT_URL_SQS",
    "AWS_ENDPOINT_URL_KMS",
];

/// Why dev tokens may not be served.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DevTokenRefusal {
    #[error(
        "refusing to serve POST /dev/token (it issues any token, admin included) on {0}, which \
         is not a loopback address: listen on 127.0.0.1, or pass --insecure-dev-tokens if every \
         client that can reach it may be anyone"
    )]
    NotLoopback(SocketAddr),
    #[error(
        "refusing to serve POST /dev/token (it issues any token, admin included) with the AWS \
         backend on {endpoint} ({variable}), which is not a loopback emulator: tokens from it \
         would reach real data; use an identity provider, or pass --insecure-dev-tokens"
    )]
    RemoteAws { variable: String, endpoint: String },
}

/// Whether dev tokens may be served: `Ok` on loopback with local endpoints, or when
/// `insecure` overrides. `env` reads an environment variable (the process's, in the runner).
pub fn check_dev_tokens(
    listen: SocketAddr,
    backend: BackendKind,
    insecure: bool,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(), DevTokenRefusal> {
    if insecure {
        return Ok(());
    }
    if !listen.ip().is_loopback() {
        return Err(DevTokenRefusal::NotLoopback(listen));
    }
    if backend == BackendKind::Aws {
        for variable in AWS_ENDPOINT_VARIABLES {
            let set = |v: &str| env(v).filter(|u| !u.trim().is_empty());
            let endpoint = set(variable).or_else(|| set("AWS_ENDPOINT_URL"));
            match endpoint {
                Some(url) if is_loopback_url(&url) => {}
                other => {
                    return Err(DevTokenRefusal::RemoteAws {
                        variable: variable.to_owned(),
                        endpoint: other.unwrap_or_else(|| "the AWS default endpoint".to_owned()),
                    });
                }
            }
        }
    }
    Ok(())
}

/// `localhost` or a loopback IP (v4 or v6) as the URL's host.
fn is_loopback_url(url: &str) -> bool {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return false;
    };
    let Some(host) = uri.host() else {
        return false;
    };
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    const EMULATORS: [(&str, &str); 3] = [
        ("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8765"),
        ("AWS_ENDPOINT_URL_DYNAMODB_STREAMS", "http://localhost:8765"),
        ("AWS_ENDPOINT_URL", "http://[::1]:9766"),
    ];

    #[test]
    fn loopback_is_served() {
        for listen in ["127.0.0.1:3000", "[::1]:3000", "127.0.0.2:0"] {
            assert_eq!(
                check_dev_tokens(addr(listen), BackendKind::Embedded, false, env(&[])),
                Ok(())
            );
        }
        assert_eq!(
            check_dev_tokens(
                addr("127.0.0.1:3000"),
                BackendKind::Aws,
                false,
                env(&EMULATORS)
            ),
            Ok(())
        );
    }

    #[test]
    fn a_reachable_address_is_refused_unless_insecure() {
        for listen in ["0.0.0.0:3000", "[::]:3000", "10.0.0.5:3000"] {
            assert_eq!(
                check_dev_tokens(addr(listen), BackendKind::Embedded, false, env(&[])),
                Err(DevTokenRefusal::NotLoopback(addr(listen)))
            );
            assert_eq!(
                check_dev_tokens(addr(listen), BackendKind::Embedded, true, env(&[])),
                Ok(())
            );
        }
    }

    #[test]
    fn the_aws_backend_on_real_or_remote_endpoints_is_refused_unless_insecure() {
        let listen = addr("127.0.0.1:3000");
        let refused = check_dev_tokens(listen, BackendKind::Aws, false, env(&[]));
        assert_eq!(
            refused,
            Err(DevTokenRefusal::RemoteAws {
                variable: "AWS_ENDPOINT_URL_DYNAMODB".into(),
                endpoint: "the AWS default endpoint".into(),
            })
        );
        let mut remote = EMULATORS.to_vec();
        remote.push((
            "AWS_ENDPOINT_URL_SQS",
            "https://sqs.eu-west-1.amazonaws.com",
        ));
        assert_eq!(
            check_dev_tokens(listen, BackendKind::Aws, false, env(&remote)),
            Err(DevTokenRefusal::RemoteAws {
                variable: "AWS_ENDPOINT_URL_SQS".into(),
                endpoint: "https://sqs.eu-west-1.amazonaws.com".into(),
            })
        );
        assert_eq!(
            check_dev_tokens(listen, BackendKind::Aws, true, env(&[])),
            Ok(())
        );
    }

    #[test]
    fn the_message_says_how_to_proceed_and_carries_no_secret() {
        let e = DevTokenRefusal::NotLoopback(addr("0.0.0.0:3000")).to_string();
        assert!(
            e.contains("--insecure-dev-tokens") && e.contains("127.0.0.1"),
            "{e}"
        );
    }
}
