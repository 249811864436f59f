#!/usr/bin/env bash
# Size and speed of memrec's store on a generated run that looks like a real
# one: 8 GPUs sampled at 100 Hz for 10 minutes (one timestamp per tick, ±50 µs
# jitter), per-process samples, allocator samples at 10 Hz from 8 ranks, step
# marks from 8 ranks: about 1.03 M JSON lines.
#
#   bench/perf/store.sh            # 5 rounds; RUNS=9 bench/perf/store.sh for more
#
# Prints medians; the import is compared with a plain Python json.loads loop
# over the same file, timed in the same rounds.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${RUNS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/memrec" ./cmd/memrec
go run ./bench/tools/gentrace > "$tmp/trace.jsonl" 2>/dev/null
lines=$(wc -l < "$tmp/trace.jsonl")
gzip -6 -c "$tmp/trace.jsonl" > "$tmp/trace.jsonl.gz"
gz=$(stat -c %s "$tmp/trace.jsonl.gz")

. bench/lib.sh
now() { date +%s.%N; }

: > "$tmp/go.t"; : > "$tmp/py.t"
for i in $(seq "$rounds"); do
  rm -f "$tmp/m.db"
  s=$(now); "$tmp/memrec" --db "$tmp/m.db" import "$tmp/trace.jsonl" > /dev/null; e=$(now)
  echo "$e - $s" | bc -l >> "$tmp/go.t"
  s=$(now)
  python3 -c '
import json, sys
with open(sys.argv[1], "rb") as f:
    for line in f:
        json.loads(line)' "$tmp/trace.jsonl"
  e=$(now)
  echo "$e - $s" | bc -l >> "$tmp/py.t"
done
go_s=$(median < "$tmp/go.t"); py_s=$(median < "$tmp/py.t")
size=$(stat -c %s "$tmp/m.db"); alloc=$(( $(stat -c %b "$tmp/m.db") * $(stat -c %B "$tmp/m.db") ))

# Round trip: the export holds every line of the input, times rounded down
# to the stored microsecond.
norm() { tail -n +2 | sed -E 's/("t_ns":[0-9]+)[0-9]{3}/\1000/' | sort; }
"$tmp/memrec" --db "$tmp/m.db" export gen | norm > "$tmp/out.n"
norm < "$tmp/trace.jsonl" > "$tmp/in.n"
if cmp -s "$tmp/in.n" "$tmp/out.n"; then rt="identical ($(wc -l < "$tmp/out.n") data lines)"; else rt="DIFFERS"; fi

printf 'lines                  %d\n' "$lines"
printf 'gzip -6 of the JSONL   %d bytes (%.3f B/line)\n' "$gz" "$(echo "$gz / $lines" | bc -l)"
printf 'database file          %d bytes (%.3f B/line, %.1fx smaller than gzip), %d bytes allocated on disk\n' \
  "$size" "$(echo "$size / $lines" | bc -l)" "$(echo "$gz / $size" | bc -l)" "$alloc"
printf 'import (median of %d)  %.3f s = %.2f M lines/s\n' "$rounds" "$go_s" "$(echo "$lines / $go_s / 1000000" | bc -l)"
printf 'python json.loads loop %.3f s = %.2f M lines/s\n' "$py_s" "$(echo "$lines / $py_s / 1000000" | bc -l)"
printf 'import speed-up        %.1fx\n' "$(echo "$py_s / $go_s" | bc -l)"
printf 'export round trip      %s\n' "$rt"
echo
echo "decode, one core (go test -bench Decode -cpu 1 -count $rounds; median):"
go test ./storage -run '^$' -bench 'Decode' -cpu 1 -count "$rounds" > "$tmp/bench.txt"
for b in $(awk '/^Benchmark/ {print $1}' "$tmp/bench.txt" | sort -u); do
  m=$(awk -v b="$b" '$1 == b { for (i = 3; i < NF; i++) if ($(i+1) == "Msamples/s") print $i }' "$tmp/bench.txt" | median)
  printf '  %-28s %.1f M samples/s\n' "$b" "$m"
done
