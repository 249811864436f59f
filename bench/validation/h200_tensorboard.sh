#!/usr/bin/env bash
# H200 check of the TensorBoard export: record a short real training job
# (ResNet-18, the probe on, GPU 0), export it as JSON Lines and as TensorBoard
# event files (all points, and downsampled to 400 a series), load those with
# TensorBoard's own EventAccumulator and compare every scalar with the run's
# samples and marks (bench/validation/check_tensorboard.py). Prints PASS or FAIL per
# check and at the end. One GPU, about a minute.
#
#   bash bench/validation/h200_tensorboard.sh       # OUT=/tmp/memrec-tb by default
set -u
BIN=${MEMREC:-./memrec}; OUT=${OUT:-/tmp/memrec-tb}
mkdir -p "$OUT"; export MEMREC_DB=$OUT/tb.db PYTHONUNBUFFERED=1
rm -f "$MEMREC_DB"; rm -rf "$OUT/tb-all" "$OUT/tb-400" "$OUT/tb-time"
$BIN record --name tb --gpus 0 --interval 10ms --procs --torch -- \
  python3 examples/train.py --epochs 3 --steps 60 2> "$OUT/record.txt" > /dev/null
tail -8 "$OUT/record.txt"
$BIN export tb -o "$OUT/tb.jsonl"
$BIN export tb --format tensorboard -o "$OUT/tb-all" --points 1000000
$BIN export tb --format tensorboard -o "$OUT/tb-400" --points 400
TIMEFORMAT='%R s'
echo "tensorboard export (4000 points a series): $( { time $BIN export tb --format tensorboard -o "$OUT/tb-time" > /dev/null 2>&1; } 2>&1 )"
rm -rf "$OUT/tb-time"
echo "csv export: $( { time $BIN export tb --format csv -o "$OUT/tb.csv"; } 2>&1 ), $(wc -l < "$OUT/tb.csv") lines"
ls -la "$OUT"/tb-all "$OUT"/tb-400 | grep tfevents
python3 -c 'import tensorboard; print("tensorboard", tensorboard.__version__)'
python3 bench/validation/check_tensorboard.py "$OUT/tb.jsonl" "$OUT/tb-all" "$OUT/tb-400" 2>&1 | tee "$OUT/check.txt"
