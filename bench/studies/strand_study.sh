#!/usr/bin/env bash
# Runs bench/studies/strand_study.py for each MODELS entry name:limit:small-batches
# on one H200: the small batches side by side, then the limit (the largest
# batch that ran, cmd/memrec/testdata/h200-segments/limits.json) alone, each
# in a fresh process. Writes $1/NAME-bsB.log (one JSON line per step) and
# $1/NAME-bsB.trace.json.gz (the traced step) and $1/study.tar.gz of them. Run from the repo root: bash bench/studies/strand_study.sh OUT
set -u
DEST=${1:?usage: bash bench/studies/strand_study.sh OUTDIR}
mkdir -p "$DEST"
MODELS=${MODELS:-"resnet18:6656:32,64,128 resnet50:1696:16,32,64 vit_b_16:2128:16,32,64 convnext_tiny:2400:16,32,64 gpt2:186:4,8,16 lm_long:54:4,8,16 lm_wide:34:2,4,8 bert:348:16,32,64"}
START=$(date +%s)
for spec in $MODELS; do
  IFS=: read -r m limit smalls <<< "$spec"
  for b in ${smalls//,/ }; do
    timeout 120 python3 bench/studies/strand_study.py --model "$m" --batch "$b" --log "$DEST/$m-bs$b.log" --dump "$DEST/$m-bs$b.trace.json.gz" 2> "$DEST/$m-bs$b.err" &
  done
  wait
  [ "$limit" -gt 0 ] && timeout 180 python3 bench/studies/strand_study.py --model "$m" --batch "$limit" --log "$DEST/$m-bs$limit.log" --dump "$DEST/$m-bs$limit.trace.json.gz" 2> "$DEST/$m-bs$limit.err"
  echo "$m done at $(( $(date +%s) - START )) s"
done
tar -C "$DEST" -czf "$DEST/study.tar.gz" --exclude study.tar.gz .
