"""Training jobs for bench/validation/h200_sites.sh: allocation sites and the probe's
cost, on a GPU. Each mode writes what it knows to be true (the helper's
line, its timings) as JSON to the file named by --out.

  leak   ResNet-18, batch 64, 3 epochs: remember() keeps a clone of each
         step's logits (64*1000*4 = 256 000 B a step)
  clean  the same without the leak
  oom    the leak's helper keeps 1 GiB blocks until the GPU is full
  ddp    leak on two ranks (torchrun --nproc_per_node 2), each on its GPU
  speed  whole epochs without and with sites at their defaults, alternating
         (off, on, on, off, ...), for ResNet-18 batch 64 (GPU-bound, 200
         steps an epoch) and a tiny MLP (CPU-bound, 2000 steps an epoch),
         after one epoch with sites on in which the probe measures what the
         stacks cost; a synchronize after each step (as a loss.item() would)
  mlpleak  the tiny MLP with sites on: hold() keeps a new 64 KiB tensor a
         step, 3 epochs of 400 steps (the probe samples the stacks here)
  r50    ResNet-50, batch 64, sites on: the training thread's time for one
         snapshot and its summary, in state mode and at a window's end
  mlp    the probe's cost per step: a tiny MLP (CPU-bound, launch-bound)
         and ResNet-18 (GPU-bound), short blocks of steps without and with
         memrec.step(), alternating, many pairs
"""
import argparse
import inspect
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import memrec  # noqa: E402

kept = []


def remember(t):
    kept.append(t.detach().clone())  # the planted leak


def hold(n):
    kept.append(torch.empty(n, dtype=torch.uint8, device="cuda"))  # the OOM's holder


LEAK_LINE = inspect.getsourcelines(remember)[1] + 1
HOLD_LINE = inspect.getsourcelines(hold)[1] + 1


def tiny_mlp():
    mlp = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).cuda()
    opt = torch.optim.SGD(mlp.parameters(), lr=0.01)
    x = torch.randn(32, 64, device="cuda")
    y = torch.randint(0, 10, (32,), device="cuda")
    lossf = nn.CrossEntropyLoss()

    def step(leak=False):
        loss = lossf(mlp(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if leak:
            hold(1 << 16)
    return step


def resnet(arch="resnet18", batch=64, dev="cuda"):
    net = getattr(torchvision.models, arch)(num_classes=1000).to(dev)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        net = nn.parallel.DistributedDataParallel(net, device_ids=[torch.cuda.current_device()])
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224, device=dev)
    y = torch.randint(0, 1000, (batch,), device=dev)
    lossf = nn.CrossEntropyLoss()

    def step(leak=False):
        out = net(x)
        loss = lossf(out, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if leak:
            remember(out)
    return step


def epochs(step, n_epochs, n_steps, leak, start=0):
    """Runs epochs; returns each step's time (with its memrec.step) and the
    mean step time over the whole epochs (with their marks and summaries)."""
    times = []
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for e in range(start, start + n_epochs):
        with memrec.epoch(e):
            for i in range(n_steps):
                t = time.perf_counter()
                step(leak)
                memrec.step(e * n_steps + i)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t)
    torch.cuda.synchronize()
    return times, (time.perf_counter() - t0) / (n_epochs * n_steps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=40)
    a = ap.parse_args()
    res = {"mode": a.mode, "file": os.path.abspath(__file__), "leak_line": LEAK_LINE, "hold_line": HOLD_LINE,
           "leak_bytes_per_step": 64 * 1000 * 4, "steps_per_epoch": a.steps}
    if a.mode in ("leak", "clean"):
        step = resnet()
        for _ in range(5):
            step()
        epochs(step, 3, a.steps, a.mode == "leak")
    elif a.mode == "ddp":
        import torch.distributed as dist
        local = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local)
        dist.init_process_group("nccl")
        step = resnet()
        for _ in range(3):
            step()
        epochs(step, 2, a.steps, True)
        res["rank"] = dist.get_rank()
        dist.barrier()
        dist.destroy_process_group()
        a.out = a.out.replace(".json", "-rank%d.json" % res["rank"])
    elif a.mode == "oom":
        step = resnet()
        step()
        res["oom"] = False
        try:
            with memrec.epoch(0):
                for i in range(10000):
                    hold(1 << 30)
                    memrec.step(i)
        except torch.cuda.OutOfMemoryError:
            res["oom"] = True
        res["held_bytes"] = sum(t.numel() for t in kept)
        kept.clear()
    elif a.mode == "speed":
        p = memrec._get()
        for name, step, n in (("resnet18", resnet(), 200), ("mlp", tiny_mlp(), 2000)):
            for _ in range(20):
                step()
            p.sites.every, p.sites.cost = 0, None  # each job measured on its own
            p.sites.windows_first, p.sites.windows_cost = 0.0, 0.0
            memrec.sites(True)
            epochs(step, 1, max(n, 300), False, 0)  # the probe measures the stacks' cost here (257 steps)
            memrec.sites(False)
            off, on = [], []
            for r in range(8):  # off, on, on, off, off, on, ...: drift cancels
                for sites in ((False, True) if r % 2 == 0 else (True, False)):
                    memrec.sites(sites)
                    _, wall = epochs(step, 1, n, False, 1 + 2 * r + int(sites))
                    (on if sites else off).append(wall)
            memrec.sites(False)
            res[name] = dict(epoch_s_off=off, epoch_s_on=on, steps_per_epoch=n, every=p.sites.every,
                             cost=p.sites.cost, windows_cost_s=p.sites.windows_cost)
    elif a.mode == "mlpleak":
        step = tiny_mlp()
        for _ in range(50):
            step()
        res["leak_bytes_per_step"], res["leak_line"] = 1 << 16, HOLD_LINE
        epochs(step, 3, a.steps, True)
        p = memrec._get()
        res.update(every=p.sites.every, cost=p.sites.cost)
    elif a.mode == "r50":
        step = resnet("resnet50")
        for _ in range(5):
            step()
        p = memrec._get()
        memrec.sites(True)
        costs = []
        for i in range(5):
            step()
            torch.cuda.synchronize()
            memrec.snapshot("r50-%d" % i)
            costs.append(p.sites.last_cost)
        res["snapshot_summary_s_state"] = costs
        opened = False
        with memrec.epoch(0):
            for i in range(16):
                step()
                memrec.step(i)
                if p.sites.window_end >= 0:
                    opened = True
                elif opened and "window_summary_s" not in res:
                    res["window_summary_s"] = p.sites.last_cost
        res["epoch_end_summary_s"] = p.sites.last_cost
    elif a.mode == "mlp":
        res.update(probe_cost())
    json.dump(res, open(a.out, "w"), indent=1)
    memrec.flush()


