#!/usr/bin/env bash
# What a Prometheus scrape every 100 ms costs the recorder: memrec record
# samples 8 simulated GPUs every 10 ms, once without scrapes and once with,
# and prints missed ticks and the scrapes' answer times.
#   bash bench/perf/scrape.sh [seconds] [gpus] [memrec binary]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-30} gpus=${2:-8} bin=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$bin" ]; then
  export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
  go build -o "$tmp/memrec" ./cmd/memrec
  bin=$tmp/memrec
fi
go build -o "$tmp/scrape" ./bench/tools/scrape
port=$((20000 + RANDOM % 20000))
echo "== without scrapes"
"$bin" --db "$tmp/a.db" record --source sim --sim-gpus "$gpus" --interval 10ms --duration "${secs}s" 2>&1 | grep -E "ticks|recorder "
echo "== scraped every 100 ms"
"$bin" --db "$tmp/b.db" record --source sim --sim-gpus "$gpus" --interval 10ms --duration "${secs}s" \
  --metrics-addr 127.0.0.1:$port >"$tmp/rec.log" 2>&1 &
rec=$!
"$tmp/scrape" -url http://127.0.0.1:$port/metrics -every 100ms -for "$((secs - 2))s"
wait $rec
grep -E "ticks|recorder " "$tmp/rec.log"
