#!/usr/bin/env bash
# Does a TensorBoard export, opened by TensorBoard's own EventAccumulator
# with its default size guidance (which keeps 1 000 scalars a series by
# reservoir sampling), still show the run's peak? A simulated 10-minute run
# at 10 ms (60 000 samples a GPU), exported with the default points; the
# peak of device used and of allocated read back against the run's own
# maxima from its JSON Lines. Needs the tensorboard Python package, no GPU.
#
#   bash bench/validation/tb_default_keeps_peak.sh MEMREC_BINARY [OUT_DIR]
set -u
BIN=$(readlink -f "${1:?memrec binary}"); OUT=${2:-/tmp/memrec-tb}; mkdir -p "$OUT"
rm -rf "$OUT/tb" "$OUT/tb.db"
"$BIN" --db "$OUT/tb.db" record --source sim --sim-scenario leak --duration 10m --sim-speed 50 --name tb > "$OUT/record.txt" 2>&1
"$BIN" --db "$OUT/tb.db" export tb -o "$OUT/tb.jsonl"
"$BIN" --db "$OUT/tb.db" export tb --format tensorboard -o "$OUT/tb" > "$OUT/export.txt" 2>&1
python3 - "$OUT/tb.jsonl" "$OUT/tb" <<'PY'
import json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
peak_used, last, peak_alloc = {}, {}, {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("type") == "sample":
        peak_used[r["gpu"]] = max(peak_used.get(r["gpu"], 0), r["used_bytes"])
    elif r.get("type") == "torch":
        last.setdefault(r["gpu"], {})[r["pid"]] = r["allocated_bytes"]
        peak_alloc[r["gpu"]] = max(peak_alloc.get(r["gpu"], 0), sum(last[r["gpu"]].values()))
acc = EventAccumulator(sys.argv[2])  # TensorBoard's default size guidance
acc.Reload()
tags = acc.Tags()["scalars"]
bad = []
for gpu, want in sorted(peak_used.items()):
    tag = "device_used_MiB/gpu%d" % gpu
    if tag not in tags:
        tag = None
    if tag is None:
        bad.append("no used series for GPU %d in %s" % (gpu, tags)); continue
    ev = acc.Scalars(tag)
    got = max(e.value for e in ev)
    ratio = got * (1 << 20) / want  # the series is in MiB, as float32
    print("%s gpu%d %s: %d points kept, max %.6g vs run peak %d B (ratio %.6f)" % (
        "ok  " if abs(ratio - 1) < 1e-5 else "BAD ", gpu, tag, len(ev), got, want, ratio))
    if abs(ratio - 1) >= 1e-5:
        bad.append(tag)
print(("FAIL tb_default_keeps_peak: " + ", ".join(bad)) if bad else "PASS tb_default_keeps_peak: every GPU's peak of device used is in what TensorBoard keeps by default")
PY