def probe_cost():
    """What memrec.step() adds to a step: short blocks of steps without and
    with it, in pairs whose order alternates (off-on, on-off, ...) so that
    drift cancels; per pair the difference of the mean step time (wall),
    of the process's CPU time (every thread: the probe's sender included)
    and of the training thread's own CPU time, medians over all pairs; and
    the median time of the memrec.step() call itself."""
    out = {}
    for name, step, block, pairs in (("mlp", tiny_mlp(), 20, 300), ("resnet18", resnet(), 5, 100)):
        for _ in range(50 if name == "mlp" else 10):
            step()
        memrec.step(-1)
        torch.cuda.synchronize()
        wall, cpu, thread, calls, offs = [], [], [], [], []
        k = 0
        for pr in range(pairs):
            got = {}
            for probe in ((False, True) if pr % 2 == 0 else (True, False)):
                torch.cuda.synchronize()
                t, c, th = time.perf_counter(), time.process_time(), time.thread_time()
                for i in range(block):
                    step()
                    if probe:
                        t1 = time.perf_counter()
                        memrec.step(k)
                        calls.append(time.perf_counter() - t1)
                        k += 1
                torch.cuda.synchronize()
                got[probe] = ((time.perf_counter() - t) / block, (time.process_time() - c) / block, (time.thread_time() - th) / block)
            wall.append(got[True][0] - got[False][0])
            cpu.append(got[True][1] - got[False][1])
            thread.append(got[True][2] - got[False][2])
            offs.append(got[False][0])
        q = statistics.quantiles(wall, n=20)
        out[name] = {"added_us": statistics.median(wall) * 1e6, "added_cpu_us": statistics.median(cpu) * 1e6,
                     "added_thread_us": statistics.median(thread) * 1e6, "call_us": statistics.median(calls) * 1e6,
                     "step_ms": statistics.median(offs) * 1e3, "pairs": pairs, "block_steps": block,
                     "added_us_p25_p75": [statistics.quantiles(wall, n=4)[0] * 1e6, statistics.quantiles(wall, n=4)[2] * 1e6],
                     "added_us_p5_p95": [q[0] * 1e6, q[-1] * 1e6]}
    out["probe"] = memrec.stats()
    return out


if __name__ == "__main__":
    main()
