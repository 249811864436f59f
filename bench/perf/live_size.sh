#!/usr/bin/env bash
# The size of a file written live against the same run imported: memrec
# record of a simulated 8-GPU job (per-process and allocator samples, step
# marks), committing every second, then the run exported and imported into
# a fresh file. The recorder compacts the file at its end when free pages
# are a tenth of it or more; its summary line gives the size before.
#
#   bench/perf/live_size.sh                          # 10 min of the job at 10x (60 s), 8 GPUs
#   DURATION=2m SPEED=1 bench/perf/live_size.sh      # in real time: one commit per second of samples
set -euo pipefail
cd "$(dirname "$0")/../.."
dur=${DURATION:-10m}
speed=${SPEED:-10}
gpus=${GPUS:-8}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/memrec" ./cmd/memrec
m="$tmp/memrec"
$m --db "$tmp/live.db" record --source sim --sim-gpus "$gpus" --sim-speed "$speed" --procs --duration "$dur" --name live \
  > /dev/null 2> "$tmp/record.txt"
$m --db "$tmp/live.db" export live > "$tmp/live.jsonl"
lines=$(wc -l < "$tmp/live.jsonl")
$m --db "$tmp/imported.db" import "$tmp/live.jsonl" > /dev/null
live=$(stat -c %s "$tmp/live.db")
imp=$(stat -c %s "$tmp/imported.db")
before=$(sed -n 's/.*compaction  \([0-9.]* [KM]iB\) -> .*/\1/p' "$tmp/record.txt")
printf '%s of %d simulated GPUs at %sx, %d JSON lines\n' "$dur" "$gpus" "$speed" "$lines"
printf 'live file before compaction  %s\n' "${before:-(not compacted: free pages under a tenth)}"
printf 'live file                    %d bytes (%.3f B/line)\n' "$live" "$(echo "$live / $lines" | bc -l)"
printf 'exported and imported        %d bytes (%.3f B/line)\n' "$imp" "$(echo "$imp / $lines" | bc -l)"
printf 'live / imported              %.3f\n' "$(echo "$live / $imp" | bc -l)"
