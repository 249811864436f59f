#!/usr/bin/env bash
# Import of hostile input: a single 100 MB line (a mark whose text never
# ends) and an 18 MB gzip file of nothing but newlines (18 GB unpacked).
# Both must fail or finish fast in bounded memory.
#
#   bench/perf/hostile_import.sh     # 3 rounds; RUNS=5 for more
#
# Prints each round's wall time and peak RSS (from GNU time or, without
# it, from the shell's own rusage of children) and the medians.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${RUNS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/memrec" ./cmd/memrec
{ printf '{"type":"run","name":"long"}\n{"type":"mark","t_ns":1,"kind":"event","text":"'; head -c 100000000 /dev/zero | tr '\0' x; printf '"}\n'; } > "$tmp/long.jsonl"
{ printf '{"type":"run","name":"blank"}\n'; head -c 18000000000 /dev/zero | tr '\0' '\n'; } | gzip -9 > "$tmp/blank.jsonl.gz"
echo "inputs: $(stat -c %s "$tmp/long.jsonl") bytes of one line; $(stat -c %s "$tmp/blank.jsonl.gz") bytes of gzipped newlines"
. bench/lib.sh
for f in long.jsonl blank.jsonl.gz; do
  : > "$tmp/t"; : > "$tmp/rss"
  for i in $(seq "$rounds"); do
    rm -f "$tmp/m.db"
    /usr/bin/time -f '%e %M' -o "$tmp/time" "$tmp/memrec" --db "$tmp/m.db" import "$tmp/$f" > /dev/null 2> "$tmp/err" || true
    read -r secs kib < <(tail -n 1 "$tmp/time")
    echo "$f round $i: ${secs} s, max RSS $((kib / 1024)) MiB: $(head -c 160 "$tmp/err")"
    echo "$secs" >> "$tmp/t"; echo $((kib / 1024)) >> "$tmp/rss"
  done
  echo "$f: median $(median < "$tmp/t") s, max RSS $(median < "$tmp/rss") MiB"
done
