#!/usr/bin/env bash
# The recorder's CPU on a machine with an NVIDIA GPU, one GPU, per-process
# queries on: memrec's native sampling thread, the same sampler as a Go loop,
# and a Python ctypes NVML loop (memory and processes every tick), in
# alternating rounds; medians at the end. Then 1 ms while a job trains.
#
#   MEMREC=.bin/memrec ROUNDS=3 SECS=10 bench/h200_cpu.sh
set -u
BIN=${MEMREC:-./memrec}; OUT=${OUT:-/tmp/memrec-cpu}; SECS=${SECS:-10}; ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"; export MEMREC_DB=/dev/shm/memrec-cpu.db; rm -f $MEMREC_DB
cpu() { grep -oE 'recorder +[0-9.]+%' | grep -oE '[0-9.]+'; }
n=0
for r in $(seq "$ROUNDS"); do
  for iv in 1 10; do
    echo "python ${iv}ms $(python3 bench/nvml_loop.py "$SECS" $iv | grep -oE '[0-9.]+% of one core' | grep -oE '[0-9.]+')"
    for s in native go; do
      n=$((n+1))
      echo "$s ${iv}ms $($BIN record --name c$n --sampler $s --interval ${iv}ms --gpus 0 --procs --duration ${SECS}s 2>&1 | cpu)"
    done
    n=$((n+1))
    echo "native-every-tick ${iv}ms $($BIN record --name c$n --interval ${iv}ms --gpus 0 --procs --procs-every 0 --duration ${SECS}s 2>&1 | cpu)"
  done
done | tee "$OUT/rounds.txt"
echo "== medians over $ROUNDS rounds of ${SECS}s (% of one core)"
python3 - "$OUT/rounds.txt" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 3:
        runs.setdefault((f[0], f[1]), []).append(float(f[2]))
for iv in ("1ms", "10ms"):
    py = statistics.median(runs[("python", iv)])
    for who in ("python", "go", "native", "native-every-tick"):
        v = runs.get((who, iv))
        if v:
            m = statistics.median(v)
            print(f"{iv:>5} {who:<18} {m:5.2f}%  ({m / py:.2f}x the Python loop)  runs {v}")
PY
