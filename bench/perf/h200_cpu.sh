#!/usr/bin/env bash
# The recorder's CPU on a machine with NVIDIA GPUs, per-process queries on,
# in alternating rounds, medians at the end:
#   python   a Python ctypes NVML loop (memory and processes at every tick), GPU 0
#   native   memrec's native sampling thread, GPU 0
#   native-all  the same on every GPU (the figure per GPU is divided by their number)
#   go       memrec's sampler as a Go loop (--sampler go), GPU 0
# first at rest (1 ms and 10 ms), then at 1 ms while a ResNet-18 job trains on GPU 0.
#
#   MEMREC=.bin/memrec ROUNDS=3 SECS=12 bench/perf/h200_cpu.sh
set -u
BIN=${MEMREC:-./memrec}; OUT=${OUT:-/tmp/memrec-cpu}; SECS=${SECS:-12}; ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"; export MEMREC_DB=/dev/shm/memrec-cpu.db; rm -f $MEMREC_DB
NGPU=$(nvidia-smi -L | wc -l)
n=0
# num PATTERN: the number in the first match of PATTERN (ending in a number and %)
num() { grep -oE "$1" | head -1 | grep -oE '[0-9.]+%' | tr -d %; }
rec() { # phase label interval ngpu memrec-flags...
  local phase=$1 label=$2 iv=$3 ng=$4; shift 4; n=$((n+1))
  local o; o=$($BIN record --name c$n --interval $iv --procs --duration ${SECS}s "$@" 2>&1)
  echo "$phase $label $iv $ng $(num 'recorder +[0-9.]+%' <<<"$o") $(num '\([0-9.]+% on time' <<<"$o")"
}
py() { # phase interval
  local o; o=$(python3 bench/perf/nvml_loop.py "$SECS" ${2%ms})
  echo "$1 python $2 1 $(num '[0-9.]+% of one core' <<<"$o") $(num '\([0-9.]+% on time' <<<"$o")"
}
round() { # phase intervals...
  local phase=$1; shift
  for iv in "$@"; do
    py $phase $iv
    rec $phase native $iv 1 --gpus 0
    [ "$NGPU" -gt 1 ] && rec $phase native-all $iv $NGPU
    rec $phase go $iv 1 --gpus 0 --sampler go
  done
}
{
  for r in $(seq "$ROUNDS"); do round rest 1ms 10ms; done
  python3 examples/train.py --epochs 1000 --steps 100000 --seconds $((ROUNDS * (3 + (NGPU > 1)) * (SECS + 1) + 30)) > /dev/null 2>&1 &
  sleep 15
  for r in $(seq "$ROUNDS"); do round training 1ms; done
  wait
} | tee "$OUT/rounds.txt"
echo "== medians over $ROUNDS rounds of ${SECS}s: % of one core per GPU, ticks on time; $NGPU GPU(s)"
python3 - "$OUT/rounds.txt" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 6:
        runs.setdefault((f[0], f[2], f[1]), []).append((float(f[4]) / int(f[3]), float(f[5])))
for phase, iv in (("rest", "1ms"), ("rest", "10ms"), ("training", "1ms")):
    py = statistics.median(c for c, _ in runs[(phase, iv, "python")])
    for who in ("python", "go", "native", "native-all"):
        v = runs.get((phase, iv, who))
        if v:
            m = statistics.median(c for c, _ in v)
            print(f"{phase:>8} {iv:>5} {who:<11} {m:5.2f}% per GPU ({m / py:.2f}x Python), on time {statistics.median(o for _, o in v):.3f}%  runs {[c for c, _ in v]}")
PY
