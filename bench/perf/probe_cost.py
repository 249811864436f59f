"""What memrec.step() costs the training thread, against the naive way of
reading the same figures, measured in the same process. Run under
`memrec record` so the probe is live:

    memrec record -- python3 bench/perf/probe_cost.py
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import memrec  # noqa: E402

N = 5000
x = torch.randn(4096, 4096, device="cuda")
memrec.step(-1)
memrec.flush()
assert memrec.enabled(), "run me under memrec record"


def timed(f):
    out = []
    for i in range(N):
        t0 = time.perf_counter_ns()
        f(i)
        out.append(time.perf_counter_ns() - t0)
        if i % 500 == 0:
            memrec.flush()
    return out


def naive(i):
    torch.cuda.memory_allocated()
    torch.cuda.memory_reserved()
    torch.cuda.max_memory_allocated()
    torch.cuda.reset_peak_memory_stats()


probe = timed(memrec.step)
ref = timed(naive)
pm, nm = statistics.median(probe) / 1e3, statistics.median(ref) / 1e3
p90 = statistics.quantiles(probe, n=10)[-1] / 1e3
print(f"memrec.step(): median {pm:.1f} µs, p90 {p90:.1f} µs per call (one device); "
      f"naive memory_allocated+memory_reserved+max_memory_allocated+reset: median {nm:.1f} µs; ratio {nm / pm:.1f}x")
memrec.flush()
print("probe:", memrec.stats())
