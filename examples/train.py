"""A small real training job for memrec: ResNet-18 on random images.

    memrec record --procs -- python examples/train.py --epochs 2

It marks epochs, steps and events through memrec's socket (MEMREC_SOCKET) when
it runs under `memrec record`, and writes what it measures itself (its pid, and
torch.cuda.memory_allocated() at every step end) to --log, so a test can check
memrec's record against the job's own view.

--rest N sleeps N seconds with the GPU memory at rest at the start, between
epochs and at the end (marked "rest_start"/"rest_end"); --leak keeps each
step's logits on the GPU; --seconds stops after that long.
"""
import argparse
import json
import os
import socket
import time

import torch
import torch.nn as nn


class Marks:
    """Sends marks to memrec's socket; a no-op without it."""

    def __init__(self):
        self.sock = None
        path = os.environ.get("MEMREC_SOCKET")
        if path:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(path)
            except OSError:
                self.sock = None

    def send(self, kind, **fields):
        if self.sock is None:
            return
        msg = {"type": "mark", "t_ns": time.time_ns(), "kind": kind, **fields}
        try:
            self.sock.sendall((json.dumps(msg) + "\n").encode())
        except OSError:
            self.sock = None


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
    a = ap.parse_args()

    marks = Marks()
    log = open(a.log, "w") if a.log else None

    def note(**kv):
        if log:
            log.write(json.dumps({"t_ns": time.time_ns(), **kv}) + "\n")
            log.flush()

    def rest(why):
        if a.rest > 0:
            torch.cuda.synchronize()
            marks.send("event", text="rest_start " + why)
            time.sleep(a.rest)
            marks.send("event", text="rest_end " + why)

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
        marks.send("epoch_start", epoch=epoch)
        for _ in range(a.steps):
            opt.zero_grad(set_to_none=True)
            out = net(x)
            loss = loss_fn(out, y)
            loss.backward()
            opt.step()
            if a.leak:
                kept.append(out.detach())
            torch.cuda.synchronize()
            note(step=step, allocated=torch.cuda.memory_allocated(dev))
            marks.send("step", step=step, rank=0)
            step += 1
            if a.seconds and time.time() - start > a.seconds:
                break
        marks.send("epoch_end", epoch=epoch)
        if epoch == 0:
            marks.send("event", text="checkpoint saved")
        rest(f"after epoch {epoch}")
        if a.seconds and time.time() - start > a.seconds:
            break
    note(done=True, steps=step)


if __name__ == "__main__":
    main()
