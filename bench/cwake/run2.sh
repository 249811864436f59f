#!/usr/bin/env bash
S=${SECS:-10}
for iv in 1000 10000; do
  for m in sleep v2 v2x2; do .bin/cwake $iv $S $m; done
  for m in sleep v2; do PIN=3 .bin/cwake $iv $S $m; done
done
python3 bench/nvml_loop.py $S 1; python3 bench/nvml_loop.py $S 1 mem
python3 bench/nvml_loop.py $S 10; python3 bench/nvml_loop.py $S 10 mem
