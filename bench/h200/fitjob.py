"""One training job for batch-fit data: resnet18 or resnet50 in fp32 (SGD), vit_b_16
with bf16 autocast (AdamW), or gpt2-small-like with bf16 autocast (AdamW).
--steps N steps at --batch B. Exit 0 if all steps ran, 3 on CUDA OOM.
Logs own readings (max_memory_allocated per step, allocated, reserved) as JSON lines to --log.
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
a = ap.parse_args()
log = open(a.log, "a") if a.log else None
def note(**kv):
    if log:
        log.write(json.dumps({"t_ns": time.time_ns(), "model": a.model, "batch": a.batch, **kv}) + "\n"); log.flush()
dev = torch.device("cuda")
torch.backends.cudnn.benchmark = False
amp = None
if a.model in ("resnet18", "resnet50", "vit_b_16"):
    import torchvision
    net = getattr(torchvision.models, a.model)(num_classes=1000).to(dev)
    if a.model == "vit_b_16":
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4); amp = torch.bfloat16
    else:
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(a.batch, 3, 224, 224, device=dev); y = torch.randint(0, 1000, (a.batch,), device=dev)
    lossf = nn.CrossEntropyLoss()
    def fwd():
        return lossf(net(x), y)
else:
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=512, vocab_size=50257)
    net = GPT2LMHeadModel(cfg).to(dev)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4); amp = torch.bfloat16
    ids = torch.randint(0, 50257, (a.batch, 512), device=dev)
    def fwd():
        return net(input_ids=ids, labels=ids).loss
def step():
    if amp is not None:
        with torch.autocast("cuda", dtype=amp):
            loss = fwd()
    else:
        loss = fwd()
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
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
    if a.probe and memrec: memrec.flush()
    print("OOM at batch", a.batch, "step", s, file=sys.stderr)
    sys.exit(3)
note(done=True, steps=s)
if a.probe and memrec: memrec.flush()
