#!/usr/bin/env bash
# memrec view's speed on a 24-hour run of 8 GPUs at 100 Hz (bench/tools/gentrace,
# 150 M lines, about 100 MB): the time to summarise it, then 200 random windows
# at 2 000 points per line, for one GPU and for all 8 (wall and CPU time,
# median and 95th percentile), and the first paint of the page in Chromium
# (driven over the DevTools protocol, five loads, the median).
# The trace is made once into $VIEW_DB (default /tmp/memrec-view-24h.db).
set -euo pipefail
cd "$(dirname "$0")/../.."
db=${VIEW_DB:-/tmp/memrec-view-24h.db}
if [ ! -s "$db" ]; then
  go run ./bench/tools/gentrace -duration 24h -gpus 8 -mix realistic -db "$db"
fi
MEMREC_VIEW_DB="$db" go test ./viewer -run '^$' -bench 'BenchmarkWindows' -benchtime 1x -v | grep -E 'Benchmark|summarised'
# The first paint: five loads of the page in one Chromium, driven over the
# DevTools protocol in real time, the median.
MEMREC_VIEW_DB="$db" go test ./viewer -run '^$' -bench 'BenchmarkFirstPaint' -benchtime 5x -v | grep -E 'Benchmark|first paint'
