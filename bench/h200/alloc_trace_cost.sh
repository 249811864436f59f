#!/usr/bin/env bash
# What the allocator trace costs the job: each model's per-step seconds
# (fitjob.py's log, 10 steps) under memrec record with and without
# --alloc-trace, on one H200. The trace covers the first three steps; the
# steps after it show the history off again. Writes OUT/steps.txt, a line
# per run: its name and each step's milliseconds.
#   bash bench/h200/alloc_trace_cost.sh OUT      (with $MEMREC or ./memrec built)
set -u
OUT=${1:?usage: bash bench/h200/alloc_trace_cost.sh OUTDIR}
mkdir -p "$OUT"
BIN=${MEMREC:-$PWD/memrec}
for m in ${MODELS:-gpt2:16 resnet50:64}; do
  IFS=: read -r n b <<< "$m"
  for tr in "" "--alloc-trace"; do
    k=$n${tr:+-trace}
    timeout 60 "$BIN" --db "$OUT/c.db" record $tr --name "$k" -- \
      python3 bench/h200/fitjob.py --model "$n" --batch "$b" --steps 10 --probe --log "$OUT/$k.log" > "$OUT/$k.txt" 2>&1
    python3 - "$OUT/$k.log" "$k" <<'PY' | tee -a "$OUT/steps.txt"
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"seconds"' in l]
print(sys.argv[2], " ".join("%.1f" % (1000 * s["seconds"]) for s in steps))
PY
  done
done
