"""A small real training job for memrec: ResNet-18 on random images.

    memrec record --procs -- python examples/train.py --epochs 2

It marks epochs, steps and events with memrec's probe (python/memrec), and
writes what it measures itself (its pid, torch.cuda.memory_allocated() at every
step end, step times) to --log, so a test can check memrec's record against the
job's own view.

--rest N sleeps N seconds with the GPU memory at rest at the start, between
epochs and at the end (marked "rest_start"/"rest_end"); --leak keeps each
step's logits on the GPU; --seconds stops after that long.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn


try:
    import memrec
except ImportError:  # not pip-installed: use the copy beside this example
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import memrec


def model():
    try:
        import torchvision

        return torchvision.models.resnet18(num_classes=1000)
    except ImportError:
        return nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 1000))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=50, help="steps per epoch")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rest", type=float, default=0)
    ap.add_argument("--leak", action="store_true")
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--log", default="")
    ap.add_argument("--no-probe", dest="probe", action="store_false", help="do not call memrec.step")
    a = ap.parse_args()

    log = open(a.log, "w") if a.log else None

    def note(**kv):
        if log:
            log.write(json.dumps({"t_ns": time.time_ns(), **kv}) + "\n")
            log.flush()

    def rest(why):
        if a.rest > 0:
            torch.cuda.synchronize()
            memrec.mark("rest_start " + why)
            memrec.flush()
            time.sleep(a.rest)
            memrec.mark("rest_end " + why)

    note(pid=os.getpid())
    dev = torch.device("cuda")
    net = model().to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(a.batch, 3, 224, 224, device=dev)
    y = torch.randint(0, 1000, (a.batch,), device=dev)
    kept = []
    rest("start")
    start = time.time()
    step = 0
    for epoch in range(a.epochs):
        memrec.epoch_start(epoch)
        for _ in range(a.steps):
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            out = net(x)
            loss = loss_fn(out, y)
            loss.backward()
            opt.step()
            if a.leak:
                kept.append(out.detach())
            torch.cuda.synchronize()
            allocated = torch.cuda.memory_allocated(dev)
            if a.probe:
                memrec.step(step)
            note(step=step, allocated=allocated, seconds=time.perf_counter() - t0)
            step += 1
            if a.seconds and time.time() - start > a.seconds:
                break
        memrec.epoch_end(epoch)
        if epoch == 0:
            memrec.mark("checkpoint saved")
        rest(f"after epoch {epoch}")
        if a.seconds and time.time() - start > a.seconds:
            break
    note(done=True, steps=step)
    memrec.flush()


if __name__ == "__main__":
    main()
