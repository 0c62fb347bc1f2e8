#!/usr/bin/env bash
# The hexagon's boundary, checked: a Lambda function links the core crate and the AWS adapters,
# never the SQLite or in-memory backend, the test support, the upstream simulator or the
# deterministic simulator (seatgate-sim). Fails (exit 1) naming the function and the crate that
# crossed the line; run by scripts/test.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

FUNCTIONS=(api relay worker reaper deliver)
FORBIDDEN='^(rusqlite|libsqlite3-sys|seatgate-embedded|seatgate-memory|seatgate-sim|seatgate-testkit|upstream-sim) '

status=0
for f in "${FUNCTIONS[@]}"; do
  # Normal edges only (dev-dependencies are the tests' business) (rusqlite and friends are not platform-gated, so the host target tells).
  tree="$(cargo tree --locked -p "$f" -e normal --prefix none)"
  if ! grep -q '^seatgate-aws ' <<<"$tree"; then
    echo "check-deps: function $f does not link seatgate-aws; is it still a function?" >&2
    status=1
  fi
  if bad="$(grep -E "$FORBIDDEN" <<<"$tree" | sort -u)" && [[ -n "$bad" ]]; then
    echo "check-deps: function $f links what only local runs and tests may:" >&2
    echo "$bad" | sed 's/^/  /' >&2
    status=1
  fi
done
(( status == 0 )) && echo "check-deps: ${FUNCTIONS[*]} link core + aws only" >&2
exit "$status"
