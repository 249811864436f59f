#!/usr/bin/env bash
# A flood of 60 KB marks over the recorder's socket (bench/tools/flood: 4
# connections writing as fast as the socket takes them) while memrec records
# a simulated GPU at 1 ms, against the same recording without the flood
# (the command is sleep): the recorder's peak RSS and its ticks on time.
#
#   bench/perf/flood.sh              # 3 rounds of 20 s each; RUNS=5 SECONDS_EACH=30 for more
#
# Prints each round's summary lines and the medians.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${RUNS:-3}
secs=${SECONDS_EACH:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/memrec" ./cmd/memrec
go build -o "$tmp/flood" ./bench/tools/flood
. bench/lib.sh
for kind in flood quiet; do : > "$tmp/$kind.rss"; : > "$tmp/$kind.ontime"; done
for i in $(seq "$rounds"); do
  for kind in flood quiet; do
    if [ "$kind" = flood ]; then cmd=("$tmp/flood" -duration "${secs}s"); else cmd=(sleep "$secs"); fi
    "$tmp/memrec" --db "$tmp/m.db" record --source sim --sim-gpus 1 --interval 1ms --name "$kind$i" -- "${cmd[@]}" 2> "$tmp/out"
    echo "[$kind $i]"; grep -E 'flood:|ticks|marks|recorder' "$tmp/out"
    grep -o 'max RSS [0-9.]*' "$tmp/out" | awk '{print $3}' >> "$tmp/$kind.rss"
    grep -o '([0-9.]*% on time)' "$tmp/out" | tr -d '(%' | awk '{print $1}' >> "$tmp/$kind.ontime"
  done
done
for kind in flood quiet; do
  echo "$kind: median over $rounds rounds of ${secs} s: max RSS $(median < "$tmp/$kind.rss") MiB, ticks on time $(median < "$tmp/$kind.ontime") %"
done
