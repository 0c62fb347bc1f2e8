"""Latency of the DynamoDB requests seatgate makes, against whatever AWS_ENDPOINT_URL_DYNAMODB
points at (DynamoDB Local from scripts/emulators.sh): GetItem, UpdateItem and a confirm-shaped
TransactWriteItems (one update + two conditional puts), 100 of each, from 1 and from 16 client
threads. Explains where same-seat-burst --backend aws spends its time (BENCHMARKS.md).

    eval "$(scripts/emulators.sh start)"
    .emulators/venv/bin/python tests/bench/ddb_local_latency.py

Creates a uniquely named table with the seatgate key shape and stream, and deletes it.
"""

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import boto3

REQUESTS = 100
THREADS = (1, 16)

admin = boto3.client("dynamodb")
table = "latency-" + uuid.uuid4().hex[:10]
admin.create_table(
    TableName=table,
    BillingMode="PAY_PER_REQUEST",
    AttributeDefinitions=[
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "sk", "AttributeType": "S"},
        {"AttributeName": "due_shard", "AttributeType": "S"},
        {"AttributeName": "due_at", "AttributeType": "N"},
    ],
    KeySchema=[
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ],
    GlobalSecondaryIndexes=[
        {
            "IndexName": "due",
            "KeySchema": [
                {"AttributeName": "due_shard", "KeyType": "HASH"},
                {"AttributeName": "due_at", "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "ALL"},
        }
    ],
    StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
)
admin.get_waiter("table_exists").wait(TableName=table)

per_thread = threading.local()


def client():
    if not hasattr(per_thread, "client"):
        per_thread.client = boto3.client("dynamodb")
    return per_thread.client


def key(k, sk):
    return {"pk": {"S": f"K#{k}"}, "sk": {"S": sk}}


def get_item(k):
    client().get_item(TableName=table, Key=key(k, "ACTION"), ConsistentRead=True)


def confirm(k):
    client().transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": table,
                    "Key": key(k, "ACTION"),
                    "UpdateExpression": "SET #s = :c",
                    "ExpressionAttributeNames": {"#s": "status"},
                    "ExpressionAttributeValues": {":c": {"S": "CONFIRMED"}},
                }
            },
            {
                "Put": {
                    "TableName": table,
                    "Item": {**key(k, "INTENT"), "due_shard": {"S": "DUE#1"}, "due_at": {"N": "1"}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Put": {
                    "TableName": table,
                    "Item": key(k, "CONSENT"),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        ]
    )


def update_item(k):
    client().update_item(
        TableName=table,
        Key=key(k, "INTENT"),
        UpdateExpression="SET #s = :t REMOVE due_shard, due_at",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":t": {"S": "FAILED_RACE"}},
    )


try:
    for threads in THREADS:
        with ThreadPoolExecutor(threads) as pool:
            for name, call in (
                ("GetItem", get_item),
                ("TransactWriteItems (confirm-shaped)", confirm),
                ("UpdateItem", update_item),
            ):
                list(pool.map(call, [f"t{threads}-warm{i}" for i in range(threads)]))
                started = time.perf_counter()
                list(pool.map(call, [f"t{threads}-{i}" for i in range(REQUESTS)]))
                elapsed = time.perf_counter() - started
                print(
                    f"{name:38s} x{REQUESTS}, {threads:2d} client threads: "
                    f"{elapsed * 1000:6.0f} ms total = {elapsed * 1000 / REQUESTS:5.1f} ms per request"
                )
finally:
    admin.delete_table(TableName=table)
