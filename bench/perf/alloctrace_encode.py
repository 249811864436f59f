"""What the allocator trace costs the training thread at the third step,
past torch's own snapshot: memrec._alloctrace.encode over synthetic history
entries (an allocation and its free each), its zlib stream and the marks'
pieces, medians of 5 rounds per size.

Run: python3 bench/perf/alloctrace_encode.py [ENTRIES ...]   (default 25000 500000)
"""
import os
import statistics
import sys
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from memrec import _alloctrace, _probe  # noqa: E402


def entries(n):
    out = []
    for i in range(n // 2):
        out.append({"action": "alloc", "addr": i, "size": 1000 + i})
        out.append({"action": "free_completed", "addr": i, "size": 1000 + i})
    return out


for n in [int(a) for a in sys.argv[1:]] or [25000, 500000]:
    ev = entries(n)
    enc, comp, pieces = [], [], []
    for _ in range(5):
        t = time.perf_counter()
        data = _alloctrace.encode(ev, 0, 1, 3)
        enc.append(time.perf_counter() - t)
        t = time.perf_counter()
        packed = zlib.compress(data, 6)
        comp.append(time.perf_counter() - t)
        t = time.perf_counter()
        _alloctrace.mark_lines(packed, 0, 0, 1, _probe.mark_line)
        pieces.append(time.perf_counter() - t)
    print("%d entries: encode %.1f ms, compress %.1f ms, marks %.1f ms; %d bytes, %d compressed" % (
        n, 1e3 * statistics.median(enc), 1e3 * statistics.median(comp), 1e3 * statistics.median(pieces), len(data), len(packed)))
