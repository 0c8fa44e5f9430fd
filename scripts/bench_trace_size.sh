#!/usr/bin/env bash
# Bytes per event of kprof's Chrome trace, and the size of the kprof run file it came from, for
# the bundled default run and two GPU fixtures (CPU only).
#   scripts/bench_trace_size.sh [KPROF_BINARY=build/kprof]
set -euo pipefail
cd "$(dirname "$0")/.."
kprof=${1:-build/kprof}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| run | trace events | trace bytes | bytes/event | kprof file bytes |"
echo "|---|---|---|---|---|"
for run in examples/default-run tests/fixtures/gpu/nvtx_threads tests/fixtures/gpu/storm_2k; do
  "$kprof" report "$run" --no-hints --trace "$tmp/t.json" --force --format json >/dev/null 2>&1
  python3 - "$run" "$tmp/t.json" <<'PY'
import json, os, sys
run, trace = sys.argv[1], sys.argv[2]
n = len(json.load(open(trace))["traceEvents"])
b = os.path.getsize(trace)
k = sum(os.path.getsize(os.path.join(run, f)) for f in os.listdir(run) if f.endswith(".kprof"))
print(f"| {run} | {n} | {b} | {b / n:.1f} | {k} |")
PY
done
