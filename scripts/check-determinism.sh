#!/usr/bin/env bash
# No service, handler or domain rule reads the wall clock or a global random source directly:
# they take time from the `Clock` port, randomness from `Random`, ids from `Ids` and their
# in-process caches from `CacheKind`, so a seeded run on simulated time replays exactly. This
# fails on a new direct use in shared/core/src/{service,handlers,domain} (test modules, below a
# file's first `#[cfg(test)]` or in a `tests.rs` of their own, are not scanned). The production sources live in
# shared/core/src/adapters (clock.rs, entropy.rs) and the moka wrapper in service/cache/.
#
# Usage: scripts/check-determinism.sh            check this tree
#        scripts/check-determinism.sh --self-test plant a direct use in a copy; the check must fail
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# What a direct use looks like.
PATTERN='Instant::now|SystemTime::now|Millis::now\(|OffsetDateTime::now|now_v7|new_v4|rand::|thread_rng|::generate\(\)|moka::|Action::prepare\(|Intent::waiting\('
# Where a pattern is the definition itself, not a use: file (relative to shared/core/src) and
# the pattern that file may hold.
ALLOWED='
domain/time.rs:OffsetDateTime::now
domain/ids.rs:now_v7
domain/flight.rs:now_v7
domain/action.rs:::generate()
domain/intent.rs:::generate()
service/cache/moka_cache.rs:moka::
service/cache/mod.rs:moka::
'

check() {
  local src="$1/shared/core/src" found=0 file rel hits
  while IFS= read -r file; do
    rel="${file#"$src"/}"
    # Only the code above the file's test module.
    hits="$(awk '/^#\[cfg\(test\)\]/{exit} {printf "%d:%s\n", NR, $0}' "$file" \
      | grep -E "$PATTERN" | grep -vE '^[0-9]+:\s*//' || true)"
    [ -z "$hits" ] && continue
    while IFS= read -r hit; do
      local allowed=0 rule
      while IFS= read -r rule; do
        [ -z "$rule" ] && continue
        if [ "${rule%%:*}" = "$rel" ] && [[ "$hit" == *"${rule#*:}"* ]]; then allowed=1; fi
      done <<<"$ALLOWED"
      if [ "$allowed" = 0 ]; then
        echo "check-determinism: shared/core/src/$rel:${hit%%:*}: a direct use: ${hit#*:}" >&2
        found=1
      fi
    done <<<"$hits"
  done < <(find "$src/service" "$src/handlers" "$src/domain" -name '*.rs' ! -name tests.rs | sort)
  if [ "$found" = 1 ]; then
    echo "check-determinism: take time, randomness and ids from the Clock, Random and Ids ports (Ports::clock/random/ids), caches from Ports::cache" >&2
    return 1
  fi
}

if [ "${1:-}" = "--self-test" ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/shared/core"
  cp -r "$ROOT/shared/core/src" "$tmp/shared/core/"
  check "$tmp" || { echo "check-determinism self-test: the clean tree must pass" >&2; exit 1; }
  for plant in 'let _ = std::time::Instant::now();' 'let _ = rand::random::<u8>();' \
    'let _ = crate::domain::IntentId::generate();'; do
    cp "$ROOT/shared/core/src/service/worker.rs" "$tmp/shared/core/src/service/worker.rs"
    printf 'fn planted() { %s }\n' "$plant" | cat - "$ROOT/shared/core/src/service/worker.rs" \
      > "$tmp/shared/core/src/service/worker.rs"
    if check "$tmp" 2>/dev/null; then
      echo "check-determinism self-test: a planted '$plant' was not caught" >&2
      exit 1
    fi
  done
  echo "check-determinism self-test: the clean tree passes and 3 planted direct uses fail it"
  exit 0
fi

check "$ROOT"
echo "check-determinism: no direct clock, randomness or id source in services, handlers or domain"
