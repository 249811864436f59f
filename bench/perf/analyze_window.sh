#!/usr/bin/env bash
# Time `memrec analyze` of a one-minute window (--from 30m --to 31m) of a
# generated 60-minute run of 8 GPUs at 100 Hz, against the whole run.
# Prints medians of RUNS rounds (default 7).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${RUNS:-7}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/memrec" ./cmd/memrec
go run ./bench/tools/gentrace -duration 60m -name gen60 -db "$tmp/m.db" > /dev/null
. bench/lib.sh
for window in "--from 30m --to 31m" ""; do
  : > "$tmp/t"
  for i in $(seq "$rounds"); do
    # shellcheck disable=SC2086
    /usr/bin/time -f "%e %M" -o "$tmp/one" "$tmp/memrec" --db "$tmp/m.db" analyze gen60 $window > /dev/null
    cat "$tmp/one" >> "$tmp/t"
  done
  printf 'analyze %-22s 60 min, 8 GPUs at 100 Hz: median %.3f s, peak RSS %d MiB (%d rounds)\n' "${window:-(whole run)}" \
    "$(cut -d' ' -f1 "$tmp/t" | median)" "$(( $(cut -d' ' -f2 "$tmp/t" | sort -n | tail -1) / 1024 ))" "$rounds"
done
