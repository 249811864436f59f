"""Compare memrec's TensorBoard export with the run it came from.

Usage: check_tensorboard.py RUN.jsonl DIR_ALL_POINTS DIR_400_POINTS

RUN.jsonl is `memrec export RUN`; DIR_ALL_POINTS holds the event file of
`--format tensorboard --points 1000000` (far more M4 buckets than samples),
DIR_400_POINTS of
`--points 400`. Both are read with TensorBoard's EventAccumulator. Every
expected value is computed here from the JSON Lines, independently of memrec.
Prints PASS/FAIL per check and "PASS" or "FAIL" last.
"""
import json
import struct
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

MIB = float(1 << 20)
failed = []


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def check(name, ok, detail=""):
    print("%s %s %s" % ("PASS" if ok else "FAIL", name, detail))
    if not ok:
        failed.append(name)


def load(d):
    acc = EventAccumulator(d, size_guidance={"scalars": 0})
    acc.Reload()
    return acc


run, dev, torch, marks = None, [], [], []
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line)
        t = r.get("type")
        if t == "run":
            run = r
        elif t == "sample" and r["gpu"] == 0:
            dev.append(r)
        elif t == "torch" and r["gpu"] == 0:
            torch.append(r)
        elif t == "mark":
            marks.append(r)
dev.sort(key=lambda r: r["t_ns"])
torch.sort(key=lambda r: r["t_ns"])
used_at = {r["t_ns"] // 1000: r["used_bytes"] for r in dev}  # µs → bytes
peak_used = max(r["used_bytes"] for r in dev)

# Allocated and reserved summed over the GPU's processes, each holding its
# last report.
last, alloc_at, resv_at = {}, {}, {}
for r in torch:
    last[r["pid"]] = r
    alloc_at[r["t_ns"] // 1000] = sum(x["allocated_bytes"] for x in last.values())
    resv_at[r["t_ns"] // 1000] = sum(x["reserved_bytes"] for x in last.values())
steps = sorted(m["step"] for m in marks if m["kind"] == "step" and "step" in m)
epochs = {}
for m in marks:
    if m["kind"] in ("epoch_start", "epoch_end") and "epoch" in m:
        epochs.setdefault(m["epoch"], {})[m["kind"]] = m["t_ns"]


def used_before(t_ns):
    v = None
    for r in dev:
        if r["t_ns"] > t_ns:
            break
        v = r["used_bytes"]
    return v


def compare_series(acc, tag, truth, label, exact_count):
    ev = acc.Scalars(tag)
    bad = [e for e in ev if round(e.wall_time * 1e6) not in truth or f32(truth[round(e.wall_time * 1e6)] / MIB) != e.value]
    check("%s %s: every point is the run's value at its time" % (label, tag), not bad and len(ev) > 0,
          "(%d points, %d differ%s)" % (len(ev), len(bad), "; first %r" % (bad[0],) if bad else ""))
    if exact_count:
        # M4 buckets are spans of time: even with far more buckets than
        # samples, a burst of three samples within one bucket keeps only its
        # first, last, lowest and highest.
        check("%s %s: nearly every sample kept" % (label, tag), len(ev) >= 0.95 * len(truth), "(%d points, %d samples)" % (len(ev), len(truth)))
    top = max(truth.values())
    check("%s %s: the peak is kept" % (label, tag), max(e.value for e in ev) == f32(top / MIB),
          "(%.3f MiB vs %.3f MiB)" % (max(e.value for e in ev), top / MIB))
    return ev


for d, label, full in ((sys.argv[2], "all", True), (sys.argv[3], "400", False)):
    acc = load(d)
    tags = acc.Tags()["scalars"]
    print("%s: %d tags: %s" % (label, len(tags), " ".join(sorted(tags))))
    ev = compare_series(acc, "device_used_MiB/gpu0", used_at, label, full)
    if not full:
        for tag in tags:
            n = len(acc.Scalars(tag))
            check("400 %s: at most 400 points" % tag, n <= 400, "(%d)" % n)
    s = [e.step for e in ev]
    check("%s device_used steps follow the training" % label,
          s == sorted(s) and (not steps or (min(s) >= steps[0] and max(s) <= steps[-1])),
          "(steps %d..%d, step marks %s..%s)" % (min(s), max(s), steps[0] if steps else "-", steps[-1] if steps else "-"))
    if torch:
        compare_series(acc, "allocated_MiB/gpu0", alloc_at, label, False)
        compare_series(acc, "reserved_MiB/gpu0", resv_at, label, False)
        pk = acc.Scalars("step_peak_allocated_MiB/gpu0")
        truth_pk = max(r.get("peak_allocated_bytes", 0) for r in torch)
        check("%s step_peak_allocated: the highest equals the probe's highest step peak" % label,
              max(e.value for e in pk) == f32(truth_pk / MIB), "(%.3f vs %.3f MiB)" % (max(e.value for e in pk), truth_pk / MIB))
        fr = acc.Scalars("fragmentation/gpu0")
        check("%s fragmentation within [0, 1]" % label, fr and all(0 <= e.value <= 1 for e in fr), "(%d points)" % len(fr))
    ed = acc.Scalars("epoch_delta_used_MiB/gpu0") if "epoch_delta_used_MiB/gpu0" in tags else []
    want = {}
    for n, e in epochs.items():
        if "epoch_start" in e and "epoch_end" in e:
            a, b = used_before(e["epoch_start"]), used_before(e["epoch_end"])
            if a is not None and b is not None:
                want[n] = f32((b - a) / MIB)
    got = {e.step: e.value for e in ed}
    check("%s epoch_delta_used: one per epoch, each used(end) - used(start)" % label, got == want, "(got %r, want %r)" % (got, want))

print("FAIL" if failed else "PASS")
sys.exit(1 if failed else 0)
