#!/usr/bin/env bash
# Time `memrec analyze` (and `memrec report`, when built) on generated runs of
# 8 GPUs at 100 Hz: 10 minutes (about 1 M lines) and 60 minutes (about 6 M).
# Prints medians of RUNS rounds (default 5) and the peak RSS.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${RUNS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/memrec" ./cmd/memrec
. bench/lib.sh
for mins in 10 60; do
  go run ./bench/tools/gentrace -duration ${mins}m -name "gen$mins" 2>/dev/null | "$tmp/memrec" --db "$tmp/m.db" import - > /dev/null
  for cmd in analyze ${EXTRA:-}; do
    : > "$tmp/t"
    for i in $(seq "$rounds"); do
      args=("$cmd" "gen$mins")
      [[ $cmd == report ]] && args+=(-o "$tmp/rep")
      /usr/bin/time -f "%e %M" -o "$tmp/one" "$tmp/memrec" --db "$tmp/m.db" "${args[@]}" > /dev/null
      cat "$tmp/one" >> "$tmp/t"
    done
    printf '%-8s %2d min, 8 GPUs at 100 Hz: median %.2f s, peak RSS %d MiB (%d rounds)\n' "$cmd" "$mins" \
      "$(cut -d' ' -f1 "$tmp/t" | median)" "$(( $(cut -d' ' -f2 "$tmp/t" | sort -n | tail -1) / 1024 ))" "$rounds"
  done
done
