#!/usr/bin/env python3
"""The breaker's onset through a running local runner, as issue 17 measured it.

Against a runner started as the README says (`cargo run --release -p seatgate-local`), this
reads distinct seats (each a cache miss, so each an upstream call) at a steady rate, healthy for
a while, then turns the simulator's outage on while the reads go on, and judges the simulator's
own call log: how many calls reached the failing upstream before the breaker opened (the
breaker's `since`, from the runner's `GET /__ops`), and, with `--retry-after`, how many arrived
before a Retry-After the upstream gave had passed. Standard library only; loopback only; bounded
in count and time.

    scripts/breaker-onset.py                      # 25 reads/s, 10 s healthy, 20 s outage
    scripts/breaker-onset.py --retry-after 2      # the outage's 503s say Retry-After: 2
"""
import argparse
import json
import threading
import time
import urllib.error
import urllib.request


def call(method, url, body=None, token=None, timeout=5):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("content-type", "application/json")
    if token:
        req.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--api", default="http://127.0.0.1:3000")
    p.add_argument("--upstream", default="http://127.0.0.1:3001")
    p.add_argument("--rate", type=float, default=25.0, help="seat reads per second")
    p.add_argument("--healthy", type=float, default=10.0, help="seconds before the outage")
    p.add_argument("--outage", type=float, default=20.0, help="seconds of outage (reads go on)")
    p.add_argument("--retry-after", type=int, default=0, help="Retry-After on the outage's 503s (0: none)")
    a = p.parse_args()
    for u in (a.api, a.upstream):
        host = u.split("//", 1)[1].split(":", 1)[0]
        if not (host.startswith("127.") or host == "localhost"):
            raise SystemExit(f"loopback only: {u}")

    status, body = call("POST", f"{a.api}/dev/token", {"sub": "onset-reader"})
    assert status == 200, (status, body)
    token = body["token"]
    call("POST", f"{a.upstream}/__admin/faults", {})
    run = f"{int(time.time())}"
    answers = {}
    lock = threading.Lock()
    stop = time.monotonic() + a.healthy + a.outage
    n = int((a.healthy + a.outage) * a.rate)
    start = time.monotonic()

    def read(i):
        status, _ = call("GET", f"{a.api}/seats/ONSET-{run}-{i}", token=token)
        with lock:
            answers[status] = answers.get(status, 0) + 1

    first_open = {}

    def watch():
        # The first Open the runner's store shows, polled every 50 ms (its `since` is when it
        # was decided); later reopenings after failed probes must not hide it.
        while time.monotonic() < stop and "since" not in first_open:
            _, ops = call("GET", f"{a.api}/__ops")
            b = (ops or {}).get("breaker") or {}
            if b.get("phase") == "open":
                first_open.update(b)
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    threads = []
    outage_ms = None
    for i in range(n):
        at = start + i / a.rate
        if outage_ms is None and at >= start + a.healthy:
            outage_ms = int(time.time() * 1000)
            call("POST", f"{a.upstream}/__admin/faults", {
                "outage_for_ms": int(a.outage * 1000),
                "outage_retry_after_secs": a.retry_after,
            })
        time.sleep(max(0.0, at - time.monotonic()))
        if time.monotonic() > stop:
            break
        t = threading.Thread(target=read, args=(i,))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    watcher.join()
    _, ops = call("GET", f"{a.api}/__ops")
    _, log = call("GET", f"{a.upstream}/__admin/calls?since_ms={outage_ms}")
    calls = sorted(c["at_ms"] for c in log["calls"] if c["at_ms"] < outage_ms + int(a.outage * 1000))
    breaker = ops["breaker"]
    result = {"reads": n, "answers": answers, "outage_from_ms": outage_ms,
              "calls_during_outage": len(calls), "breaker": breaker}
    if a.retry_after:
        # The simulator answers at once: a call's arrival is when its Retry-After was given.
        held_until, given, early, in_flight = 0, 0, 0, 0
        for at in calls:
            if at < held_until:
                if at <= given + 50:
                    in_flight += 1
                else:
                    early += 1
                held_until = max(held_until, at + a.retry_after * 1000)
            else:
                given, held_until = at, at + a.retry_after * 1000
        result.update(calls_before_retry_after=early, in_flight_when_given=in_flight,
                      holds=ops.get("upstream_holds"))
    else:
        opened = first_open.get("since")
        result["first_open"] = first_open or None
        result["calls_outage_to_open"] = (
            sum(1 for at in calls if at <= opened) if opened else None)
        result["open_ms_after_outage"] = opened - outage_ms if opened else None
        result["first_calls_ms_after_outage"] = [at - outage_ms for at in calls[:15]]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
