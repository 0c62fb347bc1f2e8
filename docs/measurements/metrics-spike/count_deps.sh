#!/usr/bin/env bash
# Distinct crates (name + version) in a package's normal dependency tree, for the target given.
set -euo pipefail
cd "$(dirname "$0")"
tree() { nice -n 10 cargo tree -q -e normal --prefix none --target "$2" -p "$1" | sed 's/ (\*)//; s/ (proc-macro)//' | awk '{print $1" "$2}' | sort -u; }
mkdir -p out/trees
for p in spike-a spike-b spike-c fn-worker fn-worker-metrique; do tree $p aarch64-unknown-linux-gnu > out/trees/$p.txt; done
for p in runner-base runner-mep runner-pc; do tree $p x86_64-unknown-linux-gnu > out/trees/$p.txt; done
cd out/trees
for p in *.txt; do printf '%-24s %4d\n' "${p%.txt}" "$(wc -l < $p)"; done
added() { comm -13 "$1.txt" "$2.txt"; }
echo "--- added by metrique to spike-a (C - A): $(added spike-a spike-c | wc -l)"; added spike-a spike-c | tr '\n' ' '; echo
echo "--- added by seatgate to spike-a (B - A): $(added spike-a spike-b | wc -l) (all of seatgate's own tree; seatgate::metrics uses only std + serde_json)"
echo "--- added by metrique to functions/worker's tree: $(added fn-worker fn-worker-metrique | wc -l)"; added fn-worker fn-worker-metrique | tr '\n' ' '; echo
echo "--- added by metrics + metrics-exporter-prometheus (no default features) to the runner: $(added runner-base runner-mep | wc -l)"; added runner-base runner-mep | tr '\n' ' '; echo
echo "--- added by prometheus-client to the runner: $(added runner-base runner-pc | wc -l)"; added runner-base runner-pc | tr '\n' ' '; echo
