#!/usr/bin/env bash
# One ResNet-18 job per GPU under one memrec record --procs (GPUs 0 and 1):
# every GPU recorded, each job's pid in its own GPU's per-process series.
set -u
BIN=${MEMREC:-./memrec}; OUT=${OUT:-/tmp/memrec-multi}
mkdir -p "$OUT"; export MEMREC_DB=$OUT/multi.db
$BIN record --name multi --procs --interval 10ms -- sh -c "
  CUDA_VISIBLE_DEVICES=0 python3 examples/train.py --epochs 1 --steps 60 --log $OUT/m0.jsonl > /dev/null &
  CUDA_VISIBLE_DEVICES=1 python3 examples/train.py --epochs 1 --steps 60 --log $OUT/m1.jsonl > /dev/null &
  wait" 2>&1 | grep -E 'ticks|samples|recorder'
$BIN export multi -o "$OUT/multi.jsonl"
python3 bench/validation/check_multi.py "$OUT/multi.jsonl" "$OUT/m0.jsonl" "$OUT/m1.jsonl"
