#!/usr/bin/env bash
# Wake and NVML costs of a C loop against memrec's Go loop, same machine, same run.
# Run on the GPU machine from the repo root with binaries in .bin/.
S=${SECS:-10}
for iv in 1000 10000; do for m in sleep v1 v2 v2procs; do .bin/cwake $iv $S $m; done; done
export MEMREC_DB=/dev/shm/cw.db
for iv in 1ms 10ms; do echo "-- memrec $iv --procs"; .bin/memrec record --name g$iv --interval $iv --gpus 0 --procs --duration ${S}s 2>&1 | grep -E "ticks|recorder"; done
echo "-- while training"
python3 examples/train.py --epochs 1000 --steps 100000 --seconds $((3*S+15)) >/dev/null 2>&1 &
sleep 12
.bin/cwake 1000 $S v2procs; .bin/cwake 1000 $S v2
.bin/memrec record --name gt --interval 1ms --gpus 0 --procs --duration ${S}s 2>&1 | grep -E "ticks|recorder"
wait
