#!/usr/bin/env bash
# analyze of runs whose allocator-trace marks are hostile
# (bench/tools/tracebomb writes them): one trace of 87 marks that inflate
# to 256 MiB of ops, 20 000 marks "0/65536 AAAA", and three traces at the
# op bound. Each must be analysed fast, in bounded memory, with one note
# about the traces.
#
#   bench/perf/trace_bombs.sh [memrec binary]
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
bin=${1:-}
if [ -z "$bin" ]; then bin=$tmp/memrec; go build -o "$bin" ./cmd/memrec; fi
go build -o "$tmp/tracebomb" ./bench/tools/tracebomb
for kind in inflate pieces atcap; do
  "$tmp/tracebomb" $kind > "$tmp/$kind.jsonl"
  "$bin" --db "$tmp/$kind.db" import --name bomb "$tmp/$kind.jsonl" > /dev/null
  /usr/bin/time -f '%e %M' -o "$tmp/time" "$bin" --db "$tmp/$kind.db" analyze bomb > "$tmp/out" 2>&1 || true
  read -r secs kib < <(tail -n 1 "$tmp/time")
  echo "$kind ($(stat -c %s "$tmp/$kind.jsonl") bytes of JSONL): ${secs} s, max RSS $((kib / 1024)) MiB: $(grep -m1 'allocator trace' "$tmp/out" | head -c 300)"
done
