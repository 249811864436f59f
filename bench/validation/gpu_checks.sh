#!/usr/bin/env bash
# Every GPU check that has a script, in one go on one GPU machine, with a
# PASS/FAIL summary last: the job's own peaks under memrec, the framework
# callbacks, and (with OVERHEAD=1) the end-to-end overhead benchmark.
#
#   bash bench/validation/gpu_checks.sh MEMREC_BINARY OUT_DIR [CHECKS]
#   CHECKS: comma-separated from peaks,integrations,tensorboard,overhead,whatif (default peaks,integrations;
#   whatif is bench/validation/whatif_check.sh: the allocator what-ifs, the OOM cause, the trace-less prediction)
set -u
BIN=$(readlink -f "${1:?memrec binary}"); OUT=${2:?out dir}; CHECKS=${3:-peaks,integrations}
mkdir -p "$OUT"; HERE=$(cd "$(dirname "$0")" && pwd)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__)' | tee -a "$OUT/gpu.txt"
summary=()
has() { [[ ",$CHECKS," == *",$1,"* ]]; }
if has peaks; then
  bash "$HERE/peak_untouched.sh" "$BIN" "$OUT/peaks" > "$OUT/peaks.txt" 2>&1
  summary+=("$(tail -n 1 "$OUT/peaks.txt")")
fi
if has integrations; then
  timeout 300 python3 "$HERE/check_integrations.py" "$BIN" "$OUT/integrations" > "$OUT/integrations.txt" 2>&1
  summary+=("$(grep -E '^(PASS|FAIL)' "$OUT/integrations.txt" | tr '\n' ';')")
fi
if has overhead; then
  OUT="$OUT/overhead" bash "$HERE/../perf/overhead.sh" "$BIN" "${OVERHEAD_JOBS:-transformer,short,loader}" "${OVERHEAD_ROUNDS:-3}" "${OVERHEAD_SECONDS:-5}" > "$OUT/overhead.txt" 2>&1
  summary+=("overhead: see overhead.txt")
fi
if has tensorboard; then
  timeout 300 bash "$HERE/tb_default_keeps_peak.sh" "$BIN" "$OUT/tb" > "$OUT/tensorboard.txt" 2>&1
  summary+=("$(grep -E '^(PASS|FAIL)' "$OUT/tensorboard.txt" | tr '\n' ';')")
fi
if has whatif && [ -f "$HERE/whatif_check.sh" ]; then
  timeout 400 bash "$HERE/whatif_check.sh" "$BIN" "$OUT/whatif" > "$OUT/whatif.txt" 2>&1
  summary+=("$(grep -E '^(PASS|FAIL)' "$OUT/whatif.txt" | tr '\n' ';')")
fi
printf '%s\n' "${summary[@]}"
