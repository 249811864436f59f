#!/usr/bin/env bash
# Import of a long nvidia-smi log: N samples (default 5 000 000: 625 000
# ticks of 8 GPUs at 100 ms, 17 h) of --query-gpu with header and units,
# and a compute-apps log of one process a GPU every tenth tick.
#
#   bench/perf/nvsmi_import.sh          # N=5000000, 3 rounds
#   N=1000000 RUNS=1 bench/perf/nvsmi_import.sh
#
# Prints each round's wall time and peak RSS (GNU time), and the medians
# with the peak RSS per sample.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${RUNS:-3}
n=${N:-5000000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/memrec" ./cmd/memrec
awk -v n="$n" 'BEGIN {
  print "timestamp, index, uuid, name, memory.used [MiB], memory.reserved [MiB], memory.total [MiB]"
  t = 1795000000; ticks = int(n / 8)
  for (i = 0; i < ticks; i++) {
    s = t + i / 10; whole = int(s); ms = int((s - whole) * 1000 + 0.5)
    ts = strftime("%Y/%m/%d %H:%M:%S", whole, 1) sprintf(".%03d", ms)
    for (g = 0; g < 8; g++)
      printf "%s, %d, GPU-%08d-0000-0000-0000-000000000000, NVIDIA H200, %d MiB, 616 MiB, 143771 MiB\n", ts, g, g, 20000 + (i * 7 + g * 13) % 1000
  }
}' > "$tmp/gpu.csv"
awk -v n="$n" 'BEGIN {
  print "timestamp, gpu_uuid, pid, used_gpu_memory [MiB]"
  t = 1795000000; ticks = int(n / 8)
  for (i = 0; i < ticks; i += 10) {
    s = t + i / 10; whole = int(s); ms = int((s - whole) * 1000 + 0.5)
    ts = strftime("%Y/%m/%d %H:%M:%S", whole, 1) sprintf(".%03d", ms)
    for (g = 0; g < 8; g++)
      printf "%s, GPU-%08d-0000-0000-0000-000000000000, %d, %d MiB\n", ts, g, 1000 + g, 19000 + i % 1000
  }
}' > "$tmp/apps.csv"
lines=$(( $(wc -l < "$tmp/gpu.csv") + $(wc -l < "$tmp/apps.csv") - 2 ))
echo "inputs: $lines samples, $(( $(stat -c %s "$tmp/gpu.csv") + $(stat -c %s "$tmp/apps.csv") )) bytes of CSV"
. bench/lib.sh
: > "$tmp/t"; : > "$tmp/rss"
for i in $(seq "$rounds"); do
  rm -f "$tmp/m.db"
  /usr/bin/time -f '%e %M' -o "$tmp/time" "$tmp/memrec" --db "$tmp/m.db" import --format nvidia-smi --tz UTC --name smi "$tmp/gpu.csv" "$tmp/apps.csv" > "$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
  read -r secs kib < <(tail -n 1 "$tmp/time")
  echo "round $i: ${secs} s, max RSS $((kib / 1024)) MiB: $(head -c 200 "$tmp/out")"
  echo "$secs" >> "$tmp/t"; echo "$kib" >> "$tmp/rss"
done
kib=$(median < "$tmp/rss")
echo "median $(median < "$tmp/t") s, max RSS $((${kib%.*} / 1024)) MiB = $(awk -v k="$kib" -v n="$lines" 'BEGIN {printf "%.0f", k * 1024 / n}') B a sample"
