#!/usr/bin/env bash
# memrec's Lightning and Hugging Face callbacks with the real frameworks: each
# run must have epoch marks 0 and 1, 16 step marks and allocator samples.
set -u
BIN=${MEMREC:-./memrec}; export MEMREC_DB=${MEMREC_DB:-/tmp/memrec-frameworks.db} PYTHONUNBUFFERED=1
for fw in lightning pytorch_lightning transformers; do
  $BIN record --name $fw --interval 100ms -- python3 bench/validation/frameworks.py $fw > /tmp/memrec-$fw.log 2>&1
  code=$?
  echo "$fw: exit $code; $($BIN export $fw | python3 bench/validation/check_frameworks.py)"
  grep -iE "error|Traceback" /tmp/memrec-$fw.log | head -3
done
