#!/usr/bin/env bash
# Records the caching allocator's history (every request and free, from the
# process's start through 3 steps) of bench/validation/fitmodels.py's models on one
# H200: at each small batch (MODELS name:b1,b2,b3; JOBS at once, as they need
# little of the GPU), then at each LIMITS name:batch alone on the GPU, until
# BUDGET_S seconds have passed. These are the data behind memrec's allocator
# replay (docs/analysis.md, "The allowance"): a small batch's history is what
# it scales, a limit's shows what the allocator did there.
# Writes DEST/NAME-bsB.trace.json.gz and DEST/NAME-bsB.log.
# Run from the repo root: bash bench/validation/alloc_traces.sh DEST
set -u
DEST=${1:?usage: bash bench/validation/alloc_traces.sh DEST}
mkdir -p "$DEST"
export PYTHONUNBUFFERED=1
END=$(( $(date +%s) + ${BUDGET_S:-540} ))
MODELS=${MODELS:-"resnet18:32,64,128 resnet34:32,64,128 resnet50:16,32,64 vit_b_16:16,32,64 convnext_tiny:16,32,64 swin_t:16,32,64 efficientnet_b0:16,32,64 densenet121:16,32,64 vgg11:16,32,64 vgg16:16,32,64 deeplab:4,8,16 t5:8,16,32 bert:16,32,64 gpt2:4,8,16 lm_long:4,8,16 lm_wide:2,4,8 lm_1b:1,2,4 gpt2_medium:1,2,4"}
JOBS=${JOBS:-4}
one() {  # model batch
  timeout 120 python3 bench/validation/fitjob.py --model "$1" --batch "$2" --steps 3 \
    --trace "$DEST/$1-bs$2.trace.json.gz" --log "$DEST/$1-bs$2.log" > "$DEST/$1-bs$2.out" 2>&1
  echo "$1 $2 exit $?" >> "$DEST/done.txt"
}
n=0
for spec in $MODELS; do
  IFS=: read -r m smalls <<< "$spec"
  for b in ${smalls//,/ }; do
    [ "$(date +%s)" -ge "$END" ] && break 2
    one "$m" "$b" &
    n=$((n + 1)); [ $((n % JOBS)) = 0 ] && wait
  done
done
wait
for spec in ${LIMITS:-}; do
  IFS=: read -r m b <<< "$spec"
  [ "$(date +%s)" -ge "$((END - 40))" ] && break
  one "$m" "$b"
done
