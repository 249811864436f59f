#!/usr/bin/env bash
# How memrec's costs grow with the length of a run: for runs of 8 GPUs at
# 100 Hz lasting 1 min, 10 min, 1 h, 6 h and 24 h, and at 1 kHz for 1 h,
# writes two runs of the realistic mix (seeds 1 and 2) straight into a
# database (bench/tools/gentrace -db), then times `runs`, `analyze`, `report`,
# `export` and `compare` of the two, with the peak RSS of each.
#
#   bench/perf/scale.sh                     # every size; medians of 3 rounds (1 round from 6 h up)
#   SIZES="1m 10m" RUNS=5 bench/perf/scale.sh
#   SIZES="24h" bench/perf/scale.sh         # sizes: 1m 10m 1h 6h 24h 1h@1kHz
#
# Prints a Markdown table: wall seconds, CPU seconds (user + system) and
# peak RSS (MiB) of each command, the database's size and bytes per line.
# On a shared machine the wall time grows with the load; the CPU time much
# less. The load average before and after is printed too.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${RUNS:-3}
sizes=${SIZES:-1m 10m 1h 6h 24h 1h@1kHz}
tmp=${TMPDIR_SCALE:-$(mktemp -d)}
trap 'rm -rf "$tmp"' EXIT
export CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/memrec" ./cmd/memrec
go build -o "$tmp/gentrace" ./bench/tools/gentrace

. bench/lib.sh
# timed CMD...: runs CMD rounds times, prints "median-seconds peak-MiB".
timed() {
  local n=$rounds
  [[ $long == 1 ]] && n=1
  : > "$tmp/t"
  for _ in $(seq "$n"); do
    rm -rf "$tmp/out"
    /usr/bin/time -f "%e %M %U %S" -o "$tmp/one" "$@" > /dev/null
    cat "$tmp/one" >> "$tmp/t"
  done
  printf '%.2f s (%.2f s CPU), %d MiB' "$(cut -d' ' -f1 "$tmp/t" | median)" \
    "$(awk '{print $3 + $4}' "$tmp/t" | median)" "$(( $(cut -d' ' -f2 "$tmp/t" | sort -n | tail -1) / 1024 ))"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo '| run | lines | database | write (gentrace -db) | `runs` | `analyze` | `report` | `export` | `compare` of two |'
echo '| --- | --- | --- | --- | --- | --- | --- | --- | --- |'
for size in $sizes; do
  dur=${size%@*}
  interval=10ms
  [[ $size == *@1kHz ]] && interval=1ms
  long=0
  [[ $dur == 6h || $dur == 24h ]] && long=1
  db="$tmp/$size.db"
  rm -f "$db"
  s=$(date +%s.%N)
  lines=0
  for seed in 1 2; do
    n=$("$tmp/gentrace" -mix realistic -duration "$dur" -interval "$interval" -seed $seed -name "run$seed" -db "$db" 2>&1 | awk '{print $2}')
    [[ $seed == 1 ]] && lines=$n
  done
  gen=$(echo "($(date +%s.%N) - $s) / 2" | bc -l)
  bytes=$(stat -c %s "$db")
  m="$tmp/memrec --db $db"
  runs=$(timed $m runs)
  analyze=$(timed $m analyze run1)
  report=$(timed $m report run1 -o "$tmp/out")
  export=$(timed $m export run1)
  compare=$(timed $m compare run1 run2 -o "$tmp/out")
  printf '| %s | %d | %.1f MB (%.3f B/line) | %.1f s | %s | %s | %s | %s | %s |\n' \
    "$size" "$lines" "$(echo "$bytes / 1000000" | bc -l)" "$(echo "$bytes / 2 / $lines" | bc -l)" "$gen" \
    "$runs" "$analyze" "$report" "$export" "$compare"
  rm -f "$db"
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
