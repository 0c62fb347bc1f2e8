#!/usr/bin/env bash
# docs/lambda-invoke.md as a script, so the doc cannot rot: each ```sh block of the doc is one
# `# >>> doc` ... `# <<< doc` region of this file, in the same order, and `--check-doc` fails when
# they differ. The test command (scripts/test.sh) runs `--check-doc`, then this whole script end
# to end: emulators, table, queues, KMS key, the upstream simulator, the five functions' debug
# build, `cargo lambda watch`, every invoke of the doc with its expected answer checked, and the
# doc's clean-up, checked to leave nothing running.
#
#   scripts/lambda-invoke-walkthrough.sh              # the walkthrough, end to end
#   scripts/lambda-invoke-walkthrough.sh --check-doc  # only: the doc's sh blocks are this file's regions
#   scripts/lambda-invoke-walkthrough.sh --sync-doc   # rewrite the doc's sh blocks from this file
#
# Environment: SIM_PORT (default 3001), INVOKE_PORT (default 9000), DDB_PORT and SQS_PORT (see
# scripts/emulators.sh). What it starts is stopped on exit, on failure too; the emulators are
# stopped on failure only when they were not running before (the doc's clean-up stops them).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SELF=scripts/lambda-invoke-walkthrough.sh
DOC=docs/lambda-invoke.md

say() { printf 'walkthrough: %s\n' "$*" >&2; }

# The regions of this file and the doc's sh blocks, each block headed by a numbered marker line.
script_blocks() { awk '/^# >>> doc/ { on = 1; print "@@ block " ++n; next } /^# <<< doc/ { on = 0; next } on' "$SELF"; }
doc_blocks() { awk '/^```sh$/ { on = 1; print "@@ block " ++n; next } on && /^```$/ { on = 0; next } on' "$DOC"; }

check_doc() {
  if ! diff -u --label "$DOC (sh blocks)" --label "$SELF (doc regions)" <(doc_blocks) <(script_blocks) >&2; then
    say "error: $DOC and $SELF disagree (diff above). The script is the source: edit it, then run '$SELF --sync-doc'."
    return 1
  fi
  say "$DOC: its $(doc_blocks | grep -c '^@@ block') sh blocks are $SELF's regions"
}

sync_doc() {
  local tmp
  tmp="$(mktemp)"
  # Replace the body of the n-th ```sh block of the doc with the n-th region of the script.
  awk -v src="$SELF" '
    BEGIN {
      while ((getline line < src) > 0) {
        if (line ~ /^# >>> doc/) { on = 1; n++; body[n] = ""; continue }
        if (line ~ /^# <<< doc/) { on = 0; continue }
        if (on) body[n] = body[n] line "\n"
      }
      regions = n; n = 0
    }
    /^```sh$/ { print; n++; printf "%s", body[n]; skip = 1; next }
    skip && /^```$/ { skip = 0; print; next }
    skip { next }
    { print }
    END { if (n != regions) { printf "doc has %d sh blocks, script %d regions\n", n, regions > "/dev/stderr"; exit 1 } }
  ' "$DOC" > "$tmp"
  mv "$tmp" "$DOC"
  check_doc
}

case "${1:-}" in
  --check-doc) check_doc; exit ;;
  --sync-doc) sync_doc; exit ;;
  "") ;;
  *) sed -n '2,16p' "$SELF" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac

check_doc

# Timings of each part, printed at the end (the doc quotes them).
declare -a TIMES=()
mark=$SECONDS
lap() { TIMES+=("$(printf '%-44s %4ds' "$1" $(( SECONDS - mark )))"); say "$1: $(( SECONDS - mark ))s"; mark=$SECONDS; }

emulators_were_running=0
scripts/emulators.sh status 2>/dev/null && emulators_were_running=1

trap 'say "error: line $LINENO failed: $BASH_COMMAND"' ERR
trap 'exit 143' TERM INT
on_exit() {
  local rc=$?
  (( rc == 0 )) && return
  say "FAILED (exit $rc); the logs' last lines:"
  local f
  for f in "${W:-/nonexistent}/sim.log" "${W:-/nonexistent}/watch.log"; do
    [[ -f "$f" ]] && { echo "--- $f"; tail -n 60 "$f"; } >&2
  done
  [[ -n "${WATCH_PID:-}" ]] && kill "$WATCH_PID" 2>/dev/null
  [[ -n "${SIM_PID:-}" ]] && kill "$SIM_PID" 2>/dev/null
  (( emulators_were_running )) || scripts/emulators.sh stop || true
  [[ "${W:-}" == /tmp/seatgate-invoke.* ]] && rm -rf "$W"
  rm -f .emulators/dev.env
}
trap on_exit EXIT

