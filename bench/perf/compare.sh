#!/usr/bin/env bash
# Time `memrec compare` of 10 generated runs of 10 minutes at 100 Hz on 8 GPUs
# (about 1 M lines each), batch sizes 16..160, with and without the
# peak-by-batch-size fit. Medians of RUNS rounds (default 3).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${RUNS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/memrec" ./cmd/memrec
go build -o "$tmp/gentrace" ./bench/tools/gentrace
. bench/lib.sh
names=()
for i in $(seq 1 10); do
  "$tmp/gentrace" -name "r$i" -seed "$i" 2>/dev/null | "$tmp/memrec" --db "$tmp/m.db" import - > /dev/null
  "$tmp/memrec" --db "$tmp/m.db" tag "r$i" batch_size=$((16 * i)) > /dev/null
  names+=("r$i")
done
for mode in table by; do
  : > "$tmp/t"
  for r in $(seq "$rounds"); do
    if [[ $mode == by ]]; then args=(compare --by batch_size -o "$tmp/cmp"); else args=(compare "${names[@]}" -o "$tmp/cmp"); fi
    /usr/bin/time -f "%e %M" -o "$tmp/one" "$tmp/memrec" --db "$tmp/m.db" "${args[@]}" > /dev/null
    cat "$tmp/one" >> "$tmp/t"
  done
  printf 'compare 10 runs (%s, with charts and page): median %.2f s, peak RSS %d MiB (%d rounds)\n' "$mode" \
    "$(cut -d' ' -f1 "$tmp/t" | median)" "$(( $(cut -d' ' -f2 "$tmp/t" | sort -n | tail -1) / 1024 ))" "$rounds"
done
