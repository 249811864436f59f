#!/usr/bin/env bash
# A run of 1 000 GPUs (20 device samples each, 1.7 MB of JSON Lines): how
# long `memrec analyze` and `memrec report` take, their peak RSS, and how
# many files the report writes.
#
#   bench/perf/many_gpus.sh          # 3 rounds; RUNS=5 for more
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${RUNS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/memrec" ./cmd/memrec
python3 - "$tmp/g.jsonl" <<'PY'
import json, sys
n = 1000
with open(sys.argv[1], "w") as f:
    f.write(json.dumps({"type": "run", "name": "g1000", "start_ns": 10**18, "interval_ns": 10**7}) + "\n")
    for g in range(n):
        f.write(json.dumps({"type": "gpu", "gpu": g, "total_bytes": 80 * 2**30}) + "\n")
    for i in range(20):
        for g in range(n):
            f.write(json.dumps({"type": "sample", "t_ns": 10**18 + i * 10**8, "gpu": g, "used_bytes": 2**30 + i * 2**20 * (g % 3)}) + "\n")
PY
"$tmp/memrec" --db "$tmp/m.db" import "$tmp/g.jsonl"
. bench/lib.sh
for cmd in analyze report; do
  : > "$tmp/t"; : > "$tmp/rss"
  for i in $(seq "$rounds"); do
    rm -rf "$tmp/rep"
    args=("$cmd" g1000); [ "$cmd" = report ] && args+=(-o "$tmp/rep")
    /usr/bin/time -f '%e %M' -o "$tmp/time" "$tmp/memrec" --db "$tmp/m.db" "${args[@]}" > /dev/null
    read -r secs kib < <(tail -n 1 "$tmp/time")
    echo "$secs" >> "$tmp/t"; echo $((kib / 1024)) >> "$tmp/rss"
  done
  extra=""; [ "$cmd" = report ] && extra=", $(ls "$tmp/rep" | wc -l) files"
  echo "$cmd of 1000 GPUs: median $(median < "$tmp/t") s, max RSS $(median < "$tmp/rss") MiB$extra"
done