say "section 1: emulators, table, queues, KMS key, simulator"
# >>> doc
# Ports: change any that is taken. The emulators' are DDB_PORT and SQS_PORT (see below).
SIM_PORT=${SIM_PORT:-3001} INVOKE_PORT=${INVOKE_PORT:-9000}
scripts/emulators.sh install                # once: venv with cargo-lambda, moto, sam; DynamoDB Local
eval "$(scripts/emulators.sh start)"        # DynamoDB Local :8765, moto :9766; exports AWS_* for both
export PATH="$PWD/.emulators/venv/bin:$PATH" SAM_CLI_TELEMETRY=0   # cargo-lambda lives in the venv
# <<< doc
lap "emulators install + start"

# A taken port fails the doc's `eval` itself, exports nothing and names both port variables:
# start a second set (own directory, same installation) on the DynamoDB port just taken above.
emu_dir="${EMULATORS_DIR:-$ROOT/.emulators}" probe="$(mktemp -d /tmp/seatgate-emu-probe.XXXXXX)"
ln -s "$emu_dir/venv" "$probe/venv"
ln -s "$emu_dir/ddb" "$probe/ddb"
taken="${AWS_ENDPOINT_URL_DYNAMODB##*:}"
if (eval "$(EMULATORS_DIR="$probe" DDB_PORT="$taken" SQS_PORT=1 scripts/emulators.sh start 2>"$probe/err")" \
      && echo "exported $AWS_ENDPOINT_URL_SQS") >"$probe/out" 2>&1; then
  say "error: eval of 'scripts/emulators.sh start' on taken port $taken succeeded: $(cat "$probe/out")"
  exit 1
fi
grep -q DDB_PORT "$probe/err" && grep -q SQS_PORT "$probe/err" \
  || { say "error: the taken-port error names not both DDB_PORT and SQS_PORT: $(cat "$probe/err")"; exit 1; }
say "a taken port fails the eval: $(head -n 1 "$probe/err")"
rm -rf "$probe"

# >>> doc
# The table, as template.yaml / shared/aws/src/dynamodb/schema.rs define it.
T=seatgate-invoke
aws dynamodb create-table --endpoint-url "$AWS_ENDPOINT_URL_DYNAMODB" --table-name $T \
  --billing-mode PAY_PER_REQUEST \
  --attribute-definitions AttributeName=pk,AttributeType=S AttributeName=sk,AttributeType=S \
      AttributeName=due_shard,AttributeType=S AttributeName=due_at,AttributeType=N \
  --key-schema AttributeName=pk,KeyType=HASH AttributeName=sk,KeyType=RANGE \
  --global-secondary-indexes 'IndexName=due,KeySchema=[{AttributeName=due_shard,KeyType=HASH},{AttributeName=due_at,KeyType=RANGE}],Projection={ProjectionType=ALL}' \
  --stream-specification StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES > /dev/null
aws dynamodb update-time-to-live --endpoint-url "$AWS_ENDPOINT_URL_DYNAMODB" --table-name $T \
  --time-to-live-specification Enabled=true,AttributeName=ttl > /dev/null

# The seat queue (FIFO) and its dead-letter queue, as template.yaml defines them.
SQS="aws sqs --endpoint-url $AWS_ENDPOINT_URL_SQS"
DLQ_URL=$($SQS create-queue --queue-name $T-dlq.fifo --attributes FifoQueue=true --query QueueUrl --output text)
DLQ_ARN=$($SQS get-queue-attributes --queue-url "$DLQ_URL" --attribute-names QueueArn --query Attributes.QueueArn --output text)
QUEUE_URL=$($SQS create-queue --queue-name $T.fifo --query QueueUrl --output text --attributes \
  "{\"FifoQueue\":\"true\",\"ContentBasedDeduplication\":\"false\",\"VisibilityTimeout\":\"180\",\"RedrivePolicy\":\"{\\\"deadLetterTargetArn\\\":\\\"$DLQ_ARN\\\",\\\"maxReceiveCount\\\":5}\"}")
# The event queue (standard) the relay sends terminal events to, for the deliver function.
EVENTS_QUEUE_URL=$($SQS create-queue --queue-name $T-events --query QueueUrl --output text)

# The KMS key that seals users' upstream credentials (template.yaml's CredentialsKey), on moto.
KEY_ID=$(aws kms create-key --endpoint-url "$AWS_ENDPOINT_URL_KMS" \
  --description "seatgate credentials (local)" --query KeyMetadata.KeyId --output text)
# <<< doc
lap "table, queues, KMS key"

