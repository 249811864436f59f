#!/usr/bin/env bash
# H200 check of the JAX probe: a plain-JAX MLP (bench/validation/jax_train.py,
# JAX's defaults: 75 % of the GPU preallocated) recorded with
# `memrec record --jax`, 3 epochs of 100 steps with a planted leak of
# 1 MiB a step. Checks (bench/validation/check_jax.py) that every step-end sample
# equals memory_stats()["bytes_in_use"] read by the script itself and that
# analyze finds the leak with its exact slope. With pyarrow installed, a
# Parquet export of the run is read back too. One GPU, about 40 s.
#
#   bash bench/validation/jax_check.sh OUT_DIR
set -u
BIN=${MEMREC:-./memrec}; OUT=${1:-/tmp/memrec-jax}
mkdir -p "$OUT"; export MEMREC_DB=$OUT/jax.db PYTHONUNBUFFERED=1
rm -f "$MEMREC_DB"
# One allocator sample at every step (the default spaces them by their cost).
MEMREC_STEP_SAMPLE_MS=0 $BIN record --name jax --gpus 0 --interval 10ms --jax -- \
  python3 bench/validation/jax_train.py "$OUT/script.jsonl" 3 100 2> "$OUT/record.txt" > /dev/null
tail -8 "$OUT/record.txt"
$BIN export jax -o "$OUT/jax.jsonl"
$BIN analyze jax > "$OUT/analyze.txt"; head -12 "$OUT/analyze.txt"
$BIN analyze jax --json > "$OUT/analyze.json"
python3 bench/validation/check_jax.py "$OUT/jax.jsonl" "$OUT/script.jsonl" "$OUT/analyze.json" 1048576 2>&1 | tee "$OUT/check.txt"
ok=${PIPESTATUS[0]}
if $BIN export --help 2>&1 | grep -q parquet && python3 -c 'import pyarrow' 2>/dev/null; then
  $BIN export jax --format parquet -o "$OUT/parquet" && python3 - "$OUT/parquet" "$OUT/jax.jsonl" <<'PY' 2>&1 | tee -a "$OUT/check.txt"
import json, sys, pyarrow.dataset as ds
want = {"device": 0, "allocator": 0, "marks": 0}
for l in open(sys.argv[2]):
    t = json.loads(l)["type"]
    k = {"sample": "device", "torch": "allocator", "mark": "marks"}.get(t)
    if k: want[k] += 1
bad = []
for k, n in want.items():
    got = ds.dataset(sys.argv[1] + "/" + k, format="parquet", partitioning="hive").count_rows()
    print(k, got, "rows, JSON Lines", n)
    bad += [k] if got != n else []
import pyarrow
print("%s pyarrow %s reads the parquet export back" % ("FAIL" if bad else "PASS", pyarrow.__version__))
PY
fi
exit $ok
