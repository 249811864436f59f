#!/usr/bin/env bash
# memrec record on a machine with an NVIDIA GPU and PyTorch: its device
# samples against nvidia-smi's readings, the job's pid in the per-process
# series, and the sampler's speed figures. Results go to $OUT (default
# /tmp/memrec-h200).
#
#   MEMREC=./memrec bench/h200_record.sh
set -u
BIN=${MEMREC:-./memrec}
OUT=${OUT:-/tmp/memrec-h200}
SECS=${SECS:-60}
mkdir -p "$OUT"
export MEMREC_DB=$OUT/h200.db PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,memory.used,memory.total,driver_version --format=csv > "$OUT/info.txt" 2>&1

echo "== accuracy: a real training job, nvidia-smi polled alongside"
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 100 > "$OUT/smi.csv" &
smi=$!
sleep 2
$BIN record --name train --procs --interval 10ms --tag model=resnet18 -- \
  python3 examples/train.py --epochs 2 --steps 40 --rest 3 --log "$OUT/train-log.jsonl" 2> "$OUT/record-train.txt"
sleep 1
kill $smi
$BIN export train -o "$OUT/train.jsonl"
python3 bench/check_record.py "$OUT/train.jsonl" "$OUT/smi.csv" "$OUT/train-log.jsonl"

echo "== speed: 1 ms on one GPU for ${SECS}s while a job trains, nanosleep vs time.Sleep"
for sleep in precise plain; do
  $BIN record --name "tick1ms-$sleep" --sleep $sleep --interval 1ms --gpus 0 --procs -- \
    python3 examples/train.py --epochs 1000 --steps 100000 --seconds "$SECS" 2> "$OUT/record-1ms-$sleep.txt" &
  pid=$!
  while kill -0 $pid 2>/dev/null; do
    echo "$(date +%s) $(awk '/VmRSS/ {print $2}' /proc/$pid/status 2>/dev/null)"
    sleep 5
  done > "$OUT/rss-1ms-$sleep.txt"
  wait $pid
  echo "-- $sleep"; grep -E 'ticks|recorder' "$OUT/record-1ms-$sleep.txt"
  echo "   RSS (kB) every 5 s: $(awk '{printf "%s ", $2}' "$OUT/rss-1ms-$sleep.txt")"
done

echo "== speed: 10 ms on every GPU for ${SECS}s, per-process queries on"
$BIN record --name tick10ms --interval 10ms --procs --duration "${SECS}s" 2> "$OUT/record-10ms.txt"
grep -E 'ticks|recorder' "$OUT/record-10ms.txt"

echo "== baseline: a Python NVML loop at 1 ms (ctypes), 20 s"
python3 bench/nvml_loop.py 20
$BIN runs
