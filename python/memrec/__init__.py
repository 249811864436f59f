"""memrec's probe for PyTorch training jobs.

Under ``memrec record`` (which sets MEMREC_SOCKET) the probe sends marks and
PyTorch caching-allocator statistics to the recorder; anywhere else every call
is a cheap no-op. Standard library only; torch is never imported by the probe,
only used once the training script has imported it and initialised CUDA.

    import memrec

    for epoch in range(epochs):
        with memrec.epoch(epoch):
            for i, batch in enumerate(loader):
                train_step(batch)
                memrec.step(i)
        memrec.mark("checkpoint saved")

Nothing here raises into the training code.
"""

import atexit
import contextlib
from typing import Iterator
import os
import sys
import threading
import time

from . import _budget, _probe, _sites

__all__ = ["epoch", "epoch_start", "epoch_end", "step", "mark", "sample", "flush", "enabled", "stats",
           "sites", "snapshot", "track", "report_oom", "watch", "__version__"]

__version__ = "0.1.0"

_lock = threading.Lock()
_instance = None


def _forked():
    """A forked child starts without a probe (its parent's threads are gone)
    and makes its own at its first call."""
    global _instance
    _instance = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def _flush_at_exit():
    """Sends what is still queued when the interpreter exits: the sender is
    a daemon thread, and the marks of the last tenth of a second (a whole
    short script's) would die with it."""
    p = _instance
    try:
        if p is not None and p.pid == os.getpid() and p.enabled:
            p.note_no_allocator(at_exit=True)
            p.flush(2.0)
    except Exception:
        pass


atexit.register(_flush_at_exit)


def _get():
    p = _instance
    if p is not None:
        return p
    return _make()


def _make():
    global _instance
    with _lock:  # first use, or a forked child: a probe of its own
        if _instance is None or _instance.pid != os.getpid():
            try:
                _instance = _probe.Probe()
            except Exception:  # never raise into the training code: run without a recorder
                _instance = _probe.Probe(path="")
            if _instance.enabled and _instance.sites.on:  # MEMREC_SITES=1
                _at_exit(_instance)
            if _instance.enabled and _instance.alloc_trace.state in ("armed", "on"):  # MEMREC_ALLOC_TRACE=1
                import atexit

                atexit.register(_instance.trace_at_exit)
        return _instance


def enabled() -> bool:
    """True while a recorder is listening."""
    return _get().enabled


def step(i: "int | None" = None) -> None:
    """Marks the end of step i and sends one allocator sample per CUDA device
    in use, with the peak allocated since the previous sample (then reset).
    Short steps share one sample, spaced by the sample's own cost; a step
    of 10 ms or more has its own (MEMREC_STEP_SAMPLE_MS fixes the spacing).
    The job's own torch.cuda.max_memory_allocated() and memory_stats()
    still read its peaks since its own last reset (memrec/_peaks.py)."""
    p = _get()
    if not p.enabled:
        return
    try:
        p.step(i)
    except Exception:
        pass


def watch(model: object, optimizer: object = None) -> None:
    """From now on every allocator sample also says what the model's own
    tensors hold on each GPU: parameters, gradients, optimizer state (every
    tensor in ``optimizer.state``) and buffers, each storage counted once, on
    that GPU only (a sharded parameter counts its local shard). memrec then
    splits the peak into these and activations, and says what would help.
    Call it once the model is on its GPU; call it again to watch another
    model. The Lightning and Hugging Face callbacks call it for you.

        model = Net().cuda()
        opt = torch.optim.AdamW(model.parameters())
        memrec.watch(model, opt)
    """
    p = _get()
    if not p.enabled:
        return
    try:
        old = p.watch
        if old is not None and old.model() is model and old.optimizer() is optimizer:
            return
        p.watch = _budget.Watch(model, optimizer)
    except Exception:
        pass


def epoch_start(n: int) -> None:
    """Marks the start of epoch n, with one allocator sample per CUDA device
    in use at the same moment."""
    p = _get()
    if p.enabled:
        try:
            w = p.watch
            if w is not None:  # modules may have changed between epochs
                w.refresh(force=True)
                w.arm_autocast()
            p.mark_with_sample("epoch_start", epoch=n)
            p.sites.epoch_start()
        except Exception:
            pass


def epoch_end(n: int) -> None:
    """Marks the end of epoch n, with one allocator sample per CUDA device
    in use at the same moment and, with sites on, a summary of the
    allocation sites."""
    p = _get()
    if p.enabled:
        try:
            p.mark_with_sample("epoch_end", epoch=n)
            if p.sites.armed:
                p.sites.send(sys.modules.get("torch"), "epoch_end", epoch=n)
        except Exception:
            pass


@contextlib.contextmanager
def epoch(n: int) -> "Iterator[None]":
    """Marks the start and end of epoch n. A CUDA out-of-memory error raised
    inside is reported (where torch has no OOM observer) and re-raised."""
    epoch_start(n)
    try:
        yield
    except BaseException as e:
        report_oom(e)
        raise
    finally:
        epoch_end(n)


def report_oom(exc: BaseException) -> None:
    """Reports exc if it is a CUDA out-of-memory error that torch's OOM
    observer did not report (older torch): for framework callbacks that see
    the exception. Anything else is ignored."""
    p = _get()
    if p.enabled:
        try:
            p.exception_oom(exc)
        except Exception:
            pass


def mark(text: object, kind: str = "event") -> None:
    """An event mark: a checkpoint, an evaluation, a learning-rate change."""
    p = _get()
    if p.enabled:
        try:
            p.mark(kind, text=str(text))
        except Exception:
            pass


def sample() -> None:
    """Sends one allocator sample now (without resetting the peak)."""
    p = _get()
    if p.enabled:
        try:
            p.sample()
        except Exception:
            pass


