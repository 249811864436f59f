"""One training job of four kinds, timed step by step, for the end-to-end
overhead benchmark (bench/perf/overhead.sh).

    python3 overhead_job.py --job transformer|short|launch|loader --seconds 8 --log steps.jsonl [--watch]
        [--no-probe] [--step-sample-ms MS] [--device cpu]

transformer: a compute-bound decoder step (about 100 ms on an H100).
short:       an MLP step of about 5 ms on an H100, where per-step probe work
             shows; its time is the GPU's (a step of 2 ms is set by the
             host's launch jitter, ±4 % a round, too much to resolve 1 %).
launch:      the same MLP at batch 512 (about 2 ms): the host's time to launch
             the step, where per-step work weighs most and the jitter is
             about ±4 % a round.
loader:      a DataLoader with CPU work per sample feeding a small model, so
             the step waits on the loader's workers, not the GPU.

Every step ends with loss.item() (the host waits for the GPU, as most loops
do when they log a loss), calls memrec.step() (a no-op without memrec) and
writes its wall time and when it ended (t_ns, for nvml_phases.sh); the
first --warmup seconds are marked so the summary leaves them out.
"""
import argparse
import json
import os
import signal
import sys
import time

import torch
import torch.nn as nn


class NoProbe:
    """memrec's calls as no-ops: the job under memrec record with the
    recorder alone (NVML), no probe in its process."""

    def __getattr__(self, name):
        return lambda *a, **k: None


def probe(a):
    """memrec, or NoProbe for --no-probe; --step-sample-ms spaces the
    probe's allocator samples (MEMREC_STEP_SAMPLE_MS), to tell their cost
    from the rest of the probe's."""
    if a.no_probe:
        return NoProbe()
    if a.step_sample_ms:
        os.environ["MEMREC_STEP_SAMPLE_MS"] = str(a.step_sample_ms)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import memrec
    return memrec


def transformer(dev):
    layer = nn.TransformerEncoderLayer(d_model=2048, nhead=16, dim_feedforward=8192, batch_first=True, norm_first=True)
    net = nn.TransformerEncoder(layer, num_layers=12).to(dev, torch.bfloat16)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    x = torch.randn(8, 1024, 2048, device=dev, dtype=torch.bfloat16)

    def step(_batch):
        opt.zero_grad(set_to_none=True)
        loss = net(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    return net, opt, step, None


def short(dev, batch=2048):
    net = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 10)).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 1024, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    lossf = nn.CrossEntropyLoss()

    def step(_batch):
        opt.zero_grad(set_to_none=True)
        loss = lossf(net(x), y)
        loss.backward()
        opt.step()
        return loss

    return net, opt, step, None


def launch(dev):
    return short(dev, 512)


class Images(torch.utils.data.Dataset):
    """Decoding stands in as a few CPU matrix products per sample."""

    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        a = torch.randn(96, 96, generator=g)
        for _ in range(6):
            a = torch.tanh(a @ a.T / 96)
        return torch.randn(3, 64, 64, generator=g) + a.mean(), i % 10


def loader(dev):
    torch.set_num_threads(1)
    net = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    lossf = nn.CrossEntropyLoss()
    dl = torch.utils.data.DataLoader(Images(), batch_size=64, num_workers=4, persistent_workers=True, prefetch_factor=2)

    def step(batch):
        x, y = batch
        opt.zero_grad(set_to_none=True)
        loss = lossf(net(x.to(dev, non_blocking=True)), y.to(dev, non_blocking=True))
        loss.backward()
        opt.step()
        return loss

    return net, opt, step, dl


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--job", choices=["transformer", "short", "launch", "loader"], required=True)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--watch", action="store_true", help="memrec.watch(model, optimizer): the step budget")
    ap.add_argument("--log", required=True)
    ap.add_argument("--no-probe", action="store_true", help="do not import memrec: under memrec record, the recorder alone")
    ap.add_argument("--step-sample-ms", type=float, default=0, help="MEMREC_STEP_SAMPLE_MS for the probe")
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of the scripts without a GPU")
    a = ap.parse_args()
    # nvml_phases.sh stops the job with SIGTERM: exit as from the loop's end,
    # the log's buffer written.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    memrec = probe(a)
    dev = torch.device(a.device)
    net, opt, step, dl = {"transformer": transformer, "short": short, "launch": launch, "loader": loader}[a.job](dev)
    if a.watch:
        memrec.watch(net, opt)
    batches = iter(dl) if dl is not None else None
    out = open(a.log, "w")
    out.write(json.dumps({"ready_ns": time.time_ns()}) + "\n")
    memrec.epoch_start(0)
    t0 = time.perf_counter()
    i = 0
    while True:
        s = time.perf_counter()
        batch = next(batches) if batches is not None else None
        step(batch).item()
        memrec.step(i)
        e = time.perf_counter()
        out.write(json.dumps({"step": i, "s": e - s, "warm": e - t0 < a.warmup, "t_ns": time.time_ns()}) + "\n")
        i += 1
        if e - t0 > a.warmup + a.seconds:
            break
    memrec.epoch_end(0)
    out.write(json.dumps({"steps": i, "end_ns": time.time_ns()}) + "\n")
    out.close()


if __name__ == "__main__":
    main()
