"""A small DDP training job for the multi-node check (bench/validation/h200_multinode.sh).

Run under torchrun, one process per node. Each step it logs PyTorch's own
allocator readings for its rank (allocated, reserved, peak allocated since the
previous step) and then calls memrec.step, which sends the same readings to the
recorder; bench/validation/check_multinode.py compares the two. Rank 1 keeps 8 MiB more per
step (a leak), so the merged run has one leaking GPU and an imbalance.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import memrec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=240)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--readings", dest="log", required=True)  # not --log: torchrun would take it for an abbreviation of its own --log-dir
    ap.add_argument("--backend", default=os.environ.get("DDP_BACKEND", "nccl"))
    a = ap.parse_args()
    dist.init_process_group(a.backend)
    rank = dist.get_rank()
    torch.cuda.set_device(0)  # each node sees its one GPU as cuda:0
    dev = torch.device("cuda", 0)
    model = nn.Sequential(nn.Linear(2048, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1024)).to(dev)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[0])
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-4)
    kept = []
    per_epoch = a.steps // a.epochs
    step = 0
    with open(a.log, "w") as log:
        log.write(json.dumps({"rank": rank, "pid": os.getpid(), "world": dist.get_world_size()}) + "\n")
        for e in range(a.epochs):
            with memrec.epoch(e):
                for _ in range(per_epoch):
                    x = torch.randn(512, 2048, device=dev)
                    loss = ddp(x).square().mean()
                    loss.backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    if rank == 1:
                        kept.append(torch.empty(8 << 20, dtype=torch.uint8, device=dev))
                    torch.cuda.synchronize()
                    time.sleep(0.01)  # steps well apart: each gets its own probe sample
                    rec = {"rank": rank, "step": step, "allocated": torch.cuda.memory_allocated(dev),
                           "reserved": torch.cuda.memory_reserved(dev), "peak": torch.cuda.max_memory_allocated(dev)}
                    memrec.step(step)
                    log.write(json.dumps(rec) + "\n")
                    step += 1
    memrec.flush()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
