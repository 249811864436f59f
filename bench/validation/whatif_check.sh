#!/usr/bin/env bash
# GPU checks of the allocator what-ifs, the OOM's cause and the trace-less
# prediction (bench/validation/whatif_check.py says what each checks and its
# tolerance). One line per check: PASS/FAIL/SKIP NAME detail; each check is
# independent and has its own timeouts; the whole stays under 6 minutes on
# one 80 GB H100 (BUDGET_S, default 340 s, for the checks; TOL the what-ifs'
# tolerance, default 0.10; FRACTION the trace-less check's memory fraction;
# ONLY prefixes of the checks to run, e.g. ONLY=whatif-varlm,oom,traceless).
#
#   bash bench/validation/whatif_check.sh MEMREC_BINARY OUT_DIR
set -u
BIN=$(readlink -f "${1:?usage: whatif_check.sh MEMREC_BINARY OUT_DIR}")
OUT=${2:?usage: whatif_check.sh MEMREC_BINARY OUT_DIR}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
python3 -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__)' >> "$OUT/gpu.txt" 2>&1
LIMIT=$(( ${BUDGET_S:-340} + 15 ))
timeout $LIMIT python3 "$HERE/whatif_check.py" check "$BIN" "$OUT"
rc=$?
[ $rc -eq 124 ] && echo "FAIL whatif-all timed out after $LIMIT s (see $OUT/times.txt)"
exit 0
