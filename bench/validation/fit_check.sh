#!/usr/bin/env bash
# Checks memrec fit and compare --by's prediction on one H200, in at most 7 minutes.
#
# Four models (bench/validation/fitmodels.py): ResNet-50 fp32, ViT-B/16 and GPT-2 small with
# bf16 autocast, whose largest batch is in bench/validation/fit_limits.json (bisected
# earlier with a fresh process per try), and lm_long, a transformer of another
# shape (1 024 tokens, a vocabulary of 128 256: most of its memory is logits).
# For each:
#   1. three short runs at small batches are recorded with the probe, and
#      compare --by batch_size --headroom 0% predicts the largest batch: it must not
#      be above the limit (PASS/FAIL), and is reported with how far below it is;
#   2. memrec fit --runs (those three) --steps 3 --multiple M bisects the limit with
#      bench/validation/fitjob.py: its largest-that-ran must equal fit_limits.json's
#      (lm_long: its result must run 3 steps and result + 1 must not, each in a
#      fresh process);
#   3. Lightning's BatchSizeFinder (power and binsearch, 3 steps per trial, its
#      default start at 2) on the same model: trials and seconds beside memrec fit's.
# Phase 1 (steps 1 and 2 for every model) goes first; the Lightning runs take the
# time left, and whatever the deadline cuts is reported as not measured.
# Writes into $1: summary.txt (the PASS/FAIL lines and the table), the JSON of
# each fit, prediction and finder, and the logs. Run from the repo root with
# ./memrec built: bash bench/validation/fit_check.sh OUT
set -u
DEST=${1:?usage: bash bench/validation/fit_check.sh OUTDIR}
mkdir -p "$DEST"
BIN=${MEMREC:-$PWD/memrec}
DB=$(mktemp -d)/fit.db
export PYTHONUNBUFFERED=1
START=$(date +%s)
DEADLINE=$((START + ${BUDGET_S:-410}))
left() { echo $((DEADLINE - $(date +%s))); }
# within SECONDS CMD...: runs CMD under a timeout of SECONDS or the time left.
within() {
  local s=$1; shift
  local l; l=$(left)
  [ "$l" -lt "$s" ] && s=$l
  [ "$s" -le 5 ] && return 124
  timeout "$s" "$@"
}
# name multiple small batches
# MODELS (the models of phase 1, by default all four) and FINDER (those the
# Lightning finder runs on) pick parts; LM_FOUND=N checks N as lm_long's
# limit (found by an earlier fit) where lm_long is not in MODELS.
ALL="gpt2:1:4,8,16 lm_long:1:4,8,16 resnet50:16:16,32,64 vit_b_16:16:16,32,64"
MODELS=${MODELS:-$ALL}
FINDER=${FINDER:-$MODELS}
SUM=$DEST/summary.txt
: > "$SUM"
say() { echo "$*" | tee -a "$SUM"; }

