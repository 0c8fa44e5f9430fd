#!/usr/bin/env bash
# PyTorch without code changes (issue 11), on a GPU machine: recordings of examples/train_mlp.py
# (eager with kprof's ranges, eager with emit_nvtx, eager with no ranges, torch.compile, stack
# mode, emit_nvtx inside a --pytorch auto run), a non-PyTorch Python program and a C++ program
# with and without the layer, and the loop time of train_mlp.py under each way of naming ops,
# interleaved rounds (docs/benchmarks.md, "PyTorch").
#   scripts/pytorch_session.sh OUT [BUILD] [ROUNDS]
# PHASE=rec or PHASE=overhead runs one part; PHASE=fixtures only the fixture-sized recordings
# (5 steps after 2 warm-up: eager and torch.compile at width 256, the same at batch 8192 with
# QuickGELU (the fixtures pytorch_eager_q and pytorch_compile_q), stack mode) and the
# eager-vs-compiled diffs.
# The overhead part times STEPS steps (default 100) of each of VARIANTS (default: all;
# names_no_tool, kprof's PyTorch layer without kprof, only when named).
set -u
PHASE=${PHASE:-all}
STEPS=${STEPS:-100}
VARIANTS=${VARIANTS:-plain kprof_off kprof_auto kprof_ops kprof_emit torch_profiler kprof_stack}
OUT=${1:?usage: pytorch_session.sh OUT [BUILD] [ROUNDS]}
BUILD=${2:-build}
ROUNDS=${3:-5}
K="$BUILD/kprof"
MLP=examples/train_mlp.py
mkdir -p "$OUT/runs"
exec > >(tee "$OUT/session-$PHASE.log") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"

rec() {  # rec NAME [kprof options] -- program...
  local name=$1; shift
  echo "== $name: $*"
  timeout 300 "$K" run --quiet -o "$OUT/runs/$name" "$@" > "$OUT/runs/$name.log" 2>&1
  echo "rc=$?"; tail -n 3 "$OUT/runs/$name.log"
}
if [ "$PHASE" = fixtures ]; then
  # Warm-up steps first, so that torch.compile compiles before the recorded steps too. Hidden
  # width 256: the element-wise kernels torch.compile fuses then weigh against the GEMMs.
  rec mlp_eager5 -- python3 $MLP --steps 5 --warmup 2 --width 256
  rec mlp_compile5 -- python3 $MLP --steps 5 --warmup 2 --width 256 --compile
  # Element-wise bound: the same at batch 8192 with the script's QuickGELU module.
  Q=(--steps 5 --warmup 2 --width 256 --batch 8192 --act quickgelu)
  rec mlp_eager_q -- python3 $MLP "${Q[@]}"
  rec mlp_compile_q -- python3 $MLP "${Q[@]}" --compile
  rec mlp_stack5 --pytorch stack -- python3 $MLP --steps 5 --warmup 2
  for r in mlp_eager5 mlp_compile5 mlp_stack5; do
    for by in op module compiled source; do
      echo "-- $r --by $by"; "$K" report "$OUT/runs/$r" --by $by --top 20 2>&1 | head -n 70
    done
  done
  "$K" diff "$OUT/runs/mlp_eager5" "$OUT/runs/mlp_compile5" --top 15 2>&1 | head -n 90
  "$K" diff "$OUT/runs/mlp_eager_q" "$OUT/runs/mlp_compile_q" --top 15 2>&1 | head -n 90
  for r in mlp_eager_q mlp_compile_q; do
    for by in module compiled; do
      echo "-- $r --by $by"; "$K" report "$OUT/runs/$r" --by $by --top 20 2>&1 | head -n 40
    done
  done
