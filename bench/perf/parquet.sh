#!/usr/bin/env bash
# Speed of `memrec export --format parquet` against `memrec export` (JSON
# Lines) of the same run: runs of 8 GPUs at 100 Hz (the realistic mix of
# bench/tools/gentrace, written straight into a database) lasting each of
# SIZES; each export timed RUNS times (one round from 6 h up), medians.
#
#   bash bench/perf/parquet.sh                 # SIZES="1h 24h" RUNS=3
#   SIZES=10m RUNS=5 bash bench/perf/parquet.sh
#
# Prints a Markdown table: wall and CPU seconds (user + system), peak RSS,
# rows written and the Parquet files' size; the JSON Lines export goes to
# /dev/null (its figure is the baseline, measured in the same run).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${RUNS:-3}
sizes=${SIZES:-1h 24h}
tmp=${TMPDIR_PARQUET:-$(mktemp -d)}
trap 'rm -rf "$tmp"' EXIT
export CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/memrec" ./cmd/memrec
go build -o "$tmp/gentrace" ./bench/tools/gentrace
. bench/lib.sh

# timed N CMD...: runs CMD N times; prints "wall cpu MiB" medians (RSS: the peak).
timed() {
  local n=$1; shift
  : > "$tmp/t"
  for _ in $(seq "$n"); do
    rm -rf "$tmp/pq"
    /usr/bin/time -f "%e %M %U %S" -o "$tmp/one" "$@" > /dev/null 2>&1
    cat "$tmp/one" >> "$tmp/t"
  done
  echo "$(cut -d' ' -f1 "$tmp/t" | median) $(awk '{print $3 + $4}' "$tmp/t" | median) $(( $(cut -d' ' -f2 "$tmp/t" | sort -n | tail -1) / 1024 ))"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo '| run (8 GPUs, 100 Hz) | records | `export` JSON Lines | `export --format parquet` | parquet rows/s (wall) | parquet files |'
echo '| --- | --- | --- | --- | --- | --- |'
for dur in $sizes; do
  db="$tmp/$dur.db"
  rm -f "$db"
  lines=$("$tmp/gentrace" -mix realistic -duration "$dur" -seed 1 -name run1 -db "$db" 2>&1 | awk '{print $2}')
  n=$rounds
  [[ $dur == 6h || $dur == 24h ]] && n=1
  read -r jw jc jm <<< "$(timed "$n" "$tmp/memrec" --db "$db" export run1)"
  read -r pw pc pm <<< "$(timed "$n" "$tmp/memrec" --db "$db" export run1 --format parquet -o "$tmp/pq")"
  "$tmp/memrec" --db "$db" export run1 --format parquet -o "$tmp/pq" 2> "$tmp/wrote"
  rows=$(sed -n 's/.* tables, \([0-9]*\) rows.*/\1/p' "$tmp/wrote")
  size=$(du -sb "$tmp/pq" | cut -f1)
  printf '| %s | %s | %.1f s (%.1f s CPU), %d MiB | **%.1f s** (%.1f s CPU), %d MiB | %.2f M | %.1f MB |\n' \
    "$dur" "$lines" "$jw" "$jc" "$jm" "$pw" "$pc" "$pm" "$(echo "$rows / $pw / 1000000" | bc -l)" "$(echo "$size / 1000000" | bc -l)"
  rm -f "$db"
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
