"""One training job for batch-fit data: one of fitmodels.MODELS (resnet18 or resnet50 in
fp32 with SGD, vit_b_16, gpt2 or lm_long with bf16 autocast and AdamW).
--steps N steps at --batch B. Exit 0 if all steps ran, 3 on CUDA OOM.
Logs own readings (max_memory_allocated per step, allocated, reserved) as JSON lines to --log.
Under torchrun (WORLD_SIZE > 1) it trains with DistributedDataParallel, --batch per rank,
rank r on GPU LOCAL_RANK modulo the GPUs it sees (several ranks may share one), over
DDP_BACKEND (gloo by default: NCCL refuses two ranks on one GPU).
"""
import argparse, json, os, sys, time
import torch, torch.nn as nn
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
try:
    import memrec
except Exception:
    memrec = None

ap = argparse.ArgumentParser()
ap.add_argument("--model", default="resnet18")
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--epochs", type=int, default=1)
ap.add_argument("--log", default="")
ap.add_argument("--probe", action="store_true")
ap.add_argument("--snap", action="store_true", help="after the steps, log the allocator's segments (largest, count)")
ap.add_argument("--trace", default="", help="record the allocator's history from the start and write it (gzip JSON) here at the end")
a = ap.parse_args()
log = open(a.log, "a") if a.log else None
def note(**kv):
    if log:
        log.write(json.dumps({"t_ns": time.time_ns(), "model": a.model, "batch": a.batch, **kv}) + "\n"); log.flush()
dev = torch.device("cuda")
if a.trace:
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=5_000_000)
def dump_trace(outcome):
    # the allocator's events in order: action, address, size (an alloc's is the request)
    if not a.trace:
        return
    import gzip
    snap = torch.cuda.memory._snapshot()
    ev = [[e["action"], e.get("addr", 0), e.get("size", 0)] for e in snap["device_traces"][dev.index or 0]]
    free, total = torch.cuda.mem_get_info(dev)
    with gzip.open(a.trace, "wt") as f:
        json.dump({"model": a.model, "batch": a.batch, "outcome": outcome, "steps": s, "events": ev,
                   "total": total, "free": free, "reserved": torch.cuda.memory_reserved(dev),
                   "max_reserved": torch.cuda.max_memory_reserved(dev),
                   "stats": {k: v for k, v in torch.cuda.memory_stats(dev).items() if k.endswith(".all.peak") or k.startswith("num_")}}, f)
world = int(os.environ.get("WORLD_SIZE", "1"))
if world > 1:
    import torch.distributed as dist
    dist.init_process_group(os.environ.get("DDP_BACKEND", "gloo"))
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
torch.backends.cudnn.benchmark = False
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fitmodels
net, make_opt, amp, make_batch, loss_of = fitmodels.build(a.model)
net = net.to(dev)
if world > 1:
    net = nn.parallel.DistributedDataParallel(net, device_ids=[dev.index])
opt = make_opt(net.parameters())
batch = make_batch(a.batch, dev)
def fwd():
    return loss_of(net, *batch)
# fp16 autocast needs its loss scaled (bf16 does not)
scaler = torch.amp.GradScaler("cuda") if amp == torch.float16 else None
def step():
    if amp is not None:
        with torch.autocast("cuda", dtype=amp):
            loss = fwd()
    else:
        loss = fwd()
    if scaler is not None:
        scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
    else:
        loss.backward(); opt.step()
    opt.zero_grad(set_to_none=True)
note(pid=os.getpid())
s = 0
try:
    for ep in range(a.epochs):
        if a.probe and memrec: memrec.epoch_start(ep)
        for i in range(a.steps):
            torch.cuda.reset_peak_memory_stats(dev)
            t0 = time.perf_counter()
            step(); torch.cuda.synchronize()
            if a.probe and memrec: memrec.step(s)
            note(step=s, seconds=time.perf_counter()-t0, peak=torch.cuda.max_memory_allocated(dev),
                 allocated=torch.cuda.memory_allocated(dev), reserved=torch.cuda.memory_reserved(dev),
                 free_total=list(torch.cuda.mem_get_info(dev)))
            s += 1
        if a.probe and memrec: memrec.epoch_end(ep)
except (torch.cuda.OutOfMemoryError, RuntimeError) as e:
    # cuBLAS reports its own allocation failures as a RuntimeError
    if not isinstance(e, torch.cuda.OutOfMemoryError) and "ALLOC_FAILED" not in str(e) and "out of memory" not in str(e):
        raise
    note(oom=str(e).splitlines()[0], step=s)
    if a.probe and memrec: memrec.report_oom(e); memrec.flush()
    dump_trace("oom")
    print("OOM at batch", a.batch, "step", s, "-", str(e).splitlines()[0][:200], file=sys.stderr)
    sys.exit(3)
note(done=True, steps=s)
dump_trace("ran")
if a.snap:
    t0 = time.perf_counter()
    segs = torch.cuda.memory_snapshot()
    snap_s = time.perf_counter() - t0
    segs = sorted(segs, key=lambda g: -g["total_size"])
    # the largest segments: size, blocks in it, bytes of them in use
    note(segments=len(segs), largest=[(g["total_size"], len(g["blocks"]),
                                       sum(b["size"] for b in g["blocks"] if b["state"] == "active_allocated"))
                                      for g in segs[:6]],
         reserved=torch.cuda.memory_reserved(dev), max_allocated=torch.cuda.max_memory_allocated(dev),
         snapshot_seconds=snap_s, blocks=sum(len(g["blocks"]) for g in segs))
if a.probe and memrec: memrec.flush()
