"""A training script that prints its own peaks, as users' scripts do: run
with and without memrec (bench/validation/peak_untouched.sh), every figure it
prints must agree. One GPU, a few seconds.

It allocates a large transient first, then trains a small MLP for STEPS
steps whose own peaks are smaller, calling memrec.step() at each when memrec
is importable (under `memrec record --torch`); then it resets its peaks
itself and trains a few more steps, as Hugging Face's memory tracker does
between stages. It prints one JSON line:

  max_allocated, max_reserved        torch.cuda.max_memory_{allocated,reserved}()
  stats_peak                         memory_stats()["allocated_bytes.all.peak"]
  accelerator_peak                   torch.accelerator.max_memory_allocated() (torch >= 2.9, else null)
  after_reset                        max_memory_allocated() after its own reset and 20 more steps
  counters_peak                      the allocator's counter as the probe left it (memrec only, else null)
  probe                              whether memrec's probe was recording

  python3 bench/validation/peak_untouched.py [STEPS]
"""
import json
import sys

import torch

try:
    import memrec
except ImportError:
    memrec = None


def step(i):
    if memrec is not None:
        memrec.step(i)


def train(model, opt, steps, first):
    for i in range(first, first + steps):
        x = torch.randn(256, 1024, device="cuda")
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        step(i)


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    torch.manual_seed(0)
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).to(dev)
    opt = torch.optim.AdamW(model.parameters())
    big = torch.empty(2 << 30, dtype=torch.uint8, device=dev)  # 2 GiB, far above any step's peak
    del big
    train(model, opt, steps, 0)
    out = {
        "max_allocated": torch.cuda.max_memory_allocated(dev),
        "max_reserved": torch.cuda.max_memory_reserved(dev),
        "stats_peak": torch.cuda.memory_stats(dev)["allocated_bytes.all.peak"],
        "accelerator_peak": None,
        "counters_peak": None,
        "probe": bool(memrec is not None and memrec.enabled()),
    }
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "max_memory_allocated"):
        out["accelerator_peak"] = acc.max_memory_allocated(0)
    if out["probe"]:
        try:
            from memrec import _peaks

            out["counters_peak"] = _peaks.view(torch._C).read(0)["allocated_bytes"]["all"]["peak"]
        except ImportError:  # a probe without the job's view of its peaks
            pass
    torch.cuda.reset_peak_memory_stats(dev)
    train(model, opt, 20, steps)
    out["after_reset"] = torch.cuda.max_memory_allocated(dev)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