# >>> doc
# This walkthrough's files (events, logs, the functions' environment).
W=$(mktemp -d /tmp/seatgate-invoke.XXXXXX)

# The upstream simulator: built in the foreground (cargo shows its progress), then run in the
# background, and used only once it answers.
cargo build -p upstream-sim
cargo run -q -p upstream-sim -- --listen 127.0.0.1:$SIM_PORT > $W/sim.log 2>&1 &
SIM_PID=$!
scripts/wait-for-url.sh --pid $SIM_PID http://127.0.0.1:$SIM_PORT/__admin/stats 60
# User u1 (the fixtures' `sub`) and the credential the simulator accepts for u1.
curl -sf -XPOST 127.0.0.1:$SIM_PORT/__admin/users -H 'content-type: application/json' \
  -d '{"users":[{"user_id":"u1","credential":"cred-u1"}]}'
# <<< doc
lap "simulator: build, start, answer"

say "section 2: the functions' build and cargo lambda watch"
# >>> doc
cat > $W/lambda.env <<EOF
TABLE_NAME=$T
QUEUE_URL=$QUEUE_URL
EVENTS_QUEUE_URL=$EVENTS_QUEUE_URL
CREDENTIALS_KEY_ID=$KEY_ID
UPSTREAM_BASE_URL=http://127.0.0.1:$SIM_PORT
AWS_ENDPOINT_URL_DYNAMODB=$AWS_ENDPOINT_URL_DYNAMODB
AWS_ENDPOINT_URL_SQS=$AWS_ENDPOINT_URL_SQS
AWS_ENDPOINT_URL_KMS=$AWS_ENDPOINT_URL_KMS
AWS_REGION=us-east-1
AWS_ACCESS_KEY_ID=test
AWS_SECRET_ACCESS_KEY=test
AWS_EC2_METADATA_DISABLED=true
RUST_LOG=info
EOF
# <<< doc

# >>> doc
# The five functions, in debug, in the foreground: the build cargo lambda watch would otherwise
# run silently on each function's first invoke (see "How long it takes" for the times). The
# watcher runs `cargo run --bin <function>` from the workspace root: build the same way (`-p`
# would resolve other features, and the watcher would build everything again).
cargo build --bin api --bin relay --bin worker --bin reaper --bin deliver
# <<< doc
lap "functions: cargo build (debug)"

# >>> doc
# The Lambda runtime API on 127.0.0.1:$INVOKE_PORT, in the background; its log and the
# functions' logs go to $W/watch.log.
cargo lambda watch --ignore-changes -A 127.0.0.1 -P $INVOKE_PORT --env-file $W/lambda.env > $W/watch.log 2>&1 &
WATCH_PID=$!
scripts/wait-for-url.sh --any-status --pid $WATCH_PID http://127.0.0.1:$INVOKE_PORT/ 120
# <<< doc
lap "cargo lambda watch: answer"

# >>> doc
# Everything the later steps need, for another shell: there, `source .emulators/dev.env`.
{ scripts/emulators.sh env
  echo "export PATH=\"$PWD/.emulators/venv/bin:\$PATH\" SAM_CLI_TELEMETRY=0"
  for v in SIM_PORT INVOKE_PORT T SQS QUEUE_URL DLQ_URL EVENTS_QUEUE_URL KEY_ID W SIM_PID WATCH_PID; do
    printf 'export %s=%q\n' "$v" "${!v}"
  done
} > .emulators/dev.env
# <<< doc

say "section 3: invoke"
# >>> doc
# reaper: one pass (EventBridge Scheduler event). Each `jq -e` below prints true, or fails.
cargo lambda invoke reaper -A 127.0.0.1 -P $INVOKE_PORT --data-file tests/events/reaper-schedule.json | tee $W/reaper.json
jq -e 'has("examined")' $W/reaper.json
# <<< doc
lap "invoke reaper (first invoke)"

# >>> doc
# api: store u1's upstream credential (PUT /me/credential, made from the prepare fixture)
jq '.routeKey="PUT /me/credential" | .rawPath="/me/credential" | .requestContext.routeKey=.routeKey
    | .requestContext.http.method="PUT" | .requestContext.http.path=.rawPath
    | .body="{\"upstream_token\":\"cred-u1\"}" | .headers["content-length"]=(.body|length|tostring)' \
  tests/events/api-prepare.json > $W/api-credential.json
cargo lambda invoke api -A 127.0.0.1 -P $INVOKE_PORT --data-file $W/api-credential.json | tee $W/credential.json
jq -e '.statusCode == 204' $W/credential.json

