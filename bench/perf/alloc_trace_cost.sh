#!/usr/bin/env bash
# What the allocator trace costs the job: each model's per-step seconds
# (fitjob.py's log, 10 steps) under memrec record with and without
# --alloc-trace, on one H200, ROUNDS rounds alternating. The trace covers
# the first three steps; the steps after it show the history off again.
# Writes OUT/steps.txt (a line per run: its name and each step's
# milliseconds) and OUT/cost.txt (per model, the medians over rounds of
# steps 1-2, the history on past the first step's warm-up, and of steps
# 3-9, with and without).
#   ROUNDS=2 bash bench/perf/alloc_trace_cost.sh OUT      (with $MEMREC or ./memrec built)
set -u
OUT=${1:?usage: bash bench/perf/alloc_trace_cost.sh OUTDIR}
mkdir -p "$OUT"
BIN=${MEMREC:-$PWD/memrec}
for r in $(seq "${ROUNDS:-2}"); do
  for m in ${MODELS:-gpt2:16 resnet50:64}; do
    IFS=: read -r n b <<< "$m"
    for tr in false true; do
      k=$n; [ "$tr" = true ] && k=$n-trace
      k=$k-r$r
      timeout 60 "$BIN" --db "$OUT/c.db" record --alloc-trace=$tr --name "$k" -- \
        python3 bench/validation/fitjob.py --model "$n" --batch "$b" --steps 10 --probe --log "$OUT/$k.log" > "$OUT/$k.txt" 2>&1
      python3 - "$OUT/$k.log" "$k" <<'PY' | tee -a "$OUT/steps.txt"
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"seconds"' in l]
print(sys.argv[2], " ".join("%.1f" % (1000 * s["seconds"]) for s in steps))
PY
    done
  done
done
python3 - "$OUT/steps.txt" <<'PY' | tee "$OUT/cost.txt"
import collections, statistics, sys
runs = collections.defaultdict(list)  # (model, traced) -> per-step ms lists
for line in open(sys.argv[1]):
    name, *ms = line.split()
    base = name.rsplit("-r", 1)[0]
    traced = base.endswith("-trace")
    runs[(base[:-6] if traced else base, traced)].append([float(x) for x in ms])
for model in sorted({m for m, _ in runs}):
    row = []
    for traced in (False, True):
        rs = runs.get((model, traced), [])
        on = statistics.median([x for r in rs for x in r[1:3]]) if rs else float("nan")
        off = statistics.median([x for r in rs for x in r[3:]]) if rs else float("nan")
        row.append((on, off))
    (a_on, a_off), (b_on, b_off) = row
    print("%s: steps 1-2 %.1f ms without, %.1f ms with the trace (%+.1f %%); steps 3-9 %.1f / %.1f ms (%+.1f %%)"
          % (model, a_on, b_on, 100 * (b_on - a_on) / a_on, a_off, b_off, 100 * (b_off - a_off) / a_off))
PY