def sites(on: bool = True) -> None:
    """Turns allocation sites on (or off): PyTorch's allocator keeps the
    Python stack of every live block, a short trace window opens in each
    epoch, and summaries per site are sent at epoch ends, at an OOM, at exit
    and on snapshot(). ``memrec record --sites`` (MEMREC_SITES=1) does the same
    without code."""
    p = _get()
    try:
        p.sites.enable(on)
        if on:
            _at_exit(p)
    except Exception:
        pass


def snapshot(name: "str | None" = None) -> None:
    """Sends a summary of the allocation sites now (sites must be on)."""
    p = _get()
    if p.enabled and p.sites.on:
        try:
            p._torch()  # turns the history on if CUDA started since
            if p.sites.armed:
                p.sites.send(sys.modules.get("torch"), "snapshot", name=name)
        except Exception:
            pass


class Track:
    """What memrec.track recorded: events, a list of (site, action, size)
    in the order they happened (action "alloc" or "free"), and summaries, the
    per-site figures of each device as dicts (the "sites" JSON line)."""

    def __init__(self, name):
        self.name = name
        self.events = []
        self.summaries = []
        self.available = False  # torch with CUDA was there to record
        self.note = ""  # why not, when torch is there without CUDA


@contextlib.contextmanager
def track(name: str = "track") -> "Iterator[Track]":
    """Records every allocation and free inside the block with its Python
    stack, and yields a Track whose events and summaries are filled when the
    block ends. Works in plain Python without memrec record (it needs torch
    with CUDA; without them the Track stays empty); under memrec record the
    summary is stored with the run. Never raises into the block.

        with memrec.track("forward") as t:
            out = model(x)
        for site, action, size in t.events: ...
    """
    tr = Track(name)
    torch = sys.modules.get("torch")
    p = _get()
    since = 0
    try:
        if torch is not None and torch.cuda.is_available():
            since = time.time_ns() // 1000
            tr.available = _sites.history(torch, "all")
        elif torch is not None:
            tr.note = "torch %s without CUDA: no allocator view" % getattr(torch, "__version__", "?")
            p.note_no_allocator()
    except Exception:
        tr.available = False
    try:
        yield tr
    finally:
        if tr.available:
            try:
                _track_end(p, torch, tr, since)
            except Exception:
                pass
            try:
                mode = p.sites.mode
                _sites.history(torch, mode if mode else None)
                if mode == "all":  # a window was open: it restarts
                    p.sites.window_start_us = since
            except Exception:
                pass


def _track_end(p, torch, tr, since):
    import json

    snap = _sites.snapshot(torch)
    kinds = p.sites.kinds or _sites.Frames(os.path.dirname(os.path.abspath(torch.__file__)))
    traces = snap.get("device_traces") or []
    for d, trace in enumerate(traces):
        if not trace:
            continue
        owner = {}  # address -> the site that allocated it (a free's frames are where it was freed)
        for e in trace:
            action = e.get("action")
            if action not in ("alloc", "free_completed") or int(e.get("time_us", 0) or 0) < since:
                continue
            if action == "alloc":
                frames = e.get("frames") or ()
                i = _sites.site_of(frames, kinds)
                site = _sites.UNTRACKED if i < 0 else "%s:%d %s" % (
                    os.path.basename(frames[i].get("filename", "")), int(frames[i].get("line", 0) or 0), frames[i].get("name", ""))
                owner[e.get("addr")] = site
            else:
                site = owner.pop(e.get("addr"), _sites.UNTRACKED)
            tr.events.append((site, "alloc" if action == "alloc" else "free", int(e.get("size", 0) or 0)))
        s = _sites.Summary(p.watched_blocks() if p.enabled else None)
        s.add(snap, d, kinds, since)
        head = _sites.header(p, torch, d, "track", time.time_ns(), since, name=str(tr.name))
        line = s.message(head)
        tr.summaries.append(json.loads(line))
        if p.enabled:
            p.put_line(line)


_exit_hooked = []


def _at_exit(p):
    """A last summary at exit, once per process."""
    if _exit_hooked == [os.getpid()]:
        return
    _exit_hooked[:] = [os.getpid()]
    import atexit

    def last():
        try:
            q = _get()
            if q.enabled and q.sites.armed:
                q.sites.send(sys.modules.get("torch"), "exit")
                q.flush(2.0)
        except Exception:
            pass

    atexit.register(last)


def flush(timeout: float = 2.0) -> None:
    """Waits until everything queued is sent."""
    try:
        _get().flush(timeout)
    except Exception:
        pass


def stats() -> dict:
    """What the probe did: messages sent, dropped."""
    try:
        p = _get()
        return {"enabled": p.enabled, "sent": p.sent, "dropped": p.dropped_total, "queued": len(p.queue)}
    except Exception:
        return {"enabled": False, "sent": 0, "dropped": 0, "queued": 0}


def _autostart():
    """Called by the sitecustomize of ``memrec record --torch``: start the
    probe (its timer samples the allocator once the script uses CUDA) and
    report OOMs that end the script."""
    import atexit

    p = _get()
    if not p.enabled:
        return
    previous = sys.excepthook

    def hook(tp, value, tb):
        try:
            p.exception_oom(value)
        except Exception:
            pass
        previous(tp, value, tb)

    sys.excepthook = hook
    atexit.register(p.flush, 1.0)
    if p.sites.on:
        _at_exit(p)


# The allocator trace (MEMREC_ALLOC_TRACE) starts inside CUDA's
# initialisation: the probe is made at import, before the job uses CUDA.
if os.environ.get("MEMREC_SOCKET") and _probe._alloctrace.wanted():
    _get()

