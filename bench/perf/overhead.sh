#!/usr/bin/env bash
# What memrec costs the job it watches, end to end: the same job run in
# alternating rounds without memrec and under each recording mode, the median
# step time after warm-up, and the one-off costs (start-up to the first step,
# the step that takes the allocator trace, exit).
#
#   bench/perf/overhead.sh MEMREC_BIN [JOBS] [ROUNDS] [SECONDS]
#   JOBS: comma-separated from transformer,short,launch,loader (default
#   transformer,short,loader)
#   MODES_ONLY (env): a regular expression of the modes to run (off always runs)
#   WARMUP (env): seconds of each run left out of its median (default 3)
#   PREHEAT (env): seconds of the first, uncounted run without memrec, which
#     brings the GPU towards the clocks and temperature it keeps under load
#     (default 30)
#
# Each round is 2 + 8 runs (the modes between two runs without memrec),
# each about 8 s of start-up plus WARMUP plus SECONDS on an H100.
#
# Writes $OUT/overhead.jsonl (one line a run) and prints the table
# (bench/perf/overhead_table.py).
set -u
BIN=$(readlink -f "${1:?memrec binary}"); JOBS=${2:-transformer,short,loader}
ROUNDS=${3:-3}; SECS=${4:-8}
OUT=${OUT:-/tmp/memrec-overhead}; mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
JOB="python3 $HERE/overhead_job.py --warmup ${WARMUP:-3}"
export PYTHONUNBUFFERED=1
: > "$OUT/overhead.jsonl"

# mode name, then the memrec command that wraps the job ("" for none), then
# the job's own extra flags.
MODES=(
  "off||"
  "rec10ms|record --interval 10ms --alloc-trace=false|"
  "rec1ms|record --interval 1ms --alloc-trace=false|"
  "rec1ms_procs|record --interval 1ms --procs --procs-every 0 --alloc-trace=false|"
  "watch_budget|record --interval 10ms --alloc-trace=false|--watch"
  "sites|record --interval 10ms --sites|"
  "alloc_trace|record --interval 10ms|"
  # Where the modes' common cost goes: the recorder alone (the job does not
  # load the probe), and the probe with its allocator samples a second apart.
  "nvml_only|record --interval 10ms --alloc-trace=false|--no-probe"
  "probe_rare|record --interval 10ms --alloc-trace=false|--step-sample-ms 1000"
)

run() { # job round mode wrap extra [seconds]
  local job=$1 round=$2 mode=$3 wrap=$4 extra=$5 secs=${6:-$SECS} log="$OUT/$1-$3-$2.jsonl"
  local db="$OUT/$1-$3-$2.db"; rm -f "$db"
  local t0 t1
  t0=$(date +%s%N)
  if [ -z "$wrap" ]; then
    $JOB --job "$job" --seconds "$secs" --log "$log" $extra > /dev/null 2>&1
  else
    $BIN --db "$db" $wrap --name "$job-$mode-$round" -- $JOB --job "$job" --seconds "$secs" --log "$log" $extra > /dev/null 2> "$log.err"
  fi
  local rc=$?
  t1=$(date +%s%N)
  echo "{\"job\":\"$job\",\"mode\":\"$mode\",\"round\":$round,\"rc\":$rc,\"launch_ns\":$t0,\"done_ns\":$t1,\"log\":\"$log\"}" >> "$OUT/overhead.jsonl"
  # What the probe chose for the sites' history (sampled_every: on one
  # step in N), which says where a --sites run's cost went.
  [[ $wrap == *--sites* && -s $db ]] && $BIN --db "$db" sites --json "$job-$mode-$round" > "$log.sites.json" 2>&1
  rm -f "$db"
}

for job in ${JOBS//,/ }; do
  run "$job" 0 off "" "" "${PREHEAT:-30}"  # warms the caches and the GPU: not counted
  for ((r = 1; r <= ROUNDS; r++)); do
    # A round opens and closes without memrec (off, off_end): each mode is
    # held to the two, which cancels a drift of the GPU's speed over the
    # round, and how far the two differ is what a round can resolve. The
    # modes between are rotated each round so that none always follows
    # the same one.
    run "$job" "$r" off "" ""
    for ((k = 1; k < ${#MODES[@]}; k++)); do
      m=${MODES[$(( (k - 1 + r) % (${#MODES[@]} - 1) + 1 ))]}
      IFS='|' read -r mode wrap extra <<< "$m"
      if [ -n "${MODES_ONLY:-}" ] && ! [[ $mode =~ $MODES_ONLY ]]; then continue; fi
      run "$job" "$r" "$mode" "$wrap" "$extra"
    done
    run "$job" "$r" off_end "" ""
  done
done
python3 "$HERE/overhead_table.py" "$OUT/overhead.jsonl"
