"""Runs out of GPU memory on purpose, to see memrec's OOM post-mortem.

    memrec record -- python examples/oom.py
"""
import os
import sys

import torch

try:
    import memrec
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import memrec

keep = [torch.randn(1024, 1024, 256, device="cuda")]  # 1 GiB
with memrec.epoch(0):
    memrec.step(0)
    try:
        free, total = torch.cuda.mem_get_info()
        torch.empty(total * 2, dtype=torch.uint8, device="cuda")
    except torch.cuda.OutOfMemoryError as e:
        print("out of memory, as planned:", str(e).splitlines()[0])
memrec.flush()
