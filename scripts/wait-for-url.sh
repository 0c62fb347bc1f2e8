#!/usr/bin/env bash
# Waits until a URL answers, printing progress, within a bounded time; for the docs and scripts
# that start a server in the background (the upstream simulator, `cargo lambda watch`, the local
# runner) and must not use it before it listens.
#
#   scripts/wait-for-url.sh [--any-status] [--pid PID] URL [TIMEOUT_SECONDS]
#
# Succeeds as soon as URL answers 2xx/3xx (with --any-status: any HTTP answer, even 404). Fails
# (exit 1, on stderr) after TIMEOUT_SECONDS (default 120), or at once when the process PID (the
# server started in the background) has exited, so a server that failed to start is not
# waited for. Progress goes to stderr every 5 seconds.
set -euo pipefail

any_status=0 pid=""
while (( $# > 0 )); do
  case "$1" in
    --any-status) any_status=1; shift ;;
    --pid) pid="${2:?--pid needs a process id}"; shift 2 ;;
    -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
    *) break ;;
  esac
done
url="${1:?usage: scripts/wait-for-url.sh [--any-status] [--pid PID] URL [TIMEOUT_SECONDS]}"
timeout="${2:-120}"
[[ "$timeout" =~ ^[0-9]+$ ]] || { echo "wait-for-url: TIMEOUT_SECONDS must be a number, not '$timeout'" >&2; exit 2; }

start=$SECONDS next_note=$(( SECONDS + 5 ))
echo "wait-for-url: waiting for $url (at most ${timeout}s)" >&2
while :; do
  code="$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$url" 2>/dev/null || true)"
  if [[ "$code" =~ ^[23] ]] || { (( any_status )) && [[ -n "$code" && "$code" != 000 ]]; }; then
    echo "wait-for-url: $url answered $code after $(( SECONDS - start ))s" >&2
    exit 0
  fi
  if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
    echo "wait-for-url: error: process $pid exited before $url answered (see its output above or its log)" >&2
    exit 1
  fi
  if (( SECONDS - start >= timeout )); then
    echo "wait-for-url: error: $url did not answer within ${timeout}s (last status: ${code:-none})" >&2
    exit 1
  fi
  if (( SECONDS >= next_note )); then
    echo "wait-for-url: still waiting for $url ($(( SECONDS - start ))s of ${timeout}s)" >&2
    next_note=$(( SECONDS + 5 ))
  fi
  sleep 0.5
done
