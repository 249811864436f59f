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

import contextlib
import os
import threading

from . import _probe

__all__ = ["epoch", "epoch_start", "epoch_end", "step", "mark", "sample", "flush", "enabled", "stats"]

_lock = threading.Lock()
_instance = None


def _get():
    global _instance
    p = _instance
    if p is not None and p.pid == os.getpid():
        return p
    with _lock:  # first use, or a forked child: a probe of its own
        if _instance is None or _instance.pid != os.getpid():
            _instance = _probe.Probe()
        return _instance


def enabled():
    """True while a recorder is listening."""
    return _get().enabled


def step(i=None):
    """Marks the end of step i and sends one allocator sample per CUDA device
    in use, with the peak allocated since the previous sample (then reset).
    Steps less than 5 ms apart (MEMREC_STEP_SAMPLE_MS) share one sample."""
    p = _get()
    if not p.enabled:
        return
    try:
        p.step(i)
    except Exception:
        pass


def epoch_start(n):
    """Marks the start of epoch n, with one allocator sample per CUDA device
    in use at the same moment."""
    p = _get()
    if p.enabled:
        try:
            p.mark_with_sample("epoch_start", epoch=n)
        except Exception:
            pass


def epoch_end(n):
    """Marks the end of epoch n, with one allocator sample per CUDA device
    in use at the same moment."""
    p = _get()
    if p.enabled:
        try:
            p.mark_with_sample("epoch_end", epoch=n)
        except Exception:
            pass


@contextlib.contextmanager
def epoch(n):
    """Marks the start and end of epoch n. A CUDA out-of-memory error raised
    inside is reported (where torch has no OOM observer) and re-raised."""
    epoch_start(n)
    try:
        yield
    except BaseException as e:
        p = _get()
        if p.enabled:
            try:
                p.exception_oom(e)
            except Exception:
                pass
        raise
    finally:
        epoch_end(n)


def mark(text, kind="event"):
    """An event mark: a checkpoint, an evaluation, a learning-rate change."""
    p = _get()
    if p.enabled:
        try:
            p.mark(kind, text=str(text))
        except Exception:
            pass


def sample():
    """Sends one allocator sample now (without resetting the peak)."""
    p = _get()
    if p.enabled:
        try:
            p.sample()
        except Exception:
            pass


def flush(timeout=2.0):
    """Waits until everything queued is sent."""
    try:
        _get().flush(timeout)
    except Exception:
        pass


def stats():
    """What the probe did: messages sent, dropped."""
    p = _get()
    return {"enabled": p.enabled, "sent": p.sent, "dropped": p.dropped_total, "queued": len(p.queue)}


def _autostart():
    """Called by the sitecustomize of ``memrec record --torch``: start the
    probe (its timer samples the allocator once the script uses CUDA) and
    report OOMs that end the script."""
    import atexit
    import sys

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
