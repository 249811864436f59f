#!/usr/bin/env bash
# memrec fit on a torchrun job, on one H200: two DDP ranks (gloo) share the one
# GPU, ResNet-18 fp32 with SGD (bench/validation/fitjob.py), --batch per rank. memrec
# fit runs its own two small trials (--min, 4 × --min), then searches with 3 steps
# a trial (--multiple 32), ending each trial's whole process group (torchrun and
# both ranks) once every rank has made its steps. The two ranks share the GPU, so
# fit runs the largest value that ran 3 times in all before it stops. The answer
# is then checked in fresh processes: the largest that ran, 3 more times (each
# must run 3 steps under torchrun), and the value --multiple above it once.
#   bash bench/validation/fit_ddp.sh OUT        (memrec at $MEMREC or ./memrec)
set -u
DEST=${1:?usage: bash bench/validation/fit_ddp.sh OUTDIR}
mkdir -p "$DEST"
BIN=${MEMREC:-$PWD/memrec}
DB=$(mktemp -d)/fit.db
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
M=${MULTIPLE:-32}
SUM=$DEST/summary.txt
: > "$SUM"
say() { echo "$*" | tee -a "$SUM"; }
job() { # job BATCH STEPS: the training command under torchrun
  echo torchrun --standalone --nproc_per_node 2 bench/validation/fitjob.py --model resnet18 --batch "$1" --steps "$2" --probe
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$SUM"
# A smoke run first: two ranks on one GPU must train at all.
timeout 120 $(job 32 3) > "$DEST/smoke.txt" 2>&1
say "smoke run (batch 32, 3 steps): exit $?"
s=$(date +%s)
timeout ${FIT_S:-480} "$BIN" --db "$DB" fit --id ddp --steps 3 --min 64 --multiple "$M" --json -- $(job {} 100000) \
  > "$DEST/fit.json" 2> "$DEST/fit.txt"
say "fit: exit $? in $(( $(date +%s) - s )) s"
tail -n 25 "$DEST/fit.txt" | tee -a "$SUM"
got=$(python3 -c "import json; print(int(json.load(open('$DEST/fit.json'))['largest_ran']))" 2>/dev/null || echo 0)
if [ "$got" -gt 0 ]; then
  ok=0
  for i in 1 2 3; do
    timeout 120 $(job "$got" 3) > "$DEST/verify-$got-$i.txt" 2>&1 && ok=$((ok + 1))
  done
  timeout 120 $(job $((got + M)) 3) > "$DEST/verify-$((got + M)).txt" 2>&1; r2=$?
  say "fresh processes: $got ran $ok of 3 (want 3), $((got + M)) exit $r2"
  [ $ok -eq 3 ] && say "fit_ddp: PASS" || say "fit_ddp: FAIL"
else
  say "fit_ddp: FAIL (no result)"
fi
"$BIN" --db "$DB" runs | tee -a "$SUM"
"$BIN" --db "$DB" analyze "ddp-$got" 2>/dev/null | head -20 > "$DEST/analyze-largest.txt"