predict_and_fit() {
  local m=$1 mult=$2 smalls=$3 runs=""
  for b in ${smalls//,/ }; do
    within 60 "$BIN" --db "$DB" record --name "$m-bs$b" --tag "batch_size=$b" --tag "model=$m" -- \
      python3 bench/validation/fitjob.py --model "$m" --batch "$b" --steps 3 --probe > "$DEST/$m-rec-bs$b.txt" 2>&1
    runs="$runs${runs:+,}$m-bs$b"
    "$BIN" --db "$DB" export "$m-bs$b" | gzip -9 > "$DEST/$m-bs$b.jsonl.gz"
  done
  within 30 "$BIN" --db "$DB" compare --by batch_size --headroom 0% --json ${runs//,/ } > "$DEST/$m-predict.json" 2> "$DEST/$m-predict.err"
  within 180 "$BIN" --db "$DB" fit --id "$m" --steps 3 --multiple "$mult" --runs "$runs" --json -- \
    python3 bench/validation/fitjob.py --model "$m" --batch {} --steps 100000 --probe > "$DEST/$m-fit.json" 2> "$DEST/$m-fit.txt"
  echo "fit exit $?" >> "$DEST/$m-fit.txt"
}

# tries MODEL BATCH: 0 if 3 steps ran in a fresh process.
tries() {
  within 90 python3 bench/validation/fitjob.py --model "$1" --batch "$2" --steps 3 >> "$DEST/$1-verify.txt" 2>&1
}

for spec in $MODELS; do
  IFS=: read -r m mult smalls <<< "$spec"
  predict_and_fit "$m" "$mult" "$smalls"
done
# lm_long has no earlier limit: memrec fit's result must run and the next
# value must not.
LM=$(python3 -c "import json; print(int(json.load(open('$DEST/lm_long-fit.json'))['largest_ran']))" 2>/dev/null || echo ${LM_FOUND:-0})
LM_RAN=n; LM_NEXT=y
if [ "$LM" -gt 0 ]; then
  tries lm_long "$LM" && LM_RAN=y
  tries lm_long $((LM + 1)) || LM_NEXT=n
fi
for spec in $FINDER; do
  IFS=: read -r m mult smalls <<< "$spec"
  for mode in power binsearch; do
    within 150 python3 bench/validation/fit_lightning.py --model "$m" --mode "$mode" --steps 3 --out "$DEST/$m-$mode.json" \
      > "$DEST/$m-$mode.txt" 2>&1
  done
done

python3 - "$DEST" "$LM_RAN" "$LM_NEXT" "$LM" <<'EOF' | tee -a "$SUM"
import json, os, sys
dest, lm_ran, lm_next, lm = sys.argv[1:]
limits = json.load(open("bench/validation/fit_limits.json"))
def load(name):
    try:
        return json.load(open(os.path.join(dest, name)))
    except Exception:
        return None
rows, fails = [], 0
def claim(ok, text):
    global fails
    fails += not ok
    print(("PASS " if ok else "FAIL ") + text)
for m, mult in (("gpt2", 1), ("lm_long", 1), ("resnet50", 16), ("vit_b_16", 16)):
    fit, pred = load(m + "-fit.json"), load(m + "-predict.json")
    got = fit and fit.get("largest_ran")
    if m == "lm_long":
        got = got or (int(lm) or None)
        lim = got if lm_ran == "y" and lm_next == "n" else None
        claim(lim is not None, "%s: fit's largest that ran, %s, runs 3 steps in a fresh process (%s) and %s does not (%s)"
              % (m, got, lm_ran, (got or 0) + 1, "fails" if lm_next == "n" else "runs"))
    else:
        lim = limits[m]["largest_fitting"]
        claim(got == lim, "%s: fit found %s, bisected earlier %s (--multiple %d)" % (m, got, lim, mult))
    p = pred and pred.get("by_tag", {}).get("max_fitting_value_no_headroom")
    if p is not None and lim:
        below = 100 * (lim - p) / lim
        claim(p <= lim, "%s: prediction from small batches %s, not above the limit %s (%.1f %% below; %s)"
              % (m, int(p), lim, below, pred["by_tag"].get("interval_words", "")))
        print("     %s within 10 %% below: %s" % (m, "yes" if below <= 10 else "NO"))
    else:
        claim(False, "%s: no prediction (%s)" % (m, m + "-predict.err"))
    trials = fit and fit.get("trials_used")
    secs = fit and fit.get("seconds")
    row = [m, str(lim), str(p and int(p)), "%s / %s s" % (trials, secs and round(secs))]
    for mode in ("power", "binsearch"):
        f = load("%s-%s.json" % (m, mode))
        row.append("%s (%s trials, %s s)" % (f["found"], f["trials"], f["seconds"]) if f else "not measured")
    rows.append(row)
print()
print("| model | limit | predicted from small batches | memrec fit: trials / seconds | BatchSizeFinder power | binsearch |")
print("| --- | --- | --- | --- | --- | --- |")
for r in rows:
    print("| " + " | ".join(r) + " |")
print("fit_check: " + ("PASS" if fails == 0 else "FAIL (%d)" % fails))
EOF
say "seconds: $(( $(date +%s) - START ))"
