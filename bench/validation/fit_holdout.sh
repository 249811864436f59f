#!/usr/bin/env bash
# Checks compare --by's prediction and memrec fit on models a rule for the
# allocator at the limit was not derived from (bench/validation/fitmodels.py:
# lm_wide, bert and convnext_tiny for the fixed share, t5 and deeplab for one
# largest segment), on one H200. For each MODELS entry name:multiple:small-batches:
#   1. the small batches are recorded with the probe (and the allocator's
#      largest segments logged after the steps, --snap; the allocator's
#      requests traced too, record's --alloc-trace, for the replay, unless
#      ALLOC_TRACE=0);
#   2. compare --by batch_size --headroom 0% predicts the largest batch
#      (--by $TAG: TAG=seq_len with gpt2_seq, whose value is the sequence length);
#   3. memrec fit --runs (those) --steps 3 --multiple M finds the limit;
#   4. fit's result must run 3 steps in a fresh process and result + M must
#      not (the limit is then exact to M), and the prediction must not be
#      above it.
# A model whose small runs fail (the job itself broken) is skipped and
# counted as a failure. A multiple of 0 records the small batches only (steps 1 and 2), for a
# model whose limit is known (fit_limits.json).
# Writes into $1: summary.txt, each model's prediction and fit JSON, the
# fitjob logs, and the database (holdout.db). Run from the repo root with
# $MEMREC (or ./memrec) built: bash bench/validation/fit_holdout.sh OUT
set -u
DEST=${1:?usage: bash bench/validation/fit_holdout.sh OUTDIR}
mkdir -p "$DEST"
BIN=${MEMREC:-$PWD/memrec}
DB=$DEST/holdout.db
export PYTHONUNBUFFERED=1
START=$(date +%s)
DEADLINE=$((START + ${BUDGET_S:-560}))
within() {
  local s=$1; shift
  local l=$((DEADLINE - $(date +%s)))
  [ "$l" -lt "$s" ] && s=$l
  [ "$s" -le 5 ] && return 124
  timeout "$s" "$@"
}
MODELS=${MODELS:-"lm_wide:1:2,4,8 bert:1:16,32,64 convnext_tiny:8:16,32,64"}
TAG=${TAG:-batch_size}  # the value's tag: seq_len for gpt2_seq (a sequence length, not a batch)
for spec in $MODELS; do
  IFS=: read -r m mult smalls <<< "$spec"
  runs="" ok=y
  for b in ${smalls//,/ }; do
    within 90 "$BIN" --db "$DB" record --alloc-trace=${ALLOC_TRACE:-1} --name "$m-bs$b" --tag "$TAG=$b" --tag "model=$m" -- \
      python3 bench/validation/fitjob.py --model "$m" --batch "$b" --steps 3 --probe --snap --log "$DEST/$m-bs$b.log" \
      > "$DEST/$m-rec-bs$b.txt" 2>&1 || ok=n
    runs="$runs${runs:+,}$m-bs$b"
  done
  if [ "$ok" = n ]; then  # the job itself is broken: nothing to fit
    echo "$m 0 $mult n y" >> "$DEST/verified.txt"
    continue
  fi
  within 30 "$BIN" --db "$DB" compare --by "$TAG" --headroom 0% --json ${runs//,/ } > "$DEST/$m-predict.json" 2> "$DEST/$m-predict.err"
  [ "$mult" = 0 ] && continue
  within 300 "$BIN" --db "$DB" fit --by "$TAG" --id "$m" --steps 3 --multiple "$mult" --runs "$runs" --json -- \
    python3 bench/validation/fitjob.py --model "$m" --batch {} --steps 100000 --probe > "$DEST/$m-fit.json" 2> "$DEST/$m-fit.txt"
  echo "fit exit $?" >> "$DEST/$m-fit.txt"
  L=$(python3 -c "import json; print(int(json.load(open('$DEST/$m-fit.json'))['largest_ran']))" 2>/dev/null || echo 0)
  ran=n next=y
  if [ "$L" -gt 0 ]; then
    within 120 python3 bench/validation/fitjob.py --model "$m" --batch "$L" --steps 3 --snap --log "$DEST/$m-limit.log" \
      >> "$DEST/$m-verify.txt" 2>&1 && ran=y
    within 120 python3 bench/validation/fitjob.py --model "$m" --batch $((L + mult)) --steps 3 --log "$DEST/$m-above.log" \
      >> "$DEST/$m-verify.txt" 2>&1 || next=n
  fi
  echo "$m $L $mult $ran $next" >> "$DEST/verified.txt"
done
python3 - "$DEST" <<'PY' | tee "$DEST/summary.txt"
import json, os, sys
dest = sys.argv[1]
def load(n):
    try:
        return json.load(open(os.path.join(dest, n)))
    except Exception:
        return None
fails = 0
for line in open(os.path.join(dest, "verified.txt")):
    m, L, mult, ran, nxt = line.split()
    L, mult = int(L), int(mult)
    exact = ran == "y" and nxt == "n"
    print(("PASS " if exact else "FAIL ") + "%s: fit's %d runs in a fresh process (%s), %d does not (%s)" % (m, L, ran, L + mult, "fails" if nxt == "n" else "runs"))
    fails += not exact
    pred, fit = load(m + "-predict.json"), load(m + "-fit.json") or {}
    b = (pred or {}).get("by_tag", {})
    p = b.get("max_fitting_value_no_headroom")
    if p is None or not L:
        print("FAIL %s: no prediction" % m); fails += 1; continue
    ok = p <= L
    fails += not ok
    print(("PASS " if ok else "FAIL ") + "%s: predicted %d, limit %d (%.1f %% below; allowance %.1f %%, %s)" % (m, p, L, 100 * (L - p) / L, 100 * b.get("allowance_fraction", 0), b.get("basis", "") + ": " + b.get("interval_words", "")))
    print("     trials %s, %s s" % (fit.get("trials_used"), fit.get("seconds") and round(fit["seconds"])))
print("fit_holdout: " + ("PASS" if fails == 0 else "FAIL (%d)" % fails))
PY
echo "seconds: $(( $(date +%s) - START ))" | tee -a "$DEST/summary.txt"