fi
if [ "$PHASE" = rec ] || [ "$PHASE" = all ]; then
# Fixture-sized recordings (10 steps) and full ones (100 steps, the acceptance comparison).
rec mlp_auto10 -- python3 $MLP --steps 10
rec mlp_emit10 --pytorch off -- python3 $MLP --steps 10 --emit-nvtx
rec mlp_auto -- python3 $MLP
rec mlp_emit --pytorch off -- python3 $MLP --emit-nvtx
rec mlp_none --pytorch off -- python3 $MLP --steps 10
rec mlp_auto_emit -- python3 $MLP --steps 10 --emit-nvtx
rec mlp_stack10 --pytorch stack -- python3 $MLP --steps 10
rec mlp_compile10 -- python3 $MLP --steps 10 --warmup 3 --compile
rec mlp_compile -- python3 $MLP --warmup 3 --compile
rec mlp_eager_w -- python3 $MLP --warmup 3
rec mlp_profiler_inside -- python3 $MLP --steps 10 --profiler

echo "== reports"
for r in mlp_auto mlp_emit mlp_auto10 mlp_compile10 mlp_stack10 mlp_none mlp_auto_emit; do
  echo "-- $r"; "$K" report "$OUT/runs/$r" --top 25 2>&1 | head -n 80
done
"$K" diff "$OUT/runs/mlp_eager_w" "$OUT/runs/mlp_compile" 2>&1 | head -n 60

echo "== unaffected programs"
PY='import sys, os; print("modules", len(sys.modules), "torch" in sys.modules, os.environ.get("KPROF_PYTORCH"))'
python3 -c "$PY"
"$K" run --quiet -o "$OUT/runs/py_plain" -- python3 -c "$PY"; echo "rc=$?"
"$BUILD/kernels/vector_add" > "$OUT/cpp_plain.txt" 2>&1; echo "cpp plain rc=$?"
"$K" run --quiet -o "$OUT/runs/cpp" -- "$BUILD/kernels/vector_add" > "$OUT/cpp_kprof.txt" 2>&1
echo "cpp kprof rc=$?"
cmp "$OUT/cpp_plain.txt" "$OUT/cpp_kprof.txt" && echo "cpp output identical"

fi
if [ "$PHASE" = overhead ] || [ "$PHASE" = all ]; then
echo "== overhead: loop time of train_mlp.py (5 warm-up steps, $STEPS timed), $ROUNDS rounds"
: > "$OUT/overhead.txt"
for round in $(seq 1 "$ROUNDS"); do
  for v in $VARIANTS; do
    M=(python3 $MLP --warmup 5 --steps "$STEPS")
    case $v in
      plain) cmd=("${M[@]}") ;;
      torch_profiler) cmd=("${M[@]}" --profiler) ;;
      kprof_off) cmd=("$K" run --quiet --pytorch off -o /tmp/ov --force -- "${M[@]}") ;;
      kprof_auto) cmd=("$K" run --quiet -o /tmp/ov --force -- "${M[@]}") ;;
      kprof_ops) cmd=("$K" run --quiet --pytorch ops -o /tmp/ov --force -- "${M[@]}") ;;
      kprof_emit) cmd=("$K" run --quiet --pytorch off -o /tmp/ov --force -- "${M[@]}" --emit-nvtx) ;;
      kprof_stack) cmd=("$K" run --quiet --pytorch stack -o /tmp/ov --force -- "${M[@]}") ;;
      # PyTorch's NVTX mode and the module hooks with no tool attached (no kprof run: the NVTX
      # calls go nowhere): what naming ops costs PyTorch itself.
      names_no_tool) cmd=(env PYTHONPATH="$BUILD/python" KPROF_PYTORCH=auto "${M[@]}") ;;
    esac
    s=$(timeout 300 "${cmd[@]}" 2>/dev/null | sed -n 's/.*loop_s=\([0-9.]*\).*/\1/p')
    echo "$round $v $s" | tee -a "$OUT/overhead.txt"
  done
done
python3 - "$OUT/overhead.txt" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 3]
by = {}
for _, v, s in rows:
    by.setdefault(v, []).append(float(s))
base = statistics.median(by["plain"])
for v, xs in by.items():
    m = statistics.median(xs)
    print(f"{v:15s} median {m*1e3:8.1f} ms  {m/base:5.2f}x plain  runs {' '.join(f'{x*1e3:.1f}' for x in xs)}")
EOF
fi
[ -d "$OUT/runs" ] && tar -C "$OUT" -czf "$OUT/pytorch-runs.tgz" runs && rm -rf "$OUT/runs"
