#!/usr/bin/env bash
# The floor: what a bare C loop pays to wake every interval and read NVML
# (bench/tools/cwake/cwake.c), against memrec's native thread and Go loop, same
# machine, same run. On the GPU machine, from the repo root, with
#   gcc -O2 -o .bin/cwake bench/tools/cwake/cwake.c -ldl; go build -o .bin/memrec ./cmd/memrec
S=${SECS:-10}
for iv in 1000 10000; do for m in sleep v1 v2 v2procs; do .bin/cwake $iv $S $m; done; done
export MEMREC_DB=/dev/shm/cw.db
for iv in 1ms 10ms; do for s in native go; do
  echo "-- memrec $iv --procs --sampler $s"; .bin/memrec record --name $s$iv --sampler $s --interval $iv --gpus 0 --procs --duration ${S}s 2>&1 | grep -E "ticks|recorder"
done; done
echo "-- while training"
python3 examples/train.py --epochs 1000 --steps 100000 --seconds $((3*S+15)) >/dev/null 2>&1 &
sleep 12
.bin/cwake 1000 $S v2procs; .bin/cwake 1000 $S v2
.bin/memrec record --name training --interval 1ms --gpus 0 --procs --duration ${S}s 2>&1 | grep -E "ticks|recorder"
wait
