#!/usr/bin/env bash
# Allocation sites and the probe's own cost on an H200 host with 2 GPUs
# (the DDP part needs both; the rest runs on GPU 0). Under 4 minutes.
#
#   bash bench/validation/h200_sites.sh          # ./memrec built from main, results in $OUT
#
# Checks (PASS/FAIL lines in $OUT/summary.txt, the logs in $OUT/logs.tgz):
#   leak   the leak verdict names the helper's line, which explains >= 90 % of the growth
#   clean  no growing site above 1 MiB per epoch
#   oom    a forced OOM lists the largest holders (the holder's line first)
#   ddp    two ranks: each rank's sites on its own GPU, the helper named on both
#   mlpleak the same on a CPU-bound tiny MLP, where the probe keeps the stacks on one step in N
#   speed  --sites at defaults over whole epochs <= 3 % slower, GPU-bound ResNet-18 and CPU-bound MLP,
#          6 pairs of epochs each (the probe's measured cost and N stated)
#   r50    one snapshot + summary <= 200 ms on the training thread (ResNet-50), messages <= 64 KiB
#   mlp    memrec.step() adds <= 25 us a step to a CPU-bound tiny MLP (300 pairs of short blocks, medians),
#          beside the GPU-bound ResNet-18 figure
set -u
BIN=${MEMREC:-./memrec}
OUT=${OUT:-/tmp/memrec-sites}
W=$(mktemp -d /dev/shm/memrec-sites.XXXXXX)
mkdir -p "$OUT"
export MEMREC_DB=$W/runs.db
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
J=bench/validation/sites_job.py
rec() { # name flags... -- command
  local name=$1; shift
  $BIN record --name "$name" "$@" 2> "$W/$name.record.txt" > "$W/$name.stdout.txt"
  echo "$name: exit $? ($(grep -c . "$W/$name.stdout.txt") stdout lines)"
}
start=$(date +%s)
rec leak  --gpus 0 --sites -- python3 $J leak  --out $W/leak.json
rec clean --gpus 0 --sites -- python3 $J clean --out $W/clean.json
rec oom   --gpus 0 --sites -- python3 $J oom   --out $W/oom.json
rec ddp   --sites -- torchrun --standalone --nproc_per_node 2 $J ddp --out $W/ddp.json
rec mlpleak --gpus 0 --sites -- python3 $J mlpleak --out $W/mlpleak.json --steps 400
rec speed --gpus 0 -- python3 $J speed --out $W/speed.json
rec r50   --gpus 0 --sites -- python3 $J r50   --out $W/r50.json
rec mlp   --gpus 0 -- python3 $J mlp --out $W/mlp.json
for r in leak clean oom ddp r50 speed mlpleak; do
  $BIN analyze --json $r > $W/$r.analyze.json 2> $W/$r.analyze.err
  $BIN analyze $r > $W/$r.analyze.txt 2>&1
  $BIN sites $r > $W/$r.sites.txt 2>&1
  $BIN export $r > $W/$r.jsonl 2> $W/$r.export.err
done
echo "ran in $(( $(date +%s) - start )) s"
python3 bench/validation/check_sites.py "$W" | tee "$OUT/summary.txt"
tar czf "$OUT/logs.tgz" -C "$W" --exclude runs.db .
rm -rf "$W"
