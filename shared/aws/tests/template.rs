//! `template.yaml` agrees with the code, and every function's role grants exactly what that
//! function uses.
//!
//! - Timing: `Mappings.Timing.Aws` is `Timing::aws()` field by field, the `TIMING_*` variables the
//!   template passes are the ones `config.rs` reads, and `Timing::from_env` over exactly those
//!   values gives back `Timing::aws()` (checked in a child process, so no test mutates this
//!   process's environment).
//! - The seat queue is what `QueueDefinition::for_timing(&Timing::aws())` creates; the table is
//!   what `seatgate_aws::dynamodb::schema::TABLE` describes; function timeouts keep the lease
//!   invariant.
//! - IAM, by recording rather than by hand: each function's service runs its real flows against
//!   DynamoDB Local and moto through SDK clients carrying a recording interceptor, which logs
//!   every request's operation and body. Those are mapped to IAM actions and resources (a
//!   `TransactWriteItems` to the per-item actions of the items it carries; DynamoDB has no IAM
//!   action for the transaction itself) and compared with the role's statements:
//!   `granted == used ∪ allow-list`, where the allow-list is what the Lambda service and runtime
//!   do with the role on the function's behalf (event source mappings, logs).
//!
//! The recording test needs the emulators: `eval "$(scripts/emulators.sh start)"`. Without them it
//! fails saying so; it is never skipped.
//!
//! Layout, one file per concern under `template/`, declared below in an inline `mod template`
//! (so this file stays the binary's root: `cargo test -p seatgate-aws --test template`):
//!
//! - `common.rs`: the template as CloudFormation's JSON form, and lookups every check shares.
//! - `timing.rs`: the timing mapping, the variables, `Timing::from_env`, function timeouts.
//! - `queue_and_table.rs`: the seat queue and the table against the code's definitions.
//! - `load_caps.rs`: the worker's concurrency cap and the HTTP API's throttling.
//! - `alarms.rs`: alarms and the dashboard name only metrics some code emits.
//! - `iam_grants.rs`: what each role grants, read from the template.
//! - `iam_recorder.rs`: the recording interceptor and recorded stores.
//! - `iam_recorded.rs`: each function's flows recorded, compared with its role.

mod template {
    mod alarms;
    mod common;
    mod iam_grants;
    mod iam_recorded;
    mod iam_recorder;
    mod load_caps;
    mod queue_and_table;
    mod timing;
}
