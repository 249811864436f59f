#!/usr/bin/env bash
# Hostile scrape load: memrec record samples 8 simulated GPUs every 10 ms
# while bench/tools/scrapeload runs 200, then 2000, concurrent scrape loops
# against its /metrics (each as fast as it is answered), against the same
# recording with no scraper at all (idle), in the same rounds: the
# recorder's ticks on time and its peak RSS.
#
#   bench/perf/scrape_load.sh        # 3 rounds of 20 s each; RUNS=5 SECONDS_EACH=30 for more
#   BIN=path/to/memrec bench/perf/scrape_load.sh    # another build (an older one, say)
#
# Prints each round's summary lines and, per load, the medians and their
# ratio to idle.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${RUNS:-3}
secs=${SECONDS_EACH:-20}
loads=${LOADS:-"0 200 2000"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=${BIN:-}
if [ -z "$bin" ]; then
  export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
  go build -o "$tmp/memrec" ./cmd/memrec
  bin=$tmp/memrec
fi
go build -o "$tmp/scrapeload" ./bench/tools/scrapeload
. bench/lib.sh
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true # the 2000 loops' own descriptors
for n in $loads; do : > "$tmp/$n.rss"; : > "$tmp/$n.ontime"; done
for i in $(seq "$rounds"); do
  for n in $loads; do
    port=$((20000 + RANDOM % 20000))
    "$bin" --db "$tmp/m.db" record --source sim --sim-gpus 8 --interval 10ms --duration "${secs}s" \
      --name "load$n-$i" --metrics-addr "127.0.0.1:$port" 2> "$tmp/out" &
    rec=$!
    if [ "$n" -gt 0 ]; then
      "$tmp/scrapeload" -url "http://127.0.0.1:$port/metrics" -loops "$n" -for "$((secs - 3))s" > "$tmp/load" 2>&1 || true
    fi
    wait $rec
    echo "[$n loops, round $i]"; [ "$n" -gt 0 ] && cat "$tmp/load"; grep -E 'ticks|recorder ' "$tmp/out"
    grep -o 'max RSS [0-9.]*' "$tmp/out" | awk '{print $3}' >> "$tmp/$n.rss"
    grep -o '([0-9.]*% on time)' "$tmp/out" | tr -d '(%' | awk '{print $1}' >> "$tmp/$n.ontime"
  done
done
idle_rss=$(median < "$tmp/0.rss")
idle_on=$(median < "$tmp/0.ontime")
for n in $loads; do
  rss=$(median < "$tmp/$n.rss"); on=$(median < "$tmp/$n.ontime")
  echo "$n loops: median over $rounds rounds of ${secs} s: ticks on time $on % (idle $idle_on %), max RSS $rss MiB ($(awk -v a="$rss" -v b="$idle_rss" 'BEGIN{printf "%.2f", a/b}') x idle)"
done
