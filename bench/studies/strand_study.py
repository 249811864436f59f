"""What the caching allocator holds beyond the live tensors, step by step, for
one of fitmodels.MODELS at one batch: the data behind the largest-batch
allowance (docs/analysis.md, "The allowance").

Runs --steps steps. After each it logs torch's per-step peaks (allocated,
active, inactive split, reserved; reset after each step). For step --trace
it records the allocator's history (no stack traces) and replays it: at
every event the bytes of the segments that hold a live block ("pinned",
what the allocator cannot give back when it frees its cache), the most of
that over the step, and the live bytes at that moment. One JSON line per
step to --log. Exit 0 if all steps ran, 3 on CUDA OOM.
"""
import argparse, bisect, json, os, sys, time
import torch
# The models are the validation workloads' (bench/validation/fitmodels.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "validation"))
import fitmodels

ap = argparse.ArgumentParser()
ap.add_argument("--model", default="resnet18")
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--steps", type=int, default=3)
ap.add_argument("--trace", type=int, default=1, help="the step whose allocator history is replayed")
ap.add_argument("--log", default="")
ap.add_argument("--dump", default="", help="write the traced step's segments at its start and its events (gzip JSON)")
a = ap.parse_args()
log = open(a.log, "a") if a.log else sys.stdout


def note(**kv):
    log.write(json.dumps({"model": a.model, "batch": a.batch, **kv}) + "\n")
    log.flush()


def peaks(dev):
    s = torch.cuda.memory_stats(dev)
    out = {}
    for k in ("allocated_bytes", "active_bytes", "inactive_split_bytes", "reserved_bytes", "requested_bytes"):
        out[k + "_peak"] = int(s.get(k + ".all.peak", 0))
        out[k] = int(s.get(k + ".all.current", 0))
    out["segments"] = int(s.get("segment.all.current", 0))
    out["retries"] = int(s.get("num_alloc_retries", 0))
    return out


class Replay:
    """Segments by address, each with its live bytes; pinned = bytes of the
    segments with any live block."""

    def __init__(self, segments):
        self.starts, self.segs = [], {}
        self.live = self.pinned = 0
        for g in segments:
            used = sum(b["size"] for b in g["blocks"] if b["state"] in ("active_allocated", "active_pending_free"))
            self.add(g["address"], g["total_size"], used)
        self.best = (self.pinned, self.live)
        self.top_live = (self.live, self.pinned)

    def add(self, addr, size, used=0):
        bisect.insort(self.starts, addr)
        self.segs[addr] = [size, used]
        self.live += used
        if used:
            self.pinned += size

    def seg_of(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        if i < 0:
            return None
        s = self.starts[i]
        return s if addr < s + self.segs[s][0] else None

    def change(self, addr, delta):
        s = self.seg_of(addr)
        if s is None:
            return
        g = self.segs[s]
        was = g[1] > 0
        g[1] += delta
        self.live += delta
        now = g[1] > 0
        if now and not was:
            self.pinned += g[0]
        elif was and not now:
            self.pinned -= g[0]
        if self.pinned > self.best[0]:
            self.best = (self.pinned, self.live)
        if self.live > self.top_live[0]:
            self.top_live = (self.live, self.pinned)

    def event(self, e):
        act, addr, size = e["action"], e["addr"], e["size"]
        if act == "segment_alloc":
            self.add(addr, size)
        elif act == "segment_free":
            if addr in self.segs:
                g = self.segs.pop(addr)
                self.starts.remove(addr)
                if g[1]:
                    self.pinned -= g[0]
                    self.live -= g[1]
        elif act == "alloc":
            self.change(addr, size)
        elif act == "free_completed":
            self.change(addr, -size)


dev = torch.device("cuda")
free0, total = torch.cuda.mem_get_info(dev)
net, make_opt, amp, make_batch, loss_of = fitmodels.build(a.model)
net = net.to(dev)
opt = make_opt(net.parameters())
batch = make_batch(a.batch, dev)


def step():
    if amp is not None:
        with torch.autocast("cuda", dtype=amp):
            loss = loss_of(net, *batch)
    else:
        loss = loss_of(net, *batch)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


note(total=total, free_at_start=free0)
s = 0
try:
    for s in range(a.steps):
        torch.cuda.reset_peak_memory_stats(dev)
        traced = s == a.trace
        if traced:
            torch.cuda.memory._record_memory_history(context=None, max_entries=10_000_000)
            start = torch.cuda.memory._snapshot()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        row = {"step": s, "seconds": time.perf_counter() - t0, **peaks(dev)}
        if traced:
            end = torch.cuda.memory._snapshot()
            torch.cuda.memory._record_memory_history(enabled=None)
            r = Replay(start["segments"])
            events = [e for tr in end.get("device_traces", []) for e in tr]
            n0 = sum(len(tr) for tr in start.get("device_traces", []))
            for e in events[n0:]:
                r.event(e)
            if a.dump:
                import gzip
                segs = [{"address": g["address"], "total_size": g["total_size"], "stream": g.get("stream", 0),
                         "pool": g.get("segment_type", ""),
                         "blocks": [[b["size"], b["state"]] for b in g["blocks"]]} for g in start["segments"]]
                evs = [[e["action"], e["addr"], e["size"], e.get("stream", 0)] for e in events[n0:]]
                with gzip.open(a.dump, "wt") as f:
                    json.dump({"model": a.model, "batch": a.batch, "total": total, "free_at_start": free0,
                               "segments": segs, "events": evs}, f)
            sizes = sorted((g["total_size"] for g in end["segments"]), reverse=True)
            row.update(pinned_max=r.best[0], live_at_pinned_max=r.best[1], live_max=r.top_live[0],
                       pinned_at_live_max=r.top_live[1], events=len(events) - n0, largest_segments=sizes[:4],
                       largest_free_room=max([g["total_size"] for g in end["segments"] if g["allocated_size"] < g["total_size"]] or [0]))
        note(**row)
except (torch.cuda.OutOfMemoryError, RuntimeError) as e:
    if not isinstance(e, torch.cuda.OutOfMemoryError) and "ALLOC_FAILED" not in str(e) and "out of memory" not in str(e):
        raise
    note(oom=str(e).splitlines()[0], step=s, **peaks(dev))
    sys.exit(3)
note(done=True)
