#!/usr/bin/env bash
# Browser tests of the local runner's pages (the seat map at / and the ops page at /ops):
# headless Chromium (Debian's `chromium` package) driven by playwright-core (npm, pinned in
# infra/local/browser/package-lock.json), against a fresh runner on free loopback ports.
#
#   scripts/browser-tests.sh install   # apt-get install chromium if missing, npm ci if the lockfile changed; fast when done
#   scripts/browser-tests.sh [run]     # build the runner, start it, run infra/local/browser/pages.test.mjs, stop it
#
# A missing Chromium or driver fails with how to install it; nothing is skipped. On a failure,
# screenshots, the page's HTML and its console log are in target/browser-artifacts/, and the
# runner's log is printed. Environment: CHROMIUM (default /usr/bin/chromium),
# BROWSER_TESTS_PROFILE (debug or release, default debug), BURST_N (100), BIG_BURST_N (1000).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DIR="$ROOT/infra/local/browser"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
PROFILE="${BROWSER_TESTS_PROFILE:-debug}"
START_TIMEOUT=60

log() { printf '%s\n' "browser-tests: $*" >&2; }
die() { printf '%s\n' "browser-tests: error: $*" >&2; exit 1; }

lock_digest() { sha256sum "$DIR/package-lock.json" | cut -d' ' -f1; }

cmd_install() {
  if [[ -x "$CHROMIUM" ]]; then
    log "chromium present: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
  else
    command -v apt-get >/dev/null 2>&1 \
      || die "no Chromium at $CHROMIUM and no apt-get: install Chromium and set CHROMIUM=/path/to/it"
    [[ "$(id -u)" == 0 ]] \
      || die "no Chromium at $CHROMIUM: install it as root with: apt-get update && apt-get install -y chromium"
    log "apt-get installing chromium (about a minute)"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >&2
    [[ -x "$CHROMIUM" ]] || die "apt-get installed chromium but there is no $CHROMIUM"
  fi
  command -v npm >/dev/null 2>&1 || die "npm not found: the browser tests need Node.js >= 20 and npm"
  local marker="$DIR/node_modules/.seatgate-lock" digest
  digest="$(lock_digest)"
  if [[ -f "$marker" && "$(cat "$marker")" == "$digest" && -d "$DIR/node_modules/playwright-core" ]]; then
    log "playwright-core present (lockfile unchanged)"
  else
    log "npm ci in infra/local/browser (playwright-core, no browser download)"
    # playwright-core never downloads a browser; the variable says so for any future version.
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix "$DIR" --no-audit --no-fund --loglevel=error >&2
    printf '%s\n' "$digest" >"$marker"
  fi
}

RUNNER_PID=""
WORK=""
cleanup() {
  local rc=$?
  if [[ -n "$RUNNER_PID" ]] && kill -0 "$RUNNER_PID" 2>/dev/null; then
    kill -TERM "$RUNNER_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$RUNNER_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$RUNNER_PID" 2>/dev/null || true
    wait "$RUNNER_PID" 2>/dev/null || true
  fi
  if [[ -n "$WORK" ]]; then
    if (( rc != 0 )) && [[ -f "$WORK/runner.log" ]]; then
      log "runner log (last 40 lines):"
      tail -n 40 "$WORK/runner.log" >&2 || true
    fi
    rm -rf "$WORK"
  fi
  exit "$rc"
}

cmd_run() {
  [[ -x "$CHROMIUM" ]] \
    || die "no Chromium at $CHROMIUM: run scripts/browser-tests.sh install (apt-get install -y chromium), or set CHROMIUM"
  [[ -d "$DIR/node_modules/playwright-core" ]] \
    || die "playwright-core is not installed: run scripts/browser-tests.sh install"
  local flags=()
  [[ "$PROFILE" == release ]] && flags=(--release)
  log "building seatgate-local ($PROFILE)"
  cargo build --quiet "${flags[@]}" -p seatgate-local --bin seatgate-local \
    || die "cargo build -p seatgate-local failed"
  local bin="${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE/seatgate-local"

  trap cleanup EXIT
  trap 'exit 130' INT TERM
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/seatgate-browser.XXXXXX")"
  # Two free loopback ports, chosen by the kernel (bound and released: a tiny race, fine here).
  read -r api_port up_port < <(node -e '
    const net = require("net");
    const a = net.createServer().listen(0, "127.0.0.1", () => {
      const b = net.createServer().listen(0, "127.0.0.1", () => {
        console.log(a.address().port, b.address().port); a.close(); b.close();
      });
    });')
  local api="http://127.0.0.1:$api_port" up="http://127.0.0.1:$up_port"
  log "starting the runner on $api (upstream $up)"
  # The README's plain command, on its own ports and database: the page must set itself up.
  env -u SEATGATE_JWT_SECRET -u SEATGATE_DEMO_USERS RUST_LOG="${RUST_LOG:-warn}" "$bin" \
    --listen "127.0.0.1:$api_port" --upstream-listen "127.0.0.1:$up_port" \
    --db "$WORK/db.sqlite3" --backend embedded \
    </dev/null >"$WORK/runner.log" 2>&1 &
  RUNNER_PID=$!
  local deadline=$(( SECONDS + START_TIMEOUT ))
  until grep -q "^api: $api" "$WORK/runner.log"; do
    kill -0 "$RUNNER_PID" 2>/dev/null || die "the runner exited during startup"
    (( SECONDS < deadline )) || die "the runner did not print 'api: $api' within ${START_TIMEOUT}s"
    sleep 0.2
  done
  rm -rf "$ROOT/target/browser-artifacts"
  SEATGATE_API="$api" SEATGATE_UPSTREAM="$up" CHROMIUM="$CHROMIUM" \
    BROWSER_ARTIFACTS="$ROOT/target/browser-artifacts" \
    node "$DIR/pages.test.mjs" \
    || die "browser tests failed; screenshots, HTML and console logs in target/browser-artifacts/"
}

case "${1:-run}" in
  install) cmd_install ;;
  run) cmd_run ;;
  *) die "usage: scripts/browser-tests.sh [install|run]" ;;
esac
