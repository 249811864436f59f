#!/usr/bin/env bash
# Readers while a recording writes the database: records a simulated job in
# rounds that alternate with readers looping over the same file (memrec
# runs, memrec analyze of another run, an HTTP GET of /api/runs from memrec
# view) and without (A B A B ...), so that a drift of the machine's load
# falls on both arms alike. Prints each round's share of the recorder's
# ticks on time, then per arm the median and the spread (highest − lowest),
# and the difference of the medians.
#
#   bench/perf/readers_while_recording.sh                       # 4 rounds each of 2 min, 1 ms x 8 GPUs: ~17 min
#   ROUNDS=2 ROUND_SECONDS=10 bench/perf/readers_while_recording.sh   # a check that it works
#
# (ROUND_SECONDS, not SECONDS: bash keeps its own SECONDS.) The recorder is
# the only one sampling; the readers take the same cores, so the difference
# also holds their CPU's cost to the sampling loop.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${ROUNDS:-4}
round_s=${ROUND_SECONDS:-120}
interval=${INTERVAL:-1ms}
gpus=${GPUS:-8}
tmp=$(mktemp -d)
viewpid=
rpid=
trap '[ -n "$rpid" ] && kill "$rpid" 2>/dev/null; [ -n "$viewpid" ] && kill "$viewpid" 2>/dev/null; rm -rf "$tmp"' EXIT
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/memrec" ./cmd/memrec
m() { "$tmp/memrec" --db "$tmp/m.db" "$@"; }

# Another run for analyze to read: a minute of the same job, recorded fast.
m record --source sim --sim-gpus "$gpus" --sim-speed 20 --duration 1m --name other > /dev/null 2>&1

m view --addr 127.0.0.1:0 > "$tmp/view.out" 2>&1 &
viewpid=$!
for _ in $(seq 100); do grep -qo 'http://[0-9.:]*' "$tmp/view.out" 2>/dev/null && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.:]*' "$tmp/view.out" | head -1)

# readers loops until the file $tmp/stop exists, adding its answers and
# failures to $tmp/readers.count.
readers() {
  local ok=0 bad=0
  while [ ! -e "$tmp/stop" ]; do
    if m runs > /dev/null 2>> "$tmp/readers.err"; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
    if m analyze other > /dev/null 2>> "$tmp/readers.err"; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
    if curl -sf -o /dev/null "$url/api/runs"; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
  done
  echo "$ok $bad" >> "$tmp/readers.count"
}

# record prints the round's share of ticks on time, a number in percent.
record() {
  m record --source sim --sim-gpus "$gpus" --interval "$interval" --duration "${round_s}s" --name "$1" 2> "$tmp/$1.out"
  local share
  share=$(grep -o '[0-9.]*% on time' "$tmp/$1.out" | head -1 | tr -d '% ontime')
  if [ -z "$share" ]; then
    echo "round $1: no share of ticks on time in record's summary:" >&2
    cat "$tmp/$1.out" >&2
    exit 1
  fi
  echo "$share"
}

# stats reads numbers, one a line, and prints their median and spread.
stats() {
  sort -g | awk '{ v[NR] = $1 } END {
    med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.3f %.3f\n", med, v[NR] - v[1] }'
}

: > "$tmp/with" ; : > "$tmp/without"
printf '%-6s %-16s %10s\n' "round" "arm" "on time %"
for i in $(seq "$rounds"); do
  rm -f "$tmp/stop"
  readers &
  rpid=$!
  share=$(record "with-$i")
  touch "$tmp/stop"
  wait "$rpid"
  rpid=
  echo "$share" >> "$tmp/with"
  printf '%-6s %-16s %10s\n' "$i" "with readers" "$share"
  share=$(record "without-$i")
  echo "$share" >> "$tmp/without"
  printf '%-6s %-16s %10s\n' "$i" "without" "$share"
done
read -r wmed wspread < <(stats < "$tmp/with")
read -r omed ospread < <(stats < "$tmp/without")
ok=$(awk '{ s += $1 } END { print s + 0 }' "$tmp/readers.count")
bad=$(awk '{ s += $2 } END { print s + 0 }' "$tmp/readers.count")
echo
printf '%-16s %10s %10s\n' "arm" "median %" "spread %"
printf '%-16s %10s %10s\n' "with readers" "$wmed" "$wspread"
printf '%-16s %10s %10s\n' "without" "$omed" "$ospread"
awk -v a="$wmed" -v b="$omed" 'BEGIN { printf "difference of the medians (with - without): %+.3f points\n", a - b }'
echo "reads: $ok answered, $bad failed, over $rounds rounds of ${round_s} s with readers"
if [ -s "$tmp/readers.err" ]; then
  echo "reader errors (first 5):"
  sort "$tmp/readers.err" | uniq -c | sort -rn | head -5
fi
