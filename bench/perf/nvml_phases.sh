#!/usr/bin/env bash
# Whether NVML's memory reads slow a GPU-bound job, resolved within one
# process: overhead.sh compares separate runs of the job, whose step times
# differ by 0.3 to 0.5 % from one process to the next, with or without
# memrec; here one run of the job (without the probe) goes through phases,
# and beside it `memrec record` with no command samples its GPU for a
# phase, then stops: no recorder, 10 ms, 1 ms, 1 ms with the process list
# at every tick. Each recording phase is held to the phases without a
# recorder just before and after it, in the same process.
#
#   bench/perf/nvml_phases.sh MEMREC_BIN [JOB] [CYCLES] [PHASE_SECONDS]
#   JOB: short (default), launch or transformer (overhead_job.py)
#   OUT (env): the folder for steps.jsonl and phases.jsonl (default
#     /tmp/memrec-phases); GPU (env): the GPU to record (default 0);
#     SOURCE=sim DEVICE=cpu (env): a dry run of the script without a GPU
#     (the recorder simulates its GPU, the job runs on the CPU)
#
# A cycle is off, then each recording mode followed by off, the modes'
# order rotated each cycle: 7 phases. The steps within EDGE seconds (0.5)
# of a phase's ends are left out, which covers the recorder's start-up
# and exit. Prints the table (nvml_phases_table.py).
set -u
BIN=$(readlink -f "${1:?memrec binary}"); JOB=${2:-short}
CYCLES=${3:-8}; P=${4:-5}
OUT=${OUT:-/tmp/memrec-phases}; mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
WARM=${WARMUP:-20}
MODES=(
  "rec10ms|--interval 10ms"
  "rec1ms|--interval 1ms"
  "rec1ms_procs|--interval 1ms --procs --procs-every 0"
)
: > "$OUT/phases.jsonl"
# The recordings go to a database of this run's own, removed at the end.
dbdir=$(mktemp -d "$OUT/phases.XXXXXX")

# The job runs past the last phase (each at most P + 3 s with the
# recorder's start-up and exit) and is stopped then.
total=$(( WARM + CYCLES * (2 * ${#MODES[@]} + 1) * (P + 3) + 10 ))
python3 "$HERE/overhead_job.py" --job "$JOB" --no-probe --warmup "$WARM" --seconds "$total" \
  --log "$OUT/steps.jsonl" --device "${DEVICE:-cuda}" > /dev/null 2> "$OUT/job.err" &
job=$!
trap 'kill $job 2>/dev/null; rm -rf "$dbdir"' EXIT
until grep -q ready_ns "$OUT/steps.jsonl" 2>/dev/null; do
  kill -0 $job 2>/dev/null || { echo "the job ended before its first step: $OUT/job.err" >&2; exit 1; }
  sleep 0.2
done
sleep "$WARM"

phase() { # cycle mode flags
  local t0 t1 rc=0
  t0=$(date +%s%N)
  if [ "$2" = off ]; then
    sleep "$P"
  else
    $BIN --db "$dbdir/phases.db" record --source "${SOURCE:-nvml}" --gpus "${GPU:-0}" $3 \
      --duration "${P}s" --name "$2-$1" > /dev/null 2>> "$OUT/recorder.err" || rc=$?
  fi
  t1=$(date +%s%N)
  echo "{\"cycle\":$1,\"mode\":\"$2\",\"start_ns\":$t0,\"end_ns\":$t1,\"rc\":$rc}" >> "$OUT/phases.jsonl"
}

for ((c = 1; c <= CYCLES; c++)); do
  phase "$c" off ""
  for ((k = 0; k < ${#MODES[@]}; k++)); do
    IFS='|' read -r mode flags <<< "${MODES[$(( (k + c) % ${#MODES[@]} ))]}"
    phase "$c" "$mode" "$flags"
    phase "$c" off ""
  done
done
kill -TERM $job 2>/dev/null; wait $job 2>/dev/null
python3 "$HERE/nvml_phases_table.py" "$OUT/steps.jsonl" "$OUT/phases.jsonl"
