#!/usr/bin/env bash
# Readers while a recording writes the database: records a simulated job
# twice, once with readers looping over the same file (memrec runs, memrec
# analyze of another run, an HTTP GET of /api/runs from memrec view) and
# once without, and prints the recorder's ticks on time for each, with how
# many reads answered and failed.
#
#   bench/perf/readers_while_recording.sh                      # 10 min each, 1 ms x 8 GPUs: ~20 min
#   DURATION=30s bench/perf/readers_while_recording.sh         # a quick look
#
# The recorder is the only one sampling; the readers take the same cores,
# so the difference also holds their CPU's cost to the sampling loop.
set -euo pipefail
cd "$(dirname "$0")/../.."
duration=${DURATION:-10m}
interval=${INTERVAL:-1ms}
gpus=${GPUS:-8}
tmp=$(mktemp -d)
viewpid=
trap '[ -n "$viewpid" ] && kill "$viewpid" 2>/dev/null; rm -rf "$tmp"' EXIT
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/memrec" ./cmd/memrec
m() { "$tmp/memrec" --db "$tmp/m.db" "$@"; }

# Another run for analyze to read: a minute of the same job, recorded fast.
m record --source sim --sim-gpus "$gpus" --sim-speed 20 --duration 1m --name other > /dev/null 2>&1

m view --addr 127.0.0.1:0 > "$tmp/view.out" 2>&1 &
viewpid=$!
for _ in $(seq 100); do grep -qo 'http://[0-9.:]*' "$tmp/view.out" 2>/dev/null && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.:]*' "$tmp/view.out" | head -1)

# readers loops until the file $tmp/stop exists, counting answers and failures.
readers() {
  local ok=0 bad=0
  while [ ! -e "$tmp/stop" ]; do
    if m runs > /dev/null 2>> "$tmp/readers.err"; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
    if m analyze other > /dev/null 2>> "$tmp/readers.err"; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
    if curl -sf -o /dev/null "$url/api/runs"; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
  done
  echo "$ok $bad" > "$tmp/readers.count"
}

record() {
  m record --source sim --sim-gpus "$gpus" --interval "$interval" --duration "$duration" --name "$1" 2> "$tmp/$1.out"
  grep -o '[0-9.]*% on time' "$tmp/$1.out" | head -1
}

printf '%-16s %12s %10s %10s\n' "recording" "on time" "reads ok" "failed"
rm -f "$tmp/stop"
readers &
rpid=$!
with=$(record with-readers)
touch "$tmp/stop"
wait "$rpid"
read -r ok bad < "$tmp/readers.count"
printf '%-16s %12s %10s %10s\n' "with readers" "$with" "$ok" "$bad"
without=$(record without-readers)
printf '%-16s %12s %10s %10s\n' "without" "$without" "-" "-"
grep -E 'ticks|database' "$tmp/with-readers.out" "$tmp/without-readers.out"
if [ -s "$tmp/readers.err" ]; then
  echo "reader errors (first 5):"
  sort "$tmp/readers.err" | uniq -c | sort -rn | head -5
fi
