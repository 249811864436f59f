#!/usr/bin/env bash
# Where the recorder's CPU goes: sources, intervals, and the database on disk or in memory.
B=${MEMREC:-.bin/memrec}
run() { echo "-- $*"; $B record --duration 20s "$@" 2>&1 | grep -E "ticks|recorder"; }
export MEMREC_DB=/tmp/c.db
run --name a --source sim --sim-gpus 1 --interval 10ms
run --name b --source sim --sim-gpus 1 --interval 10ms --db /dev/shm/c.db
run --name c --source sim --sim-gpus 1 --interval 1ms --db /dev/shm/c.db
run --name d --interval 10ms --procs --db /dev/shm/c.db
run --name e --interval 10ms --db /dev/shm/c.db
run --name f --interval 1ms --procs --db /dev/shm/c.db
