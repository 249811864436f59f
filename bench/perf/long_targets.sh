#!/usr/bin/env bash
# The long-run targets, old code against new in the same rounds: on two runs
# of 24 hours of 8 GPUs at 100 Hz (the realistic mix, seeds 1 and 2, written
# straight into one database by bench/tools/gentrace), `analyze`, `report`,
# `compare` of the two and `export` (JSON Lines to /dev/null); with WEEK=1 also
# 7 days (one run) `analyze` and a 1-hour window of it. Each round runs the old
# binary, then the new, command by command, so both see the same load.
#
#   bench/perf/long_targets.sh                       # BASE=8498d48, 3 rounds, the day only
#   WEEK=1 BASE=fc1cb54 RUNS=3 bench/perf/long_targets.sh
#   DATA=/tmp/long bench/perf/long_targets.sh        # keeps the generated databases there
#
# Prints, per command and binary, the median wall and CPU seconds (user +
# system) and the peak RSS, and the CPU ratio old ÷ new. Generating the day
# takes about a minute a run, the week about 4 minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${RUNS:-3}
base=${BASE:-8498d48}
data=${DATA:-${TMPDIR:-/tmp}/memrec-long}
mkdir -p "$data"
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/old-src" 2>/dev/null; rm -rf "$tmp"' EXIT
export CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/new" ./cmd/memrec
go build -o "$tmp/gentrace" ./bench/tools/gentrace
git worktree add -q --detach "$tmp/old-src" "$base"
(cd "$tmp/old-src" && go build -o "$tmp/old" ./cmd/memrec)
. bench/lib.sh

if [[ ! -s $data/24h.db ]]; then
  "$tmp/gentrace" -mix realistic -duration 24h -seed 1 -name run1 -db "$data/24h.db.part"
  "$tmp/gentrace" -mix realistic -duration 24h -seed 2 -name run2 -db "$data/24h.db.part"
  mv "$data/24h.db.part" "$data/24h.db"
fi
if [[ ${WEEK:-0} == 1 && ! -s $data/d7.db ]]; then
  "$tmp/gentrace" -mix realistic -duration 168h -seed 7 -name gen -db "$data/d7.db.part"
  mv "$data/d7.db.part" "$data/d7.db"
fi

# one NAME BIN ARGS...: runs memrec once, appends "wall rss-KiB cpu" to $tmp/NAME-BIN.
one() {
  local name=$1 bin=$2
  shift 2
  rm -rf "$tmp/rep"
  /usr/bin/time -f "%e %M %U %S" -o "$tmp/t" "$tmp/$bin" "$@" > /dev/null
  awk '{print $1, $2, $3 + $4}' "$tmp/t" >> "$tmp/$name-$bin"
}
day=(analyze-24h "analyze --db $data/24h.db run1"
  report-24h "report --db $data/24h.db run1 -o $tmp/rep"
  compare-24h "compare --db $data/24h.db run1 run2"
  export-24h "export --db $data/24h.db run1")
week=(analyze-7d "analyze --db $data/d7.db gen"
  window-7d "analyze --db $data/d7.db gen --from 72h --to 73h")
cmds=("${day[@]}")
[[ ${WEEK:-0} == 1 ]] && cmds+=("${week[@]}")
load=$(cut -d' ' -f1-3 /proc/loadavg)
# A first, unmeasured run of each binary warms the page cache.
"$tmp/old" analyze --db "$data/24h.db" run1 > /dev/null
"$tmp/new" analyze --db "$data/24h.db" run1 > /dev/null
for _ in $(seq "$rounds"); do
  for ((i = 0; i < ${#cmds[@]}; i += 2)); do
    for bin in old new; do
      # shellcheck disable=SC2086
      one "${cmds[i]}" "$bin" ${cmds[i+1]}
    done
  done
done
echo "old = $base, new = the working tree; medians of $rounds rounds; load before: $load"
echo
echo "| command | old | new | CPU, old ÷ new |"
echo "| --- | --- | --- | --- |"
for ((i = 0; i < ${#cmds[@]}; i += 2)); do
  n=${cmds[i]}
  row="| $n |"
  for bin in old new; do
    f=$tmp/$n-$bin
    row+=$(printf ' %.2f s, %.2f s CPU, %d MiB |' "$(cut -d' ' -f1 "$f" | median)" "$(cut -d' ' -f3 "$f" | median)" \
      "$(( $(cut -d' ' -f2 "$f" | sort -n | tail -1) / 1024 ))")
  done
  row+=$(printf ' %.2f× |' "$(echo "$(cut -d' ' -f3 "$tmp/$n-old" | median) $(cut -d' ' -f3 "$tmp/$n-new" | median)" | awk '{print $1 / $2}')")
  echo "$row"
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
