#!/usr/bin/env python3
"""Init time (spawn -> first stdout line, median of RUNS) and per-invocation cost
(the binary's own `bench N` mode) of the three spike binaries on the host."""
import statistics, subprocess, sys, time, os

TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "target")) + "/release"
RUNS = int(os.environ.get("RUNS", "20"))
N = os.environ.get("N", "10000")

def first_line_ms(binary):
    t0 = time.perf_counter_ns()
    p = subprocess.Popen([binary, "once"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = p.stdout.readline()
    t1 = time.perf_counter_ns()
    p.stdout.read(); p.wait()
    assert line, binary
    return (t1 - t0) / 1e6

for name in sys.argv[1:] or ["a", "b", "c"]:
    binary = f"{TARGET}/spike-{name}"
    first_line_ms(binary)  # warm the page cache
    init = sorted(first_line_ms(binary) for _ in range(RUNS))
    with open(os.devnull, "w") as null:
        r = subprocess.run([binary, "bench", N], stdout=null, stderr=subprocess.PIPE, text=True)
    print(f"{name}: init median_ms={statistics.median(init):.3f} min_ms={init[0]:.3f} max_ms={init[-1]:.3f} (runs={RUNS}) | {r.stderr.strip()}")
