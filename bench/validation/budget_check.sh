#!/usr/bin/env bash
# The budget and its advice against real runs, on one H200. About 3 minutes.
#
#   bash bench/validation/budget_check.sh OUT     # ./memrec built from main, run from the repo root
#
# For three models built from code on random data (a ResNet-18-style CNN in
# float32, a GPT-style transformer with tied embeddings, a ViT-S/16), all
# float32 with AdamW (MODELS="lstm" for a fourth, a two-layer LSTM language
# model, whose recurrent kernels none of the three has; MODELS picks any):
#   1. a baseline recorded with memrec.watch, analysed (memrec's budget and
#      what would help);
#   2. each remedy run for real in one process: gradient accumulation over
#      2 micro-batches, bf16 autocast, activation checkpointing of every
#      block, SGD with momentum instead of AdamW;
#   3. the baseline again with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True;
#   4. the probe's cost of memrec.watch on a CPU-bound job (a tiny MLP).
# budget_compare.py writes OUT/table.md (predicted against measured) and
# PASS/FAIL lines: memrec's parameter, gradient and optimizer-state bytes
# equal the script's own count exactly; accumulation and SGD within 5 %;
# autocast, checkpointing and expandable_segments inside memrec's range; the
# watch costs at most 5 µs a step. Sharding over two ranks needs two GPUs:
# not run here.
set -u
BIN=${MEMREC:-./memrec}
OUT=${1:?usage: budget_check.sh OUT}
mkdir -p "$OUT"
W=$(mktemp -d /dev/shm/memrec-budget.XXXXXX)
export MEMREC_DB=$W/runs.db PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
J=bench/validation/budget_job.py
STEPS=${STEPS:-12}
start=$(date +%s)
for m in ${MODELS:-cnn gpt vit}; do
  echo "== $m"
  case $m in cnn) b=128;; gpt) b=16;; vit) b=96;; lstm) b=64;; esac
  unset PYTORCH_CUDA_ALLOC_CONF
  $BIN record --name $m-baseline --gpus 0 --tag batch_size=$b --tag model=$m -- \
    python3 $J baseline --model $m --steps $STEPS --out "$OUT/$m-baseline.json" > "$OUT/$m-baseline.log" 2>&1
  echo "$m baseline: exit $? ($(( $(date +%s) - start )) s)"
  $BIN analyze $m-baseline > "$OUT/$m-baseline.analyze.txt" 2>&1
  $BIN analyze --json $m-baseline > "$OUT/$m-baseline.analyze.json" 2>&1
  $BIN export $m-baseline | grep '"params_bytes"' | tail -3 > "$OUT/$m-baseline.budget.jsonl"
  python3 $J remedies --model $m --steps $STEPS --out "$OUT/$m-remedies.json" > "$OUT/$m-remedies.log" 2>&1
  echo "$m remedies: exit $? ($(( $(date +%s) - start )) s)"
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 $J expandable --model $m --steps $STEPS \
    --out "$OUT/$m-expandable.json" > "$OUT/$m-expandable.log" 2>&1
  echo "$m expandable: exit $? ($(( $(date +%s) - start )) s)"
done
$BIN record --name cost --gpus 0 -- python3 $J cost --out "$OUT/cost.json" > "$OUT/cost.log" 2>&1
echo "cost: exit $? ($(( $(date +%s) - start )) s)"
$BIN export cost | gzip -9 > "$OUT/cost.jsonl.gz"
python3 bench/validation/budget_compare.py "$OUT" ${MODELS:-cnn gpt vit}
rm -rf "$W"
echo "total $(( $(date +%s) - start )) s"
