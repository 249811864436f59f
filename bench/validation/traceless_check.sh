#!/usr/bin/env bash
# Checks compare --by's prediction without an allocator trace on fresh
# recordings (record --alloc-trace=false) of three models against the limits
# memrec fit finds by bisection, on one GPU. For each model: fit_holdout.sh
# with ALLOC_TRACE=0 records the small batches, predicts (the largest-segment
# rule, allowance_basis largest_segment) and finds the limit, each checked in
# a fresh process; then the same runs are exported, their largest_segment_bytes
# taken out (as a probe before that field sends them), imported again and
# predicted by the inactive-split rule (allowance_basis inactive_split).
# Prints a row per model and rule: predicted, range, limit, error; any
# prediction above its limit is a FAIL.
# Run from the repo root with $MEMREC (or ./memrec) built:
#   bash bench/validation/traceless_check.sh OUT
set -u
DEST=${1:?usage: bash bench/validation/traceless_check.sh OUTDIR}
mkdir -p "$DEST"
BIN=${MEMREC:-$PWD/memrec}
MODELS=${MODELS:-"resnet18:64:32,64,128 vgg11:16:16,32,64 bert:1:16,32,64"}
ALLOC_TRACE=0 MODELS="$MODELS" BUDGET_S=${BUDGET_S:-560} bash bench/validation/fit_holdout.sh "$DEST"
DB2=$DEST/noseg.db
fail=0
for spec in $MODELS; do
  IFS=: read -r m mult smalls <<< "$spec"
  runs=""
  for b in ${smalls//,/ }; do
    "$BIN" --db "$DEST/holdout.db" export "$m-bs$b" --format jsonl |
      sed -e 's/,"largest_segment_bytes":[0-9]*//' > "$DEST/$m-bs$b.noseg.jsonl"
    "$BIN" --db "$DB2" import --name "$m-bs$b" "$DEST/$m-bs$b.noseg.jsonl" > /dev/null
    runs="$runs $m-bs$b"
  done
  "$BIN" --db "$DB2" compare --by batch_size --headroom 0% --json $runs > "$DEST/$m-predict-noseg.json"
  python3 - "$DEST" "$m" <<'PY' || fail=1
import json, sys
dest, m = sys.argv[1], sys.argv[2]
try:
    limit = int(json.load(open(f"{dest}/{m}-fit.json"))["largest_ran"])
except Exception as e:
    print(f"{m}: no limit from memrec fit ({e})"); sys.exit(1)
bad = False
for rule, f in (("recorded", f"{dest}/{m}-predict.json"), ("no largest segment", f"{dest}/{m}-predict-noseg.json")):
    by = json.load(open(f))["by_tag"]
    p, o = by.get("max_fitting_value_no_headroom"), by.get("max_fitting_value_optimistic")
    if p is None:
        print(f"{m} {rule}: no prediction"); bad = True; continue
    err = 100 * (limit - p) / limit
    verdict = "FAIL (above)" if p > limit else ("ok" if err <= 10 else "below by more than 10 %")
    print(f"| {m} | {rule} | {by.get('allowance_basis')} | {p:g} | {p:g}–{o} | {limit} | {err:.1f} % below | {verdict} |")
    bad = bad or p > limit
sys.exit(1 if bad else 0)
PY
done
[ "$fail" = 0 ] && echo PASS || echo FAIL
