#!/usr/bin/env bash
# Speed of multi-node merging and analysis: four simulated nodes of 8 GPUs,
# 10 minutes each at 10 ms (recorded on a fake clock, so in seconds), merged
# with memrec merge and analysed as one 32-GPU run. Prints the wall time of
# each of ROUNDS rounds and the median.
#   bash bench/perf/multinode_speed.sh [memrec binary]      (default: builds ./cmd/memrec)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-3} MINUTES=${MINUTES:-10}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=${1:-}
if [ -z "$bin" ]; then
  CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations go build -o "$tmp/memrec" ./cmd/memrec
  bin=$tmp/memrec
fi
for k in 0 1 2 3; do
  scenario=none; [ $k = 2 ] && scenario=leak
  "$bin" --db "$tmp/node$k.db" record --source sim --sim-clock fake --sim-gpus 8 --sim-rank-base $((8 * k)) \
    --sim-scenario $scenario --procs --host node$k --job speed --name node$k --duration "${MINUTES}m" 2>/dev/null
done
ls -l "$tmp"/node*.db | awk '{s += $5} END {printf "4 nodes of %s minutes: %.1f MiB of databases\n", "'"$MINUTES"'", s / 1048576}'
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
secs() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | awk '{split($0, p, " - "); printf "%.3f\n", p[1] - p[2]}'; }
merges=() analyses=()
for r in $(seq "$ROUNDS"); do
  rm -f "$tmp/job.db"
  merges+=("$(secs "$bin" merge "$tmp/job.db" "$tmp"/node0.db "$tmp"/node1.db "$tmp"/node2.db "$tmp"/node3.db)")
  analyses+=("$(secs "$bin" --db "$tmp/job.db" analyze speed)")
done
"$bin" merge "$tmp/again.db" "$tmp"/node[0-3].db | head -1
"$bin" --db "$tmp/job.db" analyze speed | sed -n '1,4p'
echo "merge   (s): ${merges[*]}; median $(printf '%s\n' "${merges[@]}" | median)"
echo "analyze (s): ${analyses[*]}; median $(printf '%s\n' "${analyses[@]}" | median)"
