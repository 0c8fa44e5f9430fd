#!/usr/bin/env bash
# Writes the golden outputs of every recorded fixture: for each input the JSON report in every
# view, the table, CSV and Markdown reports, the Chrome trace; for the diff fixtures the diff
# verdicts. tests/unit/golden/golden_test.cpp runs the same commands (listed in
# tests/golden/cases.txt) and compares byte for byte.
#
#   scripts/make_goldens.sh [KPROF]      (default build/kprof; run from anywhere)
#
# Regenerate only when an output is meant to change, and say why in the commit: a golden that
# follows every change proves nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
KPROF=${1:-build/kprof}
[ -f "$KPROF" ] && [ -x "$KPROF" ] || { echo "make_goldens: $KPROF: not a built kprof" >&2; exit 2; }
KPROF=$(realpath "$KPROF")
OUT=tests/golden
CASES=$OUT/cases.txt
mkdir -p "$OUT/out"
find "$OUT/out" -name '*.gz' -delete  # (keeps out/.gitattributes, the goldens' diff driver)

# The cases: NAME<TAB>ARGS (ARGS relative to the repository root; {OUT} is the output file for
# commands that write a file rather than stdout).
{
  inputs=()
  for d in tests/fixtures/gpu/*/; do
    d=${d%/}
    case $d in */diff) continue ;; esac
    inputs+=("$d")
  done
  inputs+=(tests/fixtures/gpu/diff/base/rep1 examples/default-run
           tests/fixtures/kineto/mlp_train_free.trace.json.gz)
  for in in "${inputs[@]}"; do
    name=$(basename "$in"); name=${name%%.*}
    [ "$name" = rep1 ] && name=diff_base_rep1
    for by in op kernel range-path stream device; do
      printf '%s.json.%s\treport %s --format json --by %s\n' "$name" "$by" "$in" "$by"
    done
    printf '%s.table\treport %s --top 15\n' "$name" "$in"
    printf '%s.csv\treport %s --format csv --by kernel\n' "$name" "$in"
    printf '%s.md\treport %s --format md --by range-path\n' "$name" "$in"
    printf '%s.trace\treport %s --no-hints --format csv --top 1 --trace {OUT}\n' "$name" "$in"
  done
  # The module view of a PyTorch run (kprof run --pytorch auto).
  P=tests/fixtures/gpu/pytorch_auto
  printf 'pytorch_auto.module.table\treport %s --by module --top 0\n' $P
  printf 'pytorch_auto.module.json\treport %s --by module --format json\n' $P
  # Source lines (--pytorch stack), torch.compile's regions, and eager against compiled.
  P=tests/fixtures/gpu
  printf 'pytorch_stack.source.table\treport %s/pytorch_stack --by source --top 0\n' $P
  printf 'pytorch_compile_q.compiled.table\treport %s/pytorch_compile_q --by compiled\n' $P
  printf 'pytorch_compile_q.compiled.json\treport %s/pytorch_compile_q --by compiled --format json\n' $P
  printf 'diff_eager_compiled.table\tdiff %s/pytorch_eager_q %s/pytorch_compile_q --top 10\n' $P $P
  # An eager and a torch.compile'd step, each recorded with --capture nvtx:measured (issue 36).
  printf 'diff_measured_train.table\tdiff %s/measured_train_eager %s/measured_train_compiled --top 10\n' $P $P
  D=tests/fixtures/gpu/diff
  printf 'diff_same.json\tdiff --base %s/base --new %s/same --format json\n' $D $D
  printf 'diff_slow10.json\tdiff --base %s/base --new %s/slow10 --format json\n' $D $D
  printf 'diff_slow10.md\tdiff --base %s/base --new %s/slow10 --format md\n' $D $D
  printf 'diff_slow10.junit\tdiff --base %s/base --new %s/slow10 --format junit\n' $D $D
} >"$CASES"

n=0
: >"$OUT/status.txt"
while IFS=$'\t' read -r name args; do
  out=$OUT/out/$name
  rc=0
  if [[ $args == *"{OUT}"* ]]; then
    # shellcheck disable=SC2086
    "$KPROF" ${args//\{OUT\}/$out} >/dev/null 2>&1 || rc=$?
  else
    # shellcheck disable=SC2086
    "$KPROF" $args >"$out" 2>/dev/null || rc=$?
  fi
  printf '%s\t%d\n' "$name" "$rc" >>"$OUT/status.txt"
  n=$((n + 1))
done <"$CASES"
# Stored compressed: the Chrome traces are megabytes of repetitive JSON.
gzip -n -9 -f "$OUT"/out/*
echo "make_goldens: $n cases, $(du -sh "$OUT/out" | cut -f1) in $OUT/out"
