#!/usr/bin/env bash
# The recorder over a long run: records a simulated 8-GPU job (per-process
# samples, allocator samples and step marks from every rank) faster than
# real time, and prints the recorder's RSS and CPU over the run. Both should
# stay flat: nothing the recorder keeps grows with the run.
#
#   bench/perf/recorder_long.sh                  # 6 h of the job at 100x: 3.6 min
#   HOURS=24 SPEED=100 bench/perf/recorder_long.sh
#
# Each line is one real-time interval of EVERY seconds: the job time
# reached, the recorder's RSS, its CPU over the interval (% of one core),
# and the database size.
set -euo pipefail
cd "$(dirname "$0")/../.."
hours=${HOURS:-6}
speed=${SPEED:-100}
every=${EVERY:-10}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/memrec" ./cmd/memrec
tick=$(getconf CLK_TCK)
"$tmp/memrec" --db "$tmp/m.db" record --source sim --sim-gpus 8 --procs --sim-speed "$speed" \
  --duration "${hours}h" --name long > "$tmp/out" 2>&1 &
pid=$!
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0; }
printf '%8s %10s %10s %12s\n' "job time" "RSS MiB" "CPU %" "db MB"
start=$(date +%s.%N); s0=$start; c0=$(cpu)
while kill -0 "$pid" 2>/dev/null; do
  sleep "$every"
  kill -0 "$pid" 2>/dev/null || break
  s1=$(date +%s.%N); c1=$(cpu)
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
  db=$(stat -c %s "$tmp/m.db" 2>/dev/null || echo 0)
  job=$(echo "($s1 - $start) * $speed / 60" | bc -l)
  printf '%6.0f min %10.1f %10.1f %12.1f\n' "$job" "$(echo "$rss / 1024" | bc -l)" \
    "$(echo "($c1 - $c0) / $tick / ($s1 - $s0) * 100" | bc -l)" "$(echo "$db / 1000000" | bc -l)"
  s0=$s1; c0=$c1
done
wait "$pid" || true
grep -E 'ticks|samples|marks|recorder|database' "$tmp/out"
