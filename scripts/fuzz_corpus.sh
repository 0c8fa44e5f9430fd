#!/usr/bin/env bash
# Regenerates the fuzz targets' seed corpus (fuzz/corpus/<target>/) and the CLI target's fixture
# files (fuzz/cli_files/) from the recordings in tests/fixtures and examples/, with build/kprof
# (docs/fuzzing.md). Run files are cut at a block boundary to stay small.
#   scripts/fuzz_corpus.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
KPROF=${1:-build}/kprof
C=fuzz/corpus
G=tests/fixtures/gpu
rm -rf "$C" fuzz/cli_files
mkdir -p "$C"/{run_file,chrome_trace,budget,summary,cli} fuzz/cli_files

# The first whole blocks of a run file, at most MAX bytes (docs/format.md: 16-byte header, then
# blocks of a 16-byte header and payload_bytes of payload).
cut_run() {
  python3 - "$1" "$2" "$3" <<'PY'
import struct, sys
src, dst, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(src, "rb").read()
pos = 16
while pos + 16 <= len(data):
    size = struct.unpack_from("<I", data, pos + 8)[0]
    if pos + 16 + size > limit:
        break
    pos += 16 + size
open(dst, "wb").write(data[:pos])
PY
}

SMALL=(vector_add memset memcpy_kinds graph_launch sync_kinds nvtx_threads crash_abort
       hint_pageable_memcpy hint_fp32_gemm hint_profiler_data_loss train_step graph_replay_graph)
for f in "${SMALL[@]}"; do cp $G/$f/*.kprof "$C/run_file/$f.kprof"; done
for f in torch_nvtx hint_gpu_idle_gaps hint_alloc_churn storm_2k graph_replay_node; do
  cut_run $G/$f/*.kprof "$C/run_file/$f.cut.kprof" 65536
done
cut_run examples/default-run/*.kprof "$C/run_file/default-run.cut.kprof" 131072

cp tests/fixtures/kineto/mlp_train_free.trace.json.gz "$C/chrome_trace/kineto_mlp.json.gz"
for f in vector_add memcpy_kinds nvtx_threads graph_launch train_step; do
  "$KPROF" report $G/$f/*.kprof --trace "$C/chrome_trace/$f.json" >/dev/null
  "$KPROF" report $G/$f/*.kprof --format json >"$C/summary/$f.json"
  "$KPROF" check $G/$f/*.kprof --write-budget "$C/budget/$f.json" >/dev/null
done
"$KPROF" report $G/train_step/*.kprof --by op --format json >"$C/summary/train_step.op.json"
gzip -9 -n -c "$C/chrome_trace/nvtx_threads.json" >"$C/chrome_trace/nvtx_threads.json.gz"
cat >"$C/budget/units.json" <<'JSON'
{"schema":"kprof.budget","version":1,"comment":"strings with units",
 "run":{"max_wall_ns":"12ms","max_kernels":12,"max_syncs":3,"max_peak_memory_bytes":"8GiB",
        "max_hint_severity":"warning"},
 "ops":{"forward":{"max_gpu_ns":"1.5ms","max_calls":2}},
 "kernels":{"gemm<float>":{"max_gpu_ns":2000000.5}}}
JSON

cp $G/vector_add/*.kprof fuzz/cli_files/a.kprof
cp "$C/chrome_trace/memcpy_kinds.json" fuzz/cli_files/t.json
cp "$C/summary/vector_add.json" fuzz/cli_files/s.json
cp "$C/budget/vector_add.json" fuzz/cli_files/b.json
seed() { local name=$1; shift; printf '%s\0' "$@" | head -c -1 >"$C/cli/$name"; }
seed report report a.kprof
seed report_kernel report run --by kernel --format json --top 3
seed report_trace report t.json a.kprof --trace out.json --html out.html
seed report_filter report reps/rep1 --filter 'vec.*' --sort calls --format md
seed diff diff reps run
seed diff_multi diff --base reps/rep1 reps/rep2 --new a.kprof s.json --format junit -o d.xml
seed diff_opts diff a.kprof t.json --threshold 1% --min-time 1us --min-memory 1KiB --alpha 0.1
seed check check a.kprof --budget b.json --format md
seed check_write check s.json reps --write-budget nb.json --margin 10% --top-kernels 2
seed export export a.kprof --sqlite out.sqlite --force
echo "fuzz corpus: $(du -sh fuzz/corpus fuzz/cli_files | tr '\n' ' ')"
