#!/usr/bin/env bash
# The hexagon's boundary, checked: a Lambda function links the core crate and the AWS adapters,
# never the SQLite or in-memory backend, the test support, the upstream simulator or the
# deterministic simulator (seatgate-sim); and the simulator links no AWS SDK. Fails (exit 1)
# naming the function (or the simulator) and the crate that crossed the line; run by
# scripts/test.sh.
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

# The deterministic simulator runs the services on the in-memory backend and its own upstream
# model: it links no AWS SDK, no AWS adapter, no test support (which links both) and no upstream
# simulator. Its seeded clock and ids are seatgate-memory's (runtime.rs), for that reason.
SIM_FORBIDDEN='^(aws-config|aws-sdk-[a-z]+|seatgate-aws|seatgate-testkit|upstream-sim) '
sim_tree="$(cargo tree --locked -p seatgate-sim -e normal --prefix none)"
if bad="$(grep -E "$SIM_FORBIDDEN" <<<"$sim_tree" | sed "s/ (\*)$//" | sort -u)" && [[ -n "$bad" ]]; then
  echo "check-deps: seatgate-sim links what the simulator must not:" >&2
  echo "$bad" | sed 's/^/  /' >&2
  status=1
else
  echo "check-deps: seatgate-sim links no AWS SDK, test support or upstream simulator" >&2
fi
exit "$status"
