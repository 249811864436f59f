"""A small PyTorch job for the allocator trace's guards, under memrec record
(its default trace):  python3 bench/validation/trace_guard.py --mode own|early|streams|plain
  own      the job turns the allocator's history on itself at its second
           step (a snapshot of its own): the probe must leave it on (its
           entries still grow after the third step) and send no trace;
  early    the same before its first CUDA call (the probe's start, queued
           for CUDA's initialisation, must then do nothing);
  streams  one request on a side stream: no trace, a note;
  plain    the trace is sent.
Prints one JSON line: the mode, the history's entries at the third and the
sixth step's end (own), and whether the job's own snapshot was written."""
import argparse
import json
import os
import tempfile

import torch

try:
    import memrec
except ImportError:
    memrec = None

a = argparse.ArgumentParser()
a.add_argument("--mode", choices=("own", "early", "streams", "plain"), default="plain")
a = a.parse_args()
if a.mode == "early":
    torch.cuda.memory._record_memory_history(max_entries=100000)
dev = torch.device("cuda")
net = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).to(dev)
opt = torch.optim.SGD(net.parameters(), lr=0.01)
out = {"mode": a.mode}
for i in range(6):
    if a.mode == "own" and i == 1:
        torch.cuda.memory._record_memory_history(max_entries=100000)
    if a.mode == "streams" and i == 0:
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            side = torch.empty(1 << 20, device=dev)
        torch.cuda.synchronize()
        del side
    x = torch.randn(256, 1024, device=dev)
    net(x).square().mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    if memrec:
        memrec.step(i)
    if a.mode in ("own", "early") and i in (2, 5):
        out["entries_step%d" % (i + 1)] = len(torch.cuda.memory._snapshot()["device_traces"][0])
if a.mode in ("own", "early"):
    path = os.path.join(tempfile.mkdtemp(), "snap.pickle")
    torch.cuda.memory._dump_snapshot(path)
    out["snapshot_bytes"] = os.path.getsize(path)
    out["history_left_on"] = out["entries_step6"] > out["entries_step3"]
print(json.dumps(out))
