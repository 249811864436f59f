"""Median training-step time with and without memrec, from examples/train.py
logs of alternating runs:  python3 bench/perf/step_overhead.py off1 on1 off2 on2"""
import json
import statistics
import sys


def med(path):
    s = [json.loads(l)["seconds"] for l in open(path) if '"seconds"' in l]
    return statistics.median(s[10:])  # past the warm-up


off = [med(p) for p in sys.argv[1::2]]
on = [med(p) for p in sys.argv[2::2]]
o, n = statistics.median(off), statistics.median(on)
print(f"step time: without memrec {o * 1e3:.3f} ms, with memrec record --torch and memrec.step() {n * 1e3:.3f} ms "
      f"(medians of {len(off)}+{len(on)} runs): {100 * (n - o) / o:+.2f}%")