# api: prepare, then confirm that action (the confirm fixture names a fixed action id)
cargo lambda invoke api -A 127.0.0.1 -P $INVOKE_PORT --data-file tests/events/api-prepare.json | tee $W/prepared.json
ACTION=$(jq -r '.body | fromjson | .action_id' $W/prepared.json)
sed "s/019a4f2e-3b00-7c10-9d2e-5f6a7b8c9d01/$ACTION/g" tests/events/api-confirm.json > $W/api-confirm.json
cargo lambda invoke api -A 127.0.0.1 -P $INVOKE_PORT --data-file $W/api-confirm.json | tee $W/confirmed.json
INTENT=$(jq -r '.body | fromjson | .intent_id' $W/confirmed.json)
jq -e '.statusCode == 202' $W/confirmed.json

# worker: the SQS FIFO event the relay's message would produce for that intent
jq --arg id "$INTENT" '.Records |= [.[0] | .body = ({intent_id: $id, seat_id: "A-12", version: 1} | tojson)
    | .attributes.MessageDeduplicationId = ($id + ":1")]' \
  tests/events/worker-sqs-fifo.json > $W/worker.json
cargo lambda invoke worker -A 127.0.0.1 -P $INVOKE_PORT --data-file $W/worker.json | tee $W/worked.json
jq -e '.batchItemFailures == []' $W/worked.json
curl -s 127.0.0.1:$SIM_PORT/__admin/stats | jq -e '.calls["POST /api/reservations"] == 1'   # one reserve

# api: read the intent back (GET /intents/{intent_id})
jq --arg id "$INTENT" '.routeKey="GET /intents/{intent_id}" | .rawPath=("/intents/" + $id)
    | .requestContext.routeKey=.routeKey | .requestContext.http.method="GET"
    | .requestContext.http.path=.rawPath | del(.body) | .headers["content-length"]="0"
    | .pathParameters={intent_id: $id}' tests/events/api-prepare.json > $W/api-get.json
cargo lambda invoke api -A 127.0.0.1 -P $INVOKE_PORT --data-file $W/api-get.json | tee $W/got.json
jq -e '.body | fromjson | .status == "SUCCEEDED"' $W/got.json

# relay: the stream fixture; its REQUESTED insert becomes one message on the seat queue
cargo lambda invoke relay -A 127.0.0.1 -P $INVOKE_PORT --data-file tests/events/relay-dynamodb-stream.json | tee $W/relayed.json
jq -e '.batchItemFailures == []' $W/relayed.json
$SQS receive-message --queue-url "$QUEUE_URL" --attribute-names MessageGroupId MessageDeduplicationId \
  | tee $W/received.json
jq -e '.Messages[0].Attributes.MessageGroupId == "A-12"' $W/received.json

# the fixtures as they are: the worker drops messages for intents the table does not have
cargo lambda invoke worker -A 127.0.0.1 -P $INVOKE_PORT --data-file tests/events/worker-sqs-fifo.json | tee $W/dropped.json
jq -e '.batchItemFailures == []' $W/dropped.json
# <<< doc
lap "invoke api x4, worker x2, relay"

say "section 4: clean-up"
# What the two background jobs run, to check below that the clean-up ends all of it.
descendants() { local c; for c in $(ps -o pid= --ppid "$1"); do echo "$c"; descendants "$c"; done; }
started=("$WATCH_PID" "$SIM_PID" $(descendants "$WATCH_PID") $(descendants "$SIM_PID"))
say "background processes before the clean-up: ${started[*]}"
# >>> doc
# Clean-up: the two background jobs, then the emulators (their tables and queues live in memory
# and go with them), then this walkthrough's files.
kill $WATCH_PID $SIM_PID
scripts/emulators.sh stop
rm -rf "$W" .emulators/dev.env
# <<< doc

# The clean-up left nothing running: both ports free again, both processes gone.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
any_alive() { local p; for p in "${started[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
for _ in $(seq 1 60); do
  if ! any_alive && ! port_open "$INVOKE_PORT" && ! port_open "$SIM_PORT"; then
    break
  fi
  sleep 0.5
done
for p in "${started[@]}"; do
  ! kill -0 "$p" 2>/dev/null || { say "error: process $p ($(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null)) still running after the clean-up"; exit 1; }
done
for port in "$INVOKE_PORT" "$SIM_PORT"; do
  ! port_open "$port" || { say "error: port $port still open after the clean-up"; exit 1; }
done
! scripts/emulators.sh status 2>/dev/null || { say "error: emulators still running after the clean-up"; exit 1; }
lap "clean-up"

say "ok; times:"
printf '  %s\n' "${TIMES[@]}" >&2
