"""What memrec.watch adds to memrec.step(), on this machine, without a GPU:
the probe's own Python work with a torch stand-in whose calls cost nothing,
so what is left is the budget's walk and gradient reads.

    python3 bench/perf/budget_cost.py [--params 148] [--step-ms 1] [--blocks 16]

A job of 1 ms steps (CPU-bound) whose model has 148 parameter tensors (GPT-2
small) with AdamW-like state; zero_grad(set_to_none=True) each step, so every
gradient is a new tensor. Blocks of steps alternate without and with
memrec.watch; each block's mean time in memrec.step() (the mean, not the
median: the budget's cost falls on the steps that take a sample) is compared
with its neighbours'. Prints the medians over blocks and their difference per
step. The real GPU figure is bench/validation/budget_check.sh's (cost.json).
"""
import argparse
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import memrec  # noqa: E402
from memrec import _probe  # noqa: E402

_addr = [1 << 20]


class Storage:
    def __init__(self, n):
        self.p, self.n = _addr[0], n
        _addr[0] += n + 4096

    def data_ptr(self):
        return self.p

    def nbytes(self):
        return self.n


class Tensor:
    is_cuda = True
    dtype = "torch.float32"

    def __init__(self, numel, requires_grad=False):
        self.s, self.numel_, self.requires_grad, self.grad = Storage(4 * numel), numel, requires_grad, None

    def untyped_storage(self):
        return self.s

    def get_device(self):
        return 0

    def numel(self):
        return self.numel_

    def element_size(self):
        return 4


class Model:
    def __init__(self, n):
        self.ps = [Tensor(768 * 768, True) for _ in range(n)]

    def parameters(self):
        return iter(self.ps)

    def buffers(self):
        return iter(())

    def register_forward_pre_hook(self, f):
        return types.SimpleNamespace(remove=lambda: None)


class Opt:
    def __init__(self, ps):
        self.param_groups = [{"params": ps}]
        self.state = {p: {"exp_avg": Tensor(p.numel()), "exp_avg_sq": Tensor(p.numel())} for p in ps}


def fake_torch():
    t = types.ModuleType("torch")
    st = {"allocated_bytes": {"all": {"current": 1, "peak": 1}}, "reserved_bytes": {"all": {"current": 2}}}
    t.cuda = types.SimpleNamespace(is_initialized=lambda: True, device_count=lambda: 1, current_device=lambda: 0)
    t._C = types.SimpleNamespace(_cuda_memoryStats=lambda d: st, _cuda_resetPeakMemoryStats=lambda d: None)
    return t


def sink():
    """A socket that reads and drops what the probe sends."""
    path = os.path.join(tempfile.mkdtemp(), "s.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)

    def run():
        c, _ = srv.accept()
        while c.recv(1 << 20):
            pass

    threading.Thread(target=run, daemon=True).start()
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", type=int, default=148)
    ap.add_argument("--step-ms", type=float, default=1.0)
    ap.add_argument("--blocks", type=int, default=16)
    ap.add_argument("--steps", type=int, default=300)
    a = ap.parse_args()
    sys.modules["torch"] = fake_torch()
    p = _probe.Probe(path=sink(), timer=0.25)
    memrec._instance = p
    model = Model(a.params)
    opt = Opt(model.ps)
    calls = [0]
    budget = p._budget

    def counted():
        calls[0] += 1
        return budget()

    p._budget = counted
    work = a.step_ms / 1e3
    means = {False: [], True: []}
    i = 0
    for b in range(a.blocks):
        on = b % 2 == 1
        p.watch = None
        if on:
            memrec.watch(model, opt)
        ts = []
        for _ in range(a.steps):
            for q in model.ps:  # zero_grad(set_to_none=True), then backward: new gradients
                q.grad = None
            end = time.perf_counter() + work
            while time.perf_counter() < end:  # the step's own CPU work
                pass
            for q in model.ps:
                q.grad = Tensor(q.numel())
            t0 = time.perf_counter_ns()
            memrec.step(i)
            ts.append(time.perf_counter_ns() - t0)
            i += 1
        means[on].append(statistics.fmean(ts) / 1e3)
        memrec.flush()
    off, on = statistics.median(means[False]), statistics.median(means[True])
    print("memrec.step(), mean per step over blocks of %d steps of %.1f ms, %d parameter tensors: "
          "without watch %.2f µs, with %.2f µs: watch adds %.2f µs a step (median of %d blocks each)"
          % (a.steps, a.step_ms, a.params, off, on, on - off, len(means[True])))
    print("walks: %d; budget reads %d in %d steps with watch; sample spacing %.1f ms"
          % (p.watch.walks if p.watch else -1, calls[0], a.steps * len(means[True]), p.step_sample_ns / 1e6))
    # One budget read alone, against a plain loop reading one attribute of
    # each parameter, timed alternately in the same run.
    w = p.watch
    ref, fig = [], []
    for _ in range(200):
        t0 = time.perf_counter_ns()
        n = 0
        for q in model.ps:
            if q.grad is not None:
                n += 1
        t1 = time.perf_counter_ns()
        w.figures()
        t2 = time.perf_counter_ns()
        ref.append(t1 - t0)
        fig.append(t2 - t1)
    r, f = statistics.median(ref) / 1e3, statistics.median(fig) / 1e3
    print("one budget read (figures()): median %.1f µs; a plain loop over the %d parameters' .grad: %.1f µs; ratio %.1f"
          % (f, a.params, r, f / r))


if __name__ == "__main__":
    main()
