#!/usr/bin/env bash
# memrec record on a machine with an NVIDIA GPU and PyTorch: its device
# samples against nvidia-smi's readings, the job's pid in the per-process
# series, and the sampler's speed figures. Results go to $OUT (default
# /tmp/memrec-h200).
#
#   MEMREC=./memrec bench/validation/h200_record.sh
#   SECTIONS="accuracy speed" SAMPLERS="native go" bench/validation/h200_record.sh
set -u
BIN=${MEMREC:-./memrec}
OUT=${OUT:-/tmp/memrec-h200}
SECS=${SECS:-60}
mkdir -p "$OUT"
export MEMREC_DB=$OUT/h200.db PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,memory.used,memory.total,driver_version --format=csv > "$OUT/info.txt" 2>&1

accuracy() {
echo "== accuracy: a real training job, nvidia-smi polled alongside"
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 100 > "$OUT/smi.csv" &
smi=$!
sleep 2
$BIN record --name train --torch --procs --interval 10ms --tag model=resnet18 -- \
  python3 examples/train.py --epochs 2 --steps 40 --rest 3 --log "$OUT/train-log.jsonl" 2> "$OUT/record-train.txt"
sleep 1
kill $smi
$BIN export train -o "$OUT/train.jsonl"
python3 bench/validation/check_record.py "$OUT/train.jsonl" "$OUT/smi.csv" "$OUT/train-log.jsonl"
python3 bench/validation/check_probe.py "$OUT/train.jsonl" "$OUT/train-log.jsonl"

}

probe() {
echo "== probe: a planted leak (each step's logits kept: 64 x 1000 float32 = 256000 B)"
$BIN record --name leak -- python3 examples/train.py --leak --epochs 2 --steps 40 --log "$OUT/leak-log.jsonl" 2> "$OUT/record-leak.txt"
$BIN export leak -o "$OUT/leak.jsonl"
python3 bench/validation/check_probe.py "$OUT/leak.jsonl" "$OUT/leak-log.jsonl" --leak 256000

echo "== probe: a forced OOM"
$BIN record --name oom -- python3 examples/oom.py 2> "$OUT/record-oom.txt"
$BIN export oom | grep '"kind":"oom"' | cut -c1-300

echo "== probe: --torch with a script that does not know memrec"
$BIN record --name zero --torch -- python3 -c "import torch, time; x = torch.randn(4096, 4096, device='cuda'); time.sleep(1.5)" 2> "$OUT/record-zero.txt"
echo "allocator samples: $($BIN export zero | grep -c '"type":"torch"')"

echo "== probe: cost of memrec.step() on the training thread"
$BIN record --name cost -- python3 bench/perf/probe_cost.py 2> "$OUT/record-cost.txt"

echo "== probe: training step time with and without memrec (alternating runs)"
for i in 1 2; do
  python3 examples/train.py --epochs 1 --steps 150 --log "$OUT/off$i.jsonl" > /dev/null 2>&1
  $BIN record --name "on$i" --torch -- python3 examples/train.py --epochs 1 --steps 150 --log "$OUT/on$i.jsonl" > /dev/null 2>&1
done
python3 bench/perf/step_overhead.py "$OUT/off1.jsonl" "$OUT/on1.jsonl" "$OUT/off2.jsonl" "$OUT/on2.jsonl"

}

speed() {
echo "== speed: 1 ms on one GPU for ${SECS}s while a job trains: native thread, Go loop with nanosleep, Go loop with time.Sleep"
for sleep in ${SAMPLERS:-native go plain}; do
  $BIN record --name "tick1ms-$sleep" --sampler $sleep --interval 1ms --gpus 0 --procs -- \
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

echo "== how far below 1 ms: 500 µs and 250 µs on one GPU, 20 s each, per-process queries on"
for iv in 500us 250us; do
  $BIN record --name "tick$iv" --interval $iv --gpus 0 --procs --duration 20s 2>&1 | grep -E 'ticks|recorder'
done

echo "== baseline: a Python NVML loop at 1 ms (ctypes), 20 s"
python3 bench/perf/nvml_loop.py 20
}

for section in ${SECTIONS:-accuracy probe speed}; do $section; done
$BIN runs
