#!/usr/bin/env bash
# A shorter H200 pass: the probe's step-end samples, --torch on a script that
# does not know memrec, and 1 ms sampling while a job trains.
set -u
BIN=${MEMREC:-./memrec}; OUT=${OUT:-/tmp/memrec-h200}; SECS=${SECS:-60}
mkdir -p "$OUT"; export MEMREC_DB=$OUT/q.db PYTHONUNBUFFERED=1
$BIN record --name train --torch -- python3 examples/train.py --epochs 2 --steps 40 --log "$OUT/train-log.jsonl" 2> /dev/null
$BIN export train -o "$OUT/train.jsonl"
python3 bench/validation/check_probe.py "$OUT/train.jsonl" "$OUT/train-log.jsonl"
$BIN record --name zero --torch -- python3 -c "import torch, time; x = torch.randn(4096, 4096, device='cuda'); time.sleep(1.5)" 2> /dev/null
echo "--torch, script unchanged: $($BIN export zero | grep -c '"type":"torch"') allocator samples"
$BIN record --name tick1ms --interval 1ms --gpus 0 --procs -- \
  python3 examples/train.py --epochs 1000 --steps 100000 --seconds "$SECS" 2>&1 >/dev/null | grep -E 'ticks|recorder'
