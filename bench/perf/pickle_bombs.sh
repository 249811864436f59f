#!/usr/bin/env bash
# Import of hostile PyTorch snapshots (bench/perf/pickle_bombs.py writes
# them): a dict key standing for 2^40 tuples, a block referenced 10^6
# times, a 1 000-frame stack shared by 99 000 blocks, 100 M empty lists
# and three 1 GiB strings (both gzipped), a time_us of 2^63 - 1; and, for
# scale, the real H200 snapshot of formats/torchsnap/testdata. Each must be
# refused or imported fast in bounded memory.
#
#   bench/perf/pickle_bombs.sh     # 3 rounds; RUNS=5 for more
#
# Prints each round's wall time, peak RSS (GNU time) and the first words
# of memrec's answer, then the medians.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${RUNS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/memrec" ./cmd/memrec
python3 bench/perf/pickle_bombs.py "$tmp"
cp formats/torchsnap/testdata/trace-leak-tail.pickle.gz "$tmp/real-trace.pickle.gz"
. bench/lib.sh
for f in real-trace.pickle.gz tuple-key.pickle block-x1M.pickle stack-x99k.pickle lists-100M.pickle.gz strings-3GiB.pickle.gz time-2^63.pickle; do
  : > "$tmp/t"; : > "$tmp/rss"
  for i in $(seq "$rounds"); do
    rm -f "$tmp/m.db"
    /usr/bin/time -f '%e %M' -o "$tmp/time" "$tmp/memrec" --db "$tmp/m.db" import "$tmp/$f" > "$tmp/out" 2>&1 || true
    read -r secs kib < <(tail -n 1 "$tmp/time")
    echo "$f ($(stat -c %s "$tmp/$f") bytes) round $i: ${secs} s, max RSS $((kib / 1024)) MiB: $(sed "s|$tmp/||g" "$tmp/out" | head -c 200)"
    echo "$secs" >> "$tmp/t"; echo $((kib / 1024)) >> "$tmp/rss"
  done
  echo "$f: median $(median < "$tmp/t") s, max RSS $(median < "$tmp/rss") MiB"
done
