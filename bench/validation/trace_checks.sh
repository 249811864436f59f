#!/usr/bin/env bash
# The checks this version's allocator trace and replay still need on one
# H200, in one call: the trace's guards on a real job (the job's own
# history turned on at its second step and before its first CUDA call, a
# side stream, a plain job), then compare --by seq_len and memrec fit
# --by seq_len on GPT-2 with eager attention (its scores grow with the
# square of the length). Writes OUT/guards.txt and OUT/h (fit_holdout.sh's).
#   bash bench/validation/trace_checks.sh OUT      (with $MEMREC or ./memrec built)
set -u
OUT=${1:?usage: bash bench/validation/trace_checks.sh OUTDIR}
mkdir -p "$OUT"
BIN=${MEMREC:-$PWD/memrec}
for m in plain own early streams; do
  timeout 60 "$BIN" --db "$OUT/g.db" record --torch --name "guard-$m" -- python3 bench/validation/trace_guard.py --mode "$m" > "$OUT/guard-$m.txt" 2>&1
  echo "== $m (exit $?): $(grep '"mode"' "$OUT/guard-$m.txt")"
  "$BIN" --db "$OUT/g.db" analyze "guard-$m" 2>&1 | grep -i "allocator trace\|probe says"
done | tee "$OUT/guards.txt"
TAG=seq_len MODELS=${MODELS:-"gpt2_seq:64:256,512,1024"} BUDGET_S=${BUDGET_S:-400} bash bench/validation/fit_holdout.sh "$OUT/h"
