#!/usr/bin/env bash
# How long `memrec runs --check` (decode every chunk, verify every
# checksum) takes per GB of database: a generated run of 8 GPUs at 100 Hz
# (bench/tools/gentrace, the realistic mix) written straight into a database,
# then checked.
#
#   bench/perf/check.sh              # 6 hours of run, 3 rounds; HOURS=24 RUNS=5 for more
#
# Prints the file's size, each round's time and peak RSS, and the median
# time per GB (the file's size, not the samples').
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${RUNS:-3}
hours=${HOURS:-6}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/memrec" ./cmd/memrec
go run ./bench/tools/gentrace -mix realistic -duration "${hours}h" -gpus 8 -db "$tmp/m.db" > /dev/null
size=$(stat -c %s "$tmp/m.db")
echo "database: $size bytes (${hours} h of 8 GPUs at 100 Hz)"
. bench/lib.sh
: > "$tmp/t"
for i in $(seq "$rounds"); do
  /usr/bin/time -f '%e %M' -o "$tmp/time" "$tmp/memrec" --db "$tmp/m.db" runs --check > "$tmp/out"
  read -r secs kib < <(tail -n 1 "$tmp/time")
  echo "round $i: ${secs} s, max RSS $((kib / 1024)) MiB; $(tail -n 1 "$tmp/out" | head -c 120)"
  echo "$secs" >> "$tmp/t"
done
m=$(median < "$tmp/t")
echo "median ${m} s for $size bytes: $(echo "$m * 1073741824 / $size" | bc -l | xargs printf '%.1f') s per GB"
