"""Probes the local emulators for the behaviours seatgate relies on; prints what it sees.

Run against running emulators:
    eval "$(scripts/emulators.sh start)"
    .emulators/venv/bin/python infra/aws/probe_emulators.py
Each probe prints `name: observed` and, where real AWS differs, `AWS: expected`. It exits 0
whatever it finds: the findings are recorded in infra/aws/EMULATOR-NOTES.md.
"""

import json
import time
import uuid

import boto3
from botocore.exceptions import ClientError

SUFFIX = uuid.uuid4().hex[:8]
ddb = boto3.client("dynamodb")
streams = boto3.client("dynamodbstreams")
sqs = boto3.client("sqs")


def report(name, observed, aws=None):
    print(f"{name}: {observed}")
    if aws is not None:
        print(f"    AWS: {aws}")


def key(pk, sk):
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def make_table():
    name = f"probe-{SUFFIX}"
    ddb.create_table(
        TableName=name,
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
            "KeySchema": [{"AttributeName": "due_shard", "KeyType": "HASH"},
                          {"AttributeName": "due_at", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "ALL"},
        }],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    ddb.get_waiter("table_exists").wait(TableName=name)
    return name


def probe_dynamodb():
    t = make_table()
    desc = ddb.describe_table(TableName=t)["Table"]
    report("stream arn", desc["LatestStreamArn"])

    # TTL configuration is accepted?
    try:
        ddb.update_time_to_live(TableName=t, TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"})
        report("UpdateTimeToLive", "accepted")
    except ClientError as e:
        report("UpdateTimeToLive", e.response["Error"]["Code"])

    # PITR / SSE calls (not needed locally, but do they fail?)
    try:
        ddb.update_continuous_backups(TableName=t, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
        report("UpdateContinuousBackups", "accepted")
    except ClientError as e:
        report("UpdateContinuousBackups", e.response["Error"]["Code"])

    # Conditional put failure with ReturnValuesOnConditionCheckFailure.
    ddb.put_item(TableName=t, Item={**key("INTENT#x", "INTENT"), "status": {"S": "RESERVING"},
                                    "fencing_token": {"N": "2"}})
    try:
        ddb.update_item(TableName=t, Key=key("INTENT#x", "INTENT"),
                        UpdateExpression="SET #s = :t", ConditionExpression="fencing_token = :tok",
                        ExpressionAttributeNames={"#s": "status"},
                        ExpressionAttributeValues={":t": {"S": "SUCCEEDED"}, ":tok": {"N": "1"}},
                        ReturnValuesOnConditionCheckFailure="ALL_OLD")
    except ClientError as e:
        report("UpdateItem ConditionalCheckFailed with ALL_OLD",
               f"{e.response['Error']['Code']}, Item returned: {'Item' in e.response}")

    # Transaction cancellation reasons, with ALL_OLD on the failing item.
    try:
        ddb.transact_write_items(TransactItems=[
            {"Update": {"TableName": t, "Key": key("INTENT#x", "INTENT"), "UpdateExpression": "SET #s = :t",
                        "ConditionExpression": "fencing_token = :tok",
                        "ExpressionAttributeNames": {"#s": "status"},
                        "ExpressionAttributeValues": {":t": {"S": "SUCCEEDED"}, ":tok": {"N": "1"}},
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
            {"Put": {"TableName": t, "Item": {**key("SEAT#A-1", "SUPPRESSION"), "until": {"N": "1"}}}},
        ])
    except ClientError as e:
        reasons = e.response.get("CancellationReasons", [])
        report("TransactWriteItems cancelled",
               f"{e.response['Error']['Code']}; reasons {[r.get('Code') for r in reasons]}; "
               f"old item on failing entry: {'Item' in reasons[0] if reasons else None}; "
               f"message: {e.response['Error']['Message'][:160]}")

    # Two operations on the same item in one transaction.
    try:
        ddb.transact_write_items(TransactItems=[
            {"Put": {"TableName": t, "Item": {**key("INTENT#y", "INTENT")}}},
            {"ConditionCheck": {"TableName": t, "Key": key("INTENT#y", "INTENT"),
                                "ConditionExpression": "attribute_not_exists(pk)"}},
        ])
        report("Put + ConditionCheck on one item in a transaction", "accepted", "ValidationException")
    except ClientError as e:
        report("Put + ConditionCheck on one item in a transaction", e.response["Error"]["Code"], "ValidationException")

    # Idempotent transaction with ClientRequestToken, repeated.
    tok = uuid.uuid4().hex
    items = [{"Put": {"TableName": t, "Item": {**key("INTENT#z", "INTENT"), "n": {"N": "1"}},
                      "ConditionExpression": "attribute_not_exists(pk)"}}]
    ddb.transact_write_items(TransactItems=items, ClientRequestToken=tok)
    try:
        ddb.transact_write_items(TransactItems=items, ClientRequestToken=tok)
        report("TransactWriteItems repeated with the same ClientRequestToken", "accepted (idempotent)",
               "accepted (idempotent within 10 minutes)")
    except ClientError as e:
        report("TransactWriteItems repeated with the same ClientRequestToken", e.response["Error"]["Code"],
               "accepted (idempotent within 10 minutes)")

    # Sparse GSI: removing due_shard/due_at takes the item out of the index.
    now = int(time.time() * 1000)
    ddb.put_item(TableName=t, Item={**key("INTENT#d", "INTENT"), "due_shard": {"S": "DUE#5"},
                                    "due_at": {"N": str(now)}})
    q = lambda: ddb.query(TableName=t, IndexName="due", KeyConditionExpression="due_shard = :s AND due_at <= :n",
                          ExpressionAttributeValues={":s": {"S": "DUE#5"}, ":n": {"N": str(now)}})["Count"]
    before = q()
    ddb.update_item(TableName=t, Key=key("INTENT#d", "INTENT"), UpdateExpression="REMOVE due_shard, due_at")
    report("sparse GSI", f"count before REMOVE {before}, after {q()}")

    # Stream: records for every write so far, with images; a transaction's writes appear as separate records.
    shards = streams.describe_stream(StreamArn=desc["LatestStreamArn"])["StreamDescription"]["Shards"]
    it = streams.get_shard_iterator(StreamArn=desc["LatestStreamArn"], ShardId=shards[0]["ShardId"],
                                    ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    recs = streams.get_records(ShardIterator=it)["Records"]
    report("stream shards", len(shards))
    report("stream records", [(r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"],
                               sorted(k for k in ("NewImage", "OldImage") if k in r["dynamodb"])) for r in recs])
    report("stream record keys", sorted(recs[0].keys()) if recs else None)
    report("stream record awsRegion / eventSourceARN present",
           f"{recs[0].get('awsRegion')!r} / {'eventSourceARN' in recs[0]}" if recs else None)

    ddb.delete_table(TableName=t)


def make_fifo(name, **attrs):
    base = {"FifoQueue": "true", "ContentBasedDeduplication": "false"}
    base.update({k: str(v) for k, v in attrs.items()})
    return sqs.create_queue(QueueName=f"{name}-{SUFFIX}.fifo", Attributes=base)["QueueUrl"]


def recv(q, n=10, vis=None, wait=0):
    kw = {"QueueUrl": q, "MaxNumberOfMessages": n, "WaitTimeSeconds": wait,
          "MessageSystemAttributeNames": ["All"]}
    if vis is not None:
        kw["VisibilityTimeout"] = vis
    return sqs.receive_message(**kw).get("Messages", [])


def seat_queue(tag, **extra):
    attrs = {"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId",
             "VisibilityTimeout": 180}
    attrs.update(extra)
    return make_fifo(f"probe-{tag}", **attrs)


def drain(q):
    for m in recv(q, vis=30):
        sqs.delete_message(QueueUrl=q, ReceiptHandle=m["ReceiptHandle"])


def probe_sqs():
    queues = []

    q = seat_queue("attrs")
    queues.append(q)
    attrs = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=["All"])["Attributes"]
    report("FIFO queue attributes kept",
           {k: attrs.get(k) for k in ("DeduplicationScope", "FifoThroughputLimit", "VisibilityTimeout")})

    # Group ordering, group lock, and what comes back after the visibility timeout.
    q = seat_queue("order")
    queues.append(q)
    for i in range(3):
        sqs.send_message(QueueUrl=q, MessageBody=f"A{i}", MessageGroupId="A", MessageDeduplicationId=f"a{i}")
    sqs.send_message(QueueUrl=q, MessageBody="B0", MessageGroupId="B", MessageDeduplicationId="b0")
    first = recv(q, n=10, vis=2)
    report("one receive of 10 over groups A(3) and B(1)", [m["Body"] for m in first],
           "A0, A1, A2 in order and B0 (groups may come in any order)")
    report("receive while both groups in flight", [m["Body"] for m in recv(q)], "[] (groups locked)")
    time.sleep(2.5)
    rounds = []
    for _ in range(4):
        got = recv(q, n=10, vis=1)
        rounds.append([(m["Body"], m["Attributes"].get("ApproximateReceiveCount")) for m in got])
        time.sleep(1.2)
    report("receives after the visibility timeout, nothing deleted (4 rounds)", rounds,
           "every round: A0, A1, A2, B0 again, receive count +1 each")
    drain(q)

    # Partial delete: receive 3 of group A, delete only A0; A1 and A2 must come back in order.
    q = seat_queue("partial")
    queues.append(q)
    for i in range(3):
        sqs.send_message(QueueUrl=q, MessageBody=f"A{i}", MessageGroupId="A", MessageDeduplicationId=f"a{i}")
    got = recv(q, n=10, vis=1)
    sqs.delete_message(QueueUrl=q, ReceiptHandle=got[0]["ReceiptHandle"])
    time.sleep(1.5)
    report("received A0..A2, deleted A0 only; after timeout", [m["Body"] for m in recv(q, vis=30)],
           "['A1', 'A2']")

    # Workaround check: received A0..A2, then ChangeMessageVisibility(0) on each, in order.
    q = seat_queue("cmv-all")
    queues.append(q)
    for i in range(3):
        sqs.send_message(QueueUrl=q, MessageBody=f"A{i}", MessageGroupId="A", MessageDeduplicationId=f"a{i}")
    for m in recv(q, n=10, vis=60):
        sqs.change_message_visibility(QueueUrl=q, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
    report("received A0..A2, ChangeMessageVisibility(0) on each; next receive",
           [m["Body"] for m in recv(q, vis=30)], "['A0', 'A1', 'A2']")

    # Same dedup id sent twice before any receive; received, not deleted; after the timeout.
    q = seat_queue("dedup-twice")
    queues.append(q)
    sqs.send_message(QueueUrl=q, MessageBody="C", MessageGroupId="C", MessageDeduplicationId="c")
    sqs.send_message(QueueUrl=q, MessageBody="C", MessageGroupId="C", MessageDeduplicationId="c")
    first_c = [m["Body"] for m in recv(q, vis=1)]
    time.sleep(1.5)
    report("dedup id sent twice, received once, not deleted; after timeout",
           f"first {first_c}, then {[m['Body'] for m in recv(q, vis=30)]}", "first ['C'], then ['C']")

    # Dedup id re-sent while the first is in flight, then the first's visibility timeout passes.
    q = seat_queue("dedup-inflight")
    queues.append(q)
    sqs.send_message(QueueUrl=q, MessageBody="D", MessageGroupId="D", MessageDeduplicationId="dup")
    recv(q, vis=1)
    sqs.send_message(QueueUrl=q, MessageBody="D-again", MessageGroupId="D", MessageDeduplicationId="dup")
    time.sleep(1.5)
    report("dedup id re-sent while first in flight; after its visibility timeout",
           [m["Body"] for m in recv(q, vis=30)], "['D'] (the first comes back; the re-send was dropped)")

    # Plain redelivery (no duplicate send).
    q = seat_queue("redeliver")
    queues.append(q)
    sqs.send_message(QueueUrl=q, MessageBody="E", MessageGroupId="E", MessageDeduplicationId="e1")
    recv(q, vis=1)
    time.sleep(1.5)
    report("undeleted message after visibility timeout", [m["Body"] for m in recv(q, vis=30)], "['E']")

    # Same dedup id in two groups with DeduplicationScope=messageGroup.
    q = seat_queue("scope")
    queues.append(q)
    sqs.send_message(QueueUrl=q, MessageBody="F1", MessageGroupId="F1", MessageDeduplicationId="same")
    sqs.send_message(QueueUrl=q, MessageBody="F2", MessageGroupId="F2", MessageDeduplicationId="same")
    report("same dedup id in two groups (scope messageGroup)", sorted(m["Body"] for m in recv(q, vis=30)),
           "['F1', 'F2']")

    # Dedup id re-sent after the first was deleted (inside the 5-minute window).
    q = seat_queue("dedup-deleted")
    queues.append(q)
    sqs.send_message(QueueUrl=q, MessageBody="G", MessageGroupId="G", MessageDeduplicationId="g1")
    drain(q)
    r = sqs.send_message(QueueUrl=q, MessageBody="G-again", MessageGroupId="G", MessageDeduplicationId="g1")
    report("dedup id re-sent after delete, within 5 min",
           f"accepted (MessageId {'present' if r.get('MessageId') else 'absent'}); delivered: "
           f"{[m['Body'] for m in recv(q, vis=30)]}", "accepted, not delivered ([])")

    # Send without a dedup id on a ContentBasedDeduplication=false queue.
    try:
        sqs.send_message(QueueUrl=q, MessageBody="H", MessageGroupId="H")
        report("send without MessageDeduplicationId", "accepted", "InvalidParameterValue")
    except ClientError as e:
        report("send without MessageDeduplicationId", e.response["Error"]["Code"], "InvalidParameterValue")

    # Redrive to the DLQ.
    dlq = make_fifo("probe-dlq")
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    rq = make_fifo("probe-redrive", VisibilityTimeout=1,
                   RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}))
    queues += [dlq, rq]
    sqs.send_message(QueueUrl=rq, MessageBody="R", MessageGroupId="R", MessageDeduplicationId="r1")
    seen = 0
    for _ in range(4):
        if recv(rq, vis=1):
            seen += 1
        time.sleep(1.2)
    dl = recv(dlq, vis=30)
    report("redrive maxReceiveCount=2", f"received {seen} times from source; in DLQ: {[m['Body'] for m in dl]}",
           "received 2 times; then in the DLQ")
    report("DLQ message attributes", dl[0]["Attributes"] if dl else None)

    # ChangeMessageVisibility to 0 releases the group at once.
    q = seat_queue("cmv")
    queues.append(q)
    sqs.send_message(QueueUrl=q, MessageBody="J0", MessageGroupId="J", MessageDeduplicationId="j0")
    sqs.send_message(QueueUrl=q, MessageBody="J1", MessageGroupId="J", MessageDeduplicationId="j1")
    j = recv(q, n=1, vis=60)
    report("receive n=1 from group J", [m["Body"] for m in j], "['J0']")
    report("receive while J0 in flight", [m["Body"] for m in recv(q, vis=30)], "[]")
    sqs.change_message_visibility(QueueUrl=q, ReceiptHandle=j[0]["ReceiptHandle"], VisibilityTimeout=0)
    report("after ChangeMessageVisibility(0) of J0", [m["Body"] for m in recv(q, vis=30)], "['J0', 'J1']")

    # Delete with a receipt handle from an earlier receive (message since received again).
    q = seat_queue("stale")
    queues.append(q)
    sqs.send_message(QueueUrl=q, MessageBody="K", MessageGroupId="K", MessageDeduplicationId="k")
    old = recv(q, vis=1)[0]["ReceiptHandle"]
    time.sleep(1.5)
    recv(q, vis=30)
    try:
        sqs.delete_message(QueueUrl=q, ReceiptHandle=old)
        left = recv(q, vis=0)
        report("delete with a stale receipt handle", f"accepted; message gone: {not left}",
               "FIFO: may fail with ReceiptHandleIsInvalid or be ignored; do not rely on it")
    except ClientError as e:
        report("delete with a stale receipt handle", e.response["Error"]["Code"])

    for u in queues:
        sqs.delete_queue(QueueUrl=u)


if __name__ == "__main__":
    probe_dynamodb()
    probe_sqs()
