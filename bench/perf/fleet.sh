#!/usr/bin/env bash
# The fleet recipe of docs/interop.md, measured: RUNS simulated runs of 8
# GPUs (memrec record --source sim, fake clock: DURATION of a job each,
# computed as fast as it goes), tagged model= and batch_size=, every 10th
# leaking and every 25th near out of memory, recorded into SHARDS
# databases (as the nodes of a fleet would), each exported with
# `export --all --format parquet` into one folder; then the fleet queries
# run in DuckDB (formats/parquet/duckdbtest, TestFleetQueries) over that folder.
#
#   bash bench/perf/fleet.sh                       # RUNS=1000 DURATION=3m SHARDS=2
#   RUNS=100 DURATION=1m bash bench/perf/fleet.sh
#
# Prints the recording time, the export time, bytes of the databases and
# of the Parquet folder, and each query's time (median of 3, after one
# warm-up) with its result's row count.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${RUNS:-1000}
dur=${DURATION:-3m}
shards=${SHARDS:-2}
tmp=${TMPDIR_FLEET:-$(mktemp -d)}
keep=${KEEP:-}
[[ -z $keep ]] && trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
# MEMREC_BIN and DUCKDB_TEST: binaries built elsewhere (a machine without Go).
if [[ -n ${MEMREC_BIN:-} ]]; then
  cp "$MEMREC_BIN" "$tmp/memrec"
  cp "$DUCKDB_TEST" "$tmp/duckdbtest.test"
else
  go build -o "$tmp/memrec" ./cmd/memrec
  (cd formats/parquet/duckdbtest && go test -c -o "$tmp/duckdbtest.test" .)
fi

models=(resnet50 bert-base gpt2-medium vit-b16)
batches=(16 32 64 128)
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s.%N)
for s in $(seq 0 $((shards - 1))); do
  (
    for i in $(seq "$s" "$shards" $((runs - 1))); do
      scen=none
      (( i % 10 == 3 )) && scen=leak
      (( i % 25 == 7 )) && scen=oom
      "$tmp/memrec" --db "$tmp/node$s.db" record --source sim --sim-gpus 8 --sim-clock fake --duration "$dur" \
        --sim-scenario "$scen" --name "run-$(printf %04d "$i")" \
        --tag model="${models[i % 4]}" --tag batch_size="${batches[(i / 4) % 4]}" > /dev/null 2>&1
    done
  ) &
done
wait
rec=$(echo "$(date +%s.%N) - $start" | bc -l)
start=$(date +%s.%N)
for s in $(seq 0 $((shards - 1))); do
  "$tmp/memrec" --db "$tmp/node$s.db" export --all --format parquet -o "$tmp/fleet" 2> /dev/null
done
exp=$(echo "$(date +%s.%N) - $start" | bc -l)
dbbytes=$(cat "$tmp"/node*.db | wc -c)
pqbytes=$(du -sb "$tmp/fleet" | cut -f1)
files=$(find "$tmp/fleet" -name '*.parquet' | wc -l)
nruns=$(find "$tmp/fleet/runs" -name '*.parquet' | wc -l)
printf 'runs %d of 8 GPUs, %s each: recorded in %.1f s (%d shards)\n' "$nruns" "$dur" "$rec" "$shards"
printf 'export --all --format parquet: %.1f s; %d files, %.1f MB; databases %.1f MB\n' "$exp" "$files" \
  "$(echo "$pqbytes / 1000000" | bc -l)" "$(echo "$dbbytes / 1000000" | bc -l)"
(cd formats/parquet/duckdbtest && MEMREC_FLEET_DIR="$tmp/fleet" "$tmp/duckdbtest.test" -test.run TestFleetQueries -test.v 2>&1 | grep -E 'query|PASS|FAIL|ok')
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
