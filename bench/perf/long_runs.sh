#!/usr/bin/env bash
# The long-run targets as an A/B of CPU time: the binary of an older commit
# (A) against the working tree's (B), run alternately (A B A B …) on the
# same generated inputs, so both see the same load on a shared machine.
# The inputs: two runs of 24 hours of 8 GPUs at 100 Hz (the realistic mix,
# seeds 1 and 2, in one database) and, with WEEK=1, 7 days of 8 GPUs (one
# run), written by the older commit's bench/tools/gentrace so both binaries
# read the same file format. The commands: the day's `analyze`, `report`,
# `compare` of the two runs and `export` (JSON Lines to /dev/null), and the
# week's `analyze`.
#
#   bench/perf/long_runs.sh                                  # BASE=c664fbc, 3 rounds, the day
#   WEEK=1 RUNS=5 DATA=/tmp/long bench/perf/long_runs.sh     # the week too; keeps the files
#   ONLY=analyze-7d WEEK=1 bench/perf/long_runs.sh           # one command
#   COLD=1 bench/perf/long_runs.sh                           # each file read from disk
#
# Prints, per command and binary, the median CPU seconds (user + system)
# with the lowest and highest of the rounds, and the median and highest
# peak RSS (GNU time's %M), then the ratio of the medians A ÷ B. CPU, not
# wall: the machine is shared. Generating the day takes about 4 minutes a
# run on 2 cores, the week about 25.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${RUNS:-3}
base=${BASE:-c664fbc}
data=${DATA:-${TMPDIR:-/tmp}/memrec-long}
mkdir -p "$data"
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/a-src" 2>/dev/null; rm -rf "$tmp"' EXIT
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
go build -o "$tmp/B" ./cmd/memrec
head=$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo "+changes")
git worktree add -q --detach "$tmp/a-src" "$base"
(cd "$tmp/a-src" && go build -o "$tmp/A" ./cmd/memrec && go build -o "$tmp/gentrace" ./bench/tools/gentrace)
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

# one NAME BIN ARGS...: runs memrec once, appends "cpu-seconds rss-KiB" to
# $tmp/NAME-BIN. The file it reads (after --db) is first put in the page
# cache, or with COLD=1 taken out of it, so that both binaries start alike:
# on a machine whose page cache holds less than the files, whichever ran
# first after the week's file would read the day's from disk, which costs
# CPU in the kernel.
one() {
  local name=$1 bin=$2 file
  shift 2
  file=$(echo "$@" | sed -n 's/.*--db \([^ ]*\).*/\1/p')
  if [[ ${COLD:-0} == 1 ]]; then
    python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$file"
  else
    cat "$file" > /dev/null
  fi
  rm -rf "$tmp/rep"
  /usr/bin/time -f "%U %S %M" -o "$tmp/t" "$tmp/$bin" "$@" > /dev/null
  awk '{print $1 + $2, $3}' "$tmp/t" >> "$tmp/$name-$bin"
}
cmds=(analyze-24h "analyze --db $data/24h.db run1"
  report-24h "report --db $data/24h.db run1 -o $tmp/rep"
  compare-24h "compare --db $data/24h.db run1 run2"
  export-24h "export --db $data/24h.db run1")
[[ ${WEEK:-0} == 1 ]] && cmds+=(analyze-7d "analyze --db $data/d7.db gen")
load=$(cut -d' ' -f1-3 /proc/loadavg)
# A first, unmeasured run of each binary reads the files into the page cache.
for bin in A B; do
  "$tmp/$bin" analyze --db "$data/24h.db" run1 > /dev/null
done
for _ in $(seq "$rounds"); do
  for ((i = 0; i < ${#cmds[@]}; i += 2)); do
    [[ -n ${ONLY:-} && ${cmds[i]} != "$ONLY" ]] && continue
    for bin in A B; do
      # shellcheck disable=SC2086
      one "${cmds[i]}" "$bin" ${cmds[i+1]}
    done
  done
done
cache="in the page cache"; [[ ${COLD:-0} == 1 ]] && cache="read from disk (COLD=1)"
echo "A = $base, B = the working tree ($head); $rounds rounds, A and B alternating, each file $cache; load before: $load, after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| command | A: CPU median (lowest–highest), RSS median (highest) | B: the same | CPU, A ÷ B |"
echo "| --- | --- | --- | --- |"
for ((i = 0; i < ${#cmds[@]}; i += 2)); do
  n=${cmds[i]}
  [[ -s $tmp/$n-A ]] || continue
  row="| $n |"
  for bin in A B; do
    f=$tmp/$n-$bin
    row+=$(printf ' %.2f s (%.2f–%.2f), %d MiB (%d) |' "$(cut -d' ' -f1 "$f" | median)" \
      "$(cut -d' ' -f1 "$f" | sort -g | head -1)" "$(cut -d' ' -f1 "$f" | sort -g | tail -1)" \
      "$(( $(cut -d' ' -f2 "$f" | median | cut -d. -f1) / 1024 ))" "$(( $(cut -d' ' -f2 "$f" | sort -g | tail -1) / 1024 ))")
  done
  row+=$(printf ' %.2f× |' "$(echo "$(cut -d' ' -f1 "$tmp/$n-A" | median) $(cut -d' ' -f1 "$tmp/$n-B" | median)" | awk '{print $1 / $2}')")
  echo "$row"
done
