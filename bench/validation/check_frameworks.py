"""Checks a run of bench/validation/frameworks.py (memrec export RUN | python3 bench/validation/check_frameworks.py):
epoch marks 0 and 1 once each, 16 step marks, at least 16 allocator samples."""
import collections
import json
import sys

marks, torch = collections.Counter(), 0
for line in sys.stdin:
    r = json.loads(line)
    if r["type"] == "mark":
        marks[(r["kind"], r.get("epoch"))] += 1
    torch += r["type"] == "torch"
epochs = [marks[(k, e)] for k in ("epoch_start", "epoch_end") for e in (0, 1)]
steps = sum(n for (k, _), n in marks.items() if k == "step")
ok = epochs == [1, 1, 1, 1] and steps == 16 and torch >= 16
print(f"epoch_start/epoch_end marks for epochs 0, 1: {epochs}; {steps} step marks; {torch} allocator samples ->",
      "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
