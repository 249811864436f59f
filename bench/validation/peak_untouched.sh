#!/usr/bin/env bash
# Does memrec change what a script reads of its own peaks? Runs
# bench/validation/peak_untouched.py (it prints its max_memory_allocated() and
# other peaks at the end) without memrec, then under `memrec record --torch`
# with an allocator sample (and the probe's peak reset) at every step, and
# compares each figure: equal within 0.1 %. Under memrec the allocator's
# counter must read lower than the script's figure, or the probe never reset
# it and the check proves nothing. One GPU, under a minute.
#
#   bash bench/validation/peak_untouched.sh MEMREC_BINARY [OUT_DIR]
#
# The last line is PASS or FAIL with both figures of max_memory_allocated().
set -u
if [ $# -lt 1 ] || [ ! -x "$1" ]; then
  echo "usage: $0 MEMREC_BINARY [OUT_DIR]" >&2
  exit 2
fi
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${2:-/tmp/memrec-peak-untouched}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
rm -f "$OUT/peak.db"

# Without memrec: no probe on the path (a pip-installed memrec would be a
# no-op without a recorder anyway).
python3 "$HERE/peak_untouched.py" > "$OUT/without.json" 2> "$OUT/without.err" || {
  echo "FAIL peak_untouched: the script failed without memrec (see $OUT/without.err)"; exit 1; }
MEMREC_STEP_SAMPLE_MS=0 "$BIN" --db "$OUT/peak.db" record --name peak --gpus 0 --interval 100ms --torch -- \
  python3 "$HERE/peak_untouched.py" > "$OUT/with.json" 2> "$OUT/with.err" || {
  echo "FAIL peak_untouched: the script failed under memrec record (see $OUT/with.err)"; exit 1; }

python3 - "$OUT/without.json" "$OUT/with.json" <<'PY'
import json, sys

def last_json(path):
    rows = [l for l in open(path) if l.startswith("{")]
    if not rows:
        sys.exit("FAIL peak_untouched: no figures in %s" % path)
    return json.loads(rows[-1])

a, b = last_json(sys.argv[1]), last_json(sys.argv[2])
bad = []
if not b["probe"]:
    bad.append("the probe was not recording under memrec")
if b["counters_peak"] is not None and not b["counters_peak"] < b["max_allocated"]:
    bad.append("the allocator's counter (%d B) was never reset below the script's peak: nothing was checked" % b["counters_peak"])
for k in ("max_allocated", "max_reserved", "stats_peak", "accelerator_peak", "after_reset"):
    x, y = a[k], b[k]
    if x is None and y is None:
        continue
    off = abs(y - x) / x * 100 if x else (0.0 if y == x else 100.0)
    ok = off <= 0.1
    print("%s %-16s without memrec %d B, with memrec %d B (%.3f %%)" % ("ok  " if ok else "BAD ", k, x, y, off))
    if not ok:
        bad.append(k)
if b["counters_peak"] is not None:
    print("     counters_peak    the allocator's own counter under memrec: %d B (the probe's reset)" % b["counters_peak"])
x, y = a["max_allocated"], b["max_allocated"]
print("%s peak_untouched: max_memory_allocated() without memrec %d B, with memrec %d B%s"
      % ("FAIL" if bad else "PASS", x, y, "; " + ", ".join(bad) if bad else ""))
sys.exit(1 if bad else 0)
PY
