"""Training jobs for bench/validation/judge_runs.sh, the fixtures of memrec's
growth rule. Each mode writes what it knows to be true as JSON (--out).

  snapshot  an MLP trained with Adam on one GPU, PyTorch's memory history
            on ("all", Python stacks) from before the first step, so the
            trace holds the one-off allocations of the first step
            (gradients, Adam's two moments) and a leak allocated two calls
            below the loop: log_step() -> keep_for_plot() -> store(), which
            keeps a clone of the logits, 125 x 1024 float32 = 512 000 B a
            step. The snapshot is dumped after the last step (--pickle).
  reserved  a transformer layer on sequences of random length whose
            maximum grows over the run (a length curriculum: the longest
            allowed rises from 256 to 4096 tokens, each batch drawn between
            half of it and it), plus a queue of prefetched batches of
            random sizes (1..64 MiB, the same draw all run, so allocated
            memory at step ends stays flat) that live 1..4 steps: block sizes never seen
            before keep arriving, with interleaved lifetimes. Without
            expandable segments the cache must add segments for them
            (reserved climbs faster than the step's peak); with them the
            segment grows to the peak. (--curriculum 0: lengths 32..2048
            throughout, which on an H200 settles within 300 steps.) Run it
            once with PYTORCH_CUDA_ALLOC_CONF unset and once with
            expandable_segments:True. memrec.step() marks each step.
"""
import argparse
import inspect
import json
import os
import random
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import memrec  # noqa: E402

_plots = []


def store(t):
    _plots.append(t.detach().clone())  # the planted leak: 512 000 B a step


def keep_for_plot(logits):
    store(logits)


def log_step(step, loss, logits):
    if step >= 0:
        keep_for_plot(logits)


STORE_LINE = inspect.getsourcelines(store)[1] + 1


def snapshot(a, res):
    torch.manual_seed(0)
    dev = "cuda"
    d = 1024
    net = nn.Sequential(nn.Linear(d, 2048), nn.GELU(), nn.Linear(2048, 2048), nn.GELU(), nn.Linear(2048, d)).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=1e-4)
    x = torch.randn(125, d, device=dev)
    y = torch.randn(125, d, device=dev)
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python")
    ends = []
    for step in range(a.steps):
        out = net(x)
        loss = nn.functional.mse_loss(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        log_step(step, loss, out)
        torch.cuda.synchronize()
        ends.append(time.time_ns() // 1000)
    torch.cuda.memory._dump_snapshot(a.pickle)
    torch.cuda.memory._record_memory_history(enabled=None)
    params = sum(p.numel() * p.element_size() for p in net.parameters())
    res.update(file=os.path.basename(__file__), store_line=STORE_LINE, store_func="store",
               leak_bytes_per_step=125 * d * 4, steps=a.steps, step_end_us=ends,
               param_bytes=params, grad_bytes=params, adam_state_bytes=2 * params,
               allocated_end=torch.cuda.memory_allocated())


def reserved(a, res):
    torch.manual_seed(0)
    rnd = random.Random(0)
    dev = "cuda"
    d = 512
    layer = nn.TransformerEncoderLayer(d, 8, 2048, batch_first=True).to(dev)
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-4)
    queue = []  # (steps left, tensor): prefetched batches of random sizes
    step = 0
    t0 = time.time()
    t_end = t0 + a.seconds
    samples = []
    while time.time() < t_end:
        longest = 256 + int((4096 - 256) * (time.time() - t0) / a.seconds) if a.curriculum else 2048
        for _ in range(2):
            # 1..64 MiB and many sizes, drawn alike all run long: the queue's
            # bytes at step ends are stationary, so allocated memory does
            # not grow; only the step's inputs do.
            n = (rnd.randint(1, 64) << 20) + rnd.randint(0, 1 << 16)
            queue.append([rnd.randint(1, 4), torch.empty(n, dtype=torch.uint8, device=dev)])
        seq = rnd.randint(longest // 2, longest) if a.curriculum else rnd.randint(32, 2048)
        x = torch.randn(8, seq, d, device=dev)
        loss = layer(x).float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        for q in queue:
            q[0] -= 1
        queue = [q for q in queue if q[0] > 0]
        # The batch is not kept past its step: allocated memory at step
        # ends is the model, its optimizer state and the queue.
        del x, loss
        memrec.step(step)
        step += 1
        if step % 20 == 0:
            torch.cuda.synchronize()
            samples.append((step, torch.cuda.memory_allocated(), torch.cuda.memory_reserved(), torch.cuda.max_memory_allocated()))
    torch.cuda.synchronize()
    res.update(steps=step, alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
               every20=samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["snapshot", "reserved"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--pickle")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--curriculum", type=int, default=1)
    a = ap.parse_args()
    res = {"mode": a.mode, "torch": torch.__version__}
    if a.mode == "snapshot":
        snapshot(a, res)
    else:
        reserved(a, res)
    with open(a.out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
