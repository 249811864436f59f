"""Workloads of bench/validation/budget_check.sh: models built from code on random
data (a ResNet-style CNN in float32, a GPT-style transformer with tied
embeddings, a ViT, and an LSTM language model), trained with AdamW, as a baseline under memrec.watch and
with each remedy memrec advises, run for real.

    python3 budget_job.py baseline --model cnn --out cnn-baseline.json   # under memrec record
    python3 budget_job.py remedies --model cnn --out cnn-remedies.json   # accum2, bf16, ckpt, sgd
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 budget_job.py expandable --model cnn --out ...
    python3 budget_job.py cost --out cost.json                           # under memrec record

Every run writes the peaks torch itself measured: the highest step peak of
allocated memory (each step's, read before memrec.step resets it or reset by
the script) and the highest reserved. The baseline also writes the script's
own count of parameter, gradient, optimizer-state and buffer bytes, each
storage once, as memrec.watch should find them.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import memrec  # noqa: E402

DEV = "cuda"


# ---- models -------------------------------------------------------------

class Ckpt(nn.Module):
    """Runs its blocks one by one, each checkpointed when asked."""

    def __init__(self, blocks, ckpt):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.ckpt = ckpt

    def forward(self, x):
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=False) if self.ckpt and self.training else b(x)
        return x


class ResBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.skip = None
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + (x if self.skip is None else self.skip(x)))


class CNN(nn.Module):
    """ResNet-18's layout: a stem, four stages of two residual blocks."""

    def __init__(self, ckpt=False, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [ResBlock(cin, cout, stride), ResBlock(cout, cout, 1)]
            cin = cout
        self.body = Ckpt(blocks, ckpt)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.body(self.stem(x)), 1), 1))


class TBlock(nn.Module):
    def __init__(self, d, heads, causal):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads, self.causal = heads, causal

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.n2(x))))


class GPT(nn.Module):
    """A GPT-2-style decoder; the output head is the embedding (tied)."""

    def __init__(self, ckpt=False, vocab=16384, d=768, layers=8, heads=12, seq=512):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.zeros(seq, d))
        self.body = Ckpt([TBlock(d, heads, True) for _ in range(layers)], ckpt)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx):
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        return self.head(self.norm(self.body(x)))


class ViT(nn.Module):
    """ViT-S/16 at 224 px: 196 patches and a class token, 12 blocks of 384."""

    def __init__(self, ckpt=False, d=384, layers=12, heads=6, classes=1000):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 16, 16)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.zeros(1, 197, d))
        self.body = Ckpt([TBlock(d, heads, False) for _ in range(layers)], ckpt)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.norm(self.body(x))[:, 0])


class LSTMBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.rnn = nn.LSTM(d, d, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


class LSTMLM(nn.Module):
    """A language model of two LSTM layers of 1 024 units over 16 384 tokens,
    256 at a time: cuDNN's recurrent kernels, their workspace and reserve
    space, none of the three models' attention or convolutions."""

    def __init__(self, ckpt=False, vocab=16384, d=1024, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.body = Ckpt([LSTMBlock(d) for _ in range(layers)], ckpt)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        return self.head(self.body(self.tok(idx)))


MODELS = {"cnn": (CNN, 128), "gpt": (GPT, 16), "vit": (ViT, 96), "lstm": (LSTMLM, 64)}  # model, batch
SEQ = {"gpt": 512, "lstm": 256}  # tokens of the language models


def batch_of(name, n):
    if name in SEQ:
        x = torch.randint(0, 16384, (n, SEQ[name]), device=DEV)
        return x, torch.randint(0, 16384, (n, SEQ[name]), device=DEV)
    size = 128 if name == "cnn" else 224
    return torch.randn(n, 3, size, size, device=DEV), torch.randint(0, 1000, (n,), device=DEV)


def loss_of(name, out, y):
    if name in SEQ:
        return F.cross_entropy(out.view(-1, out.shape[-1]), y.view(-1))
    return F.cross_entropy(out, y)


# ---- a run --------------------------------------------------------------

def train(name, remedy, steps, watch):
    """Trains one model for steps steps with one remedy ("baseline", "accum2",
    "bf16", "ckpt", "sgd", "expandable") and returns torch's own peaks."""
    cls, batch = MODELS[name]
    torch.manual_seed(0)
    model = cls(ckpt=remedy == "ckpt").to(DEV)
    if remedy == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if watch:
        memrec.watch(model, opt)
    micro = 2 if remedy == "accum2" else 1
    data = [batch_of(name, batch // micro) for _ in range(micro)]
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    peaks, reserved = [], 0
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        for x, y in data:
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=remedy == "bf16"):
                loss = loss_of(name, model(x), y) / micro
            loss.backward()
        opt.step()
        torch.cuda.synchronize()
        st = torch.cuda.memory_stats()
        peaks.append(int(st["allocated_bytes.all.peak"]))  # since the last reset: the probe's or ours
        reserved = max(reserved, int(st["reserved_bytes.all.current"]))
        if watch:
            memrec.step(i)
        else:
            torch.cuda.reset_peak_memory_stats()
    out = {"model": name, "remedy": remedy, "batch": batch, "micro_batches": micro, "steps": steps,
           "peak_allocated": max(peaks), "peak_allocated_steady": max(peaks[2:]), "peak_reserved": reserved,
           "step_peaks": peaks}
    if watch:
        memrec.sample()  # the last budget, read with the counts below
        out["counts"] = direct_counts(model, opt)
    del model, opt, data
    return out


def direct_counts(model, opt):
    """The script's own count: parameter, gradient, state and buffer bytes of
    this GPU, each storage once (tied weights once), and the plain sums."""
    seen = set()

    def storage_bytes(ts):
        n = 0
        for t in ts:
            if t is None or not t.is_cuda:
                continue
            s = t.untyped_storage()
            if s.data_ptr() in seen:
                continue
            seen.add(s.data_ptr())
            n += s.nbytes()
        return n

    params = list(model.parameters())
    state = [v for st in opt.state.values() for v in st.values() if torch.is_tensor(v)]
    c = {"params_bytes": storage_bytes(params), "grads_bytes": storage_bytes([p.grad for p in params]),
         "optimizer_bytes": storage_bytes(state), "buffers_bytes": storage_bytes(list(model.buffers())),
         "params": sum(p.numel() for p in params),
         "plain_params_bytes": sum(p.numel() * p.element_size() for p in params),
         "plain_grads_bytes": sum(p.grad.numel() * p.grad.element_size() for p in params if p.grad is not None),
         "plain_optimizer_bytes": sum(v.numel() * v.element_size() for v in state if v.is_cuda)}
    return c


# ---- the probe's cost -----------------------------------------------------

def cost(blocks=16, per=300):
    """What memrec.watch adds to a step of a CPU-bound job (a tiny MLP, about
    a millisecond a step): blocks of steps alternating without and with the
    watch, the median step time of each block, the difference of medians.
    Each block also says how many of its steps took an allocator sample and
    the median of the steps that did and did not; a last pair of blocks runs
    under cProfile, whose heaviest functions with and without the watch say
    where a difference comes from."""
    import cProfile
    import pstats
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(DEV)
    opt = torch.optim.AdamW(model.parameters())
    x, y = torch.randn(64, 256, device=DEV), torch.randint(0, 10, (64,), device=DEV)
    p = memrec._get()
    times = {False: [], True: []}
    detail = {False: [], True: []}
    # The watch's own time, measured where it is spent: its sums, read at
    # the steps that take an allocator sample (the probe's _budget), and its
    # part of each line the probe's thread writes, timed around each call;
    # steps counted with the watch on.
    spent = {"ns": 0, "calls": 0, "steps": 0}
    budget = p._budget

    def timed_budget():
        t0 = time.perf_counter_ns()
        try:
            return budget()
        finally:
            if p.watch is not None:
                spent["ns"] += time.perf_counter_ns() - t0
                spent["calls"] += 1

    p._budget = timed_budget

    def block(on, b, prof=None):
        if on:
            memrec.watch(model, opt)
            w = p.watch
            fields = w.fields

            def timed_fields(f):  # the budget's part of a line, written by the probe's thread
                t0 = time.perf_counter_ns()
                try:
                    return fields(f)
                finally:
                    spent["ns"] += time.perf_counter_ns() - t0

            w.fields = timed_fields
        else:
            p.watch = None
        ts, sampled = [], []
        for i in range(per):
            before = p.last_step_sample_ns
            if prof:
                prof.enable()
            t0 = time.perf_counter_ns()
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            opt.step()
            memrec.step(b * per + i)
            ts.append(time.perf_counter_ns() - t0)
            if prof:
                prof.disable()
            sampled.append(p.last_step_sample_ns != before)
            spent["steps"] += on
        memrec.flush()
        return ts[20:], sampled[20:]

    for b in range(blocks):
        on = b % 2 == 1
        ts, sampled = block(on, b)
        times[on].append(statistics.median(ts))
        s = [t for t, k in zip(ts, sampled) if k]
        u = [t for t, k in zip(ts, sampled) if not k]
        detail[on].append({"sampled_steps": len(s), "median_sampled_us": statistics.median(s) / 1e3 if s else None,
                           "median_unsampled_us": statistics.median(u) / 1e3 if u else None})
    profiles = {}
    for on in (False, True):
        prof = cProfile.Profile()
        block(on, blocks + on, prof)
        st = pstats.Stats(prof)
        rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:15]  # by own time
        profiles["with" if on else "without"] = [
            {"function": "%s:%d %s" % (k[0].split("/")[-1], k[1], k[2]), "calls": v[1], "own_ms": round(v[2] * 1e3, 2),
             "cum_ms": round(v[3] * 1e3, 2)} for k, v in rows]
    p._budget = budget
    off, on = statistics.median(times[False]), statistics.median(times[True])
    return {"step_us_without": off / 1e3, "step_us_with": on / 1e3, "watch_us_per_step": (on - off) / 1e3,
            "watch_own_us_per_step": spent["ns"] / 1e3 / max(1, spent["steps"]),
            "watch_own_us_per_read": spent["ns"] / 1e3 / max(1, spent["calls"]), "watch_reads": spent["calls"],
            "blocks": blocks, "steps_per_block": per, "budget_walks": p.watch.walks if p.watch else None,
            "blocks_without": detail[False], "blocks_with": detail[True], "profiles": profiles,
            "step_sample_ns": p.step_sample_ns, "sample_cost_ns": p.sample_cost_ns}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["baseline", "remedies", "expandable", "cost"])
    ap.add_argument("--model", choices=sorted(MODELS), default="cnn")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.what == "baseline":
        res = train(a.model, "baseline", a.steps, watch=True)
    elif a.what == "expandable":
        res = train(a.model, "expandable", a.steps, watch=False)
        res["alloc_conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    elif a.what == "remedies":
        res = {}
        for r in ("accum2", "bf16", "ckpt", "sgd"):
            torch.cuda.empty_cache()
            t0 = time.time()
            res[r] = train(a.model, r, a.steps, watch=False)
            res[r]["seconds"] = round(time.time() - t0, 2)
            torch.cuda.empty_cache()
    else:
        res = cost()
    memrec.flush()
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res if a.what != "remedies" else {k: v["peak_allocated"] for k, v in res.items()}))


if __name__ == "__main__":
    main()
