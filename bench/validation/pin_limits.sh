#!/usr/bin/env bash
# Tries single values of a model's batch in fresh processes (3 steps each,
# no recorder), to settle a limit that a search left between two values.
# SPECS is "model:b1,b2,... model:...": bash bench/validation/pin_limits.sh OUT
# Writes into $1 a line per try to pins.txt ("model batch ran|oom|failed
# seconds") and each try's fitjob log.
set -u
DEST=${1:?usage: bash bench/validation/pin_limits.sh OUTDIR}
mkdir -p "$DEST"
SPECS=${SPECS:-"t5:173,174,175 deeplab:121,122,123"}
for spec in $SPECS; do
  IFS=: read -r m values <<< "$spec"
  for b in ${values//,/ }; do
    s=$(date +%s)
    timeout 150 python3 bench/validation/fitjob.py --model "$m" --batch "$b" --steps 3 --log "$DEST/$m-bs$b.log" \
      > "$DEST/$m-bs$b.txt" 2>&1
    rc=$?
    case $rc in 0) out=ran ;; 3) out=oom ;; *) out="failed($rc)" ;; esac
    echo "$m $b $out $(( $(date +%s) - s ))" | tee -a "$DEST/pins.txt"
  done
done
