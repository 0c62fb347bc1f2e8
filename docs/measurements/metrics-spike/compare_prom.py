#!/usr/bin/env python3
"""Compares out/{mep,pc}.txt with out/seatgate.txt: samples as (name, labels as a set, value),
order ignored; then the differences in the text itself."""
import re, sys
def samples(path):
    out = {}
    for line in open(path):
        line = line.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        series, value = line.rsplit(" ", 1)
        m = re.match(r"([^{]+)(?:\{(.*)\})?$", series)
        name, labels = m.group(1), m.group(2) or ""
        pairs = frozenset(tuple(p.split("=", 1)) for p in re.findall(r'[a-z_]+="[^"]*"', labels))
        pairs = frozenset((k, v.replace(".0\"", "\"")) if k == "le" else (k, v) for k, v in pairs)
        out[(name, pairs)] = float(value)
    return out
def meta(path):
    return sorted(l.strip() for l in open(path) if l.startswith("#"))
base = samples("out/seatgate.txt")
for other in ["mep", "pc"]:
    s = samples(f"out/{other}.txt")
    same = s == base
    print(f"{other}: samples={len(s)} (seatgate {len(base)}); same names+label sets+values as seatgate: {same}")
    if not same:
        for k in sorted(set(base) ^ set(s), key=str)[:6]:
            print("   only in", "seatgate" if k in base else other, k)
    mb, mo = set(meta("out/seatgate.txt")), set(meta(f"out/{other}.txt"))
    print(f"   #-lines only in {other}: {sorted(mo - mb)[:4]}")
