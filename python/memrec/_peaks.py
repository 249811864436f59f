"""The job's own view of PyTorch's peak counters, kept while the probe resets them.

The probe's per-step peak comes from resetting the allocator's peak counters
at each of its samples. Left at that, the job's own
``torch.cuda.max_memory_allocated()`` would read the probe's last interval
instead of the job's. So at the probe's first reset the Python entry points
that every reader of a peak goes through are wrapped in ``torch._C``:

    _cuda_memoryStats(d), _accelerator_getDeviceStats(d)
        every "peak" in the answer is the largest the job would have seen
        since its own last reset: max(shadow, counter)
    _cuda_resetPeakMemoryStats(d), _accelerator_resetPeakStats(d)
        the job's reset: the counters reset, the shadow forgotten

The shadow of device d is the largest of each "peak" that the probe's own
resets took away, folded from the stats the probe read just before each of
them. The probe calls the originals (JobView.read, read_and_reset). The
wrappers go when the probe stops, once no shadow holds more than the
counters; until then a shadow still needed keeps them, until the job's own
reset or the counters pass it. The other way round, a reset by the job
between two probe samples would take its part of the step's peak from the
probe: the peaks the job's reset took are kept for the probe's next sample.
C++ callers of the allocator's stats, and
references taken to the originals before the probe's first reset, see the
counters as reset (docs/design.md, "The job's view of its peaks").
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

# The stats readers and the peak resets, each pair over the same counters.
STATS = ("_cuda_memoryStats", "_accelerator_getDeviceStats")
RESETS = ("_cuda_resetPeakMemoryStats", "_accelerator_resetPeakStats")

# Stats read before the probe's resets are folded into the shadow when the
# job reads, or when this many wait (the probe's step pays for an append).
FOLD_AT = 32

Path = Tuple[str, ...]


def peaks(stats: Any, path: Path = ()) -> Iterator[Tuple[Path, int]]:
    """Every "peak" in torch's nested stats dict, with the keys that lead
    to its dict ("allocated_bytes", "all")."""
    if not isinstance(stats, dict):
        return
    if "peak" in stats and not isinstance(stats["peak"], dict):
        try:
            yield path, int(stats["peak"])
        except (TypeError, ValueError):
            pass
        return
    for k, v in stats.items():
        if isinstance(v, dict):
            yield from peaks(v, path + (k,))


def _device(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[int]:
    """The device index of a call of the entry points (one positional int),
    None for any other shape (left to the original to judge)."""
    if len(args) == 1 and not kwargs and isinstance(args[0], int):
        return int(args[0])
    return None


class JobView:
    """The wrappers of one ``torch._C`` and the shadows behind them. Safe
    for concurrent use: one lock orders the probe's read-and-reset against
    the job's reads and resets, so no reader sees a counter reset whose
    peak is not in the shadow yet."""

    def __init__(self, C: Any) -> None:
        self.C = C
        self.lock = threading.Lock()
        self.orig: Dict[str, Callable[..., Any]] = {}  # the entry points as torch made them
        self.ours: Dict[str, Callable[..., Any]] = {}  # the wrappers in their place
        self.shadow: Dict[int, Dict[Path, int]] = {}
        self.pending: Dict[int, List[Any]] = {}  # stats read before a reset, not folded yet
        self.probes: Dict[int, Dict[Path, int]] = {}  # peaks the job's resets took from the probe's interval
        self.stopped = False

    # ---- the probe's side ------------------------------------------------

    def _original(self, name: str) -> Callable[..., Any]:
        f = self.orig.get(name)
        return f if f is not None else getattr(self.C, name)

    def read(self, d: int) -> Any:
        """The allocator's stats since the probe's last reset (the probe's
        read): the counters, with what a reset by the job took from them."""
        stats = self._original(STATS[0])(d)
        if self.probes:
            with self.lock:
                _raise(stats, self.probes.get(d))
        return stats

    def read_and_reset(self, d: int) -> Any:
        """The probe's sample with its peak, then the peak reset: the
        stats are kept for the job's shadow first. Once the probe stopped,
        the counters are left alone."""
        with self.lock:
            stats = self._original(STATS[0])(d)
            if self.stopped:
                return stats
            if not self.ours:
                self._install()
            p = self.pending.setdefault(d, [])
            p.append(stats)
            taken = self.probes.pop(d, None) if self.probes else None
            if len(p) >= FOLD_AT or taken:
                self._fold(d)  # before the probe's figures are raised in place
            self._original(RESETS[0])(d)
            _raise(stats, taken)
        return stats

    def start(self) -> None:
        """A probe uses this view (again, after a fork or a new probe)."""
        self.stopped = False

    def stop(self) -> None:
        """The probe stopped: the wrappers go now if no shadow is needed,
        else when the job's reset, or counters past it, leave none."""
        with self.lock:
            self.stopped = True
            self.probes.clear()
            for d in list(self.pending):
                self._fold(d)
            for d in list(self.shadow):
                try:
                    self._drop_if_passed(d, self._original(STATS[0])(d))
                except Exception:
                    pass
        self._remove_if_done()

    # ---- the job's side --------------------------------------------------

    def _install(self) -> None:
        """Wraps the entry points that this torch has (lock held)."""
        for names, make in ((STATS, self._stats_wrapper), (RESETS, self._reset_wrapper)):
            for name in names:
                f = getattr(self.C, name, None)
                if f is None or name in self.ours:
                    continue
                w = make(f)
                for attr in ("__name__", "__qualname__", "__doc__"):
                    try:
                        setattr(w, attr, getattr(f, attr))
                    except (AttributeError, TypeError):
                        pass
                self.orig[name] = f
                self.ours[name] = w
                setattr(self.C, name, w)

    def _stats_wrapper(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        def stats(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                out = orig(*args, **kwargs)
                d = _device(args, kwargs)
                if d is not None and (d in self.shadow or d in self.pending):
                    try:
                        self._fold(d)
                        if self.stopped:
                            self._drop_if_passed(d, out)  # before out is raised
                        self._apply(d, out)
                    except Exception:
                        pass  # the counters' answer, as without the probe
            if self.stopped:
                self._remove_if_done()
            return out
        return stats

    def _reset_wrapper(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        def reset(*args: Any, **kwargs: Any) -> Any:
            d = _device(args, kwargs)
            with self.lock:
                before = None
                if d is not None and not self.stopped:
                    try:
                        before = self._original(STATS[0])(d)
                    except Exception:
                        pass
                out = orig(*args, **kwargs)  # raises: the counters and the shadow stay
                if d is not None:
                    self.shadow.pop(d, None)
                    self.pending.pop(d, None)
                    if before is not None:
                        pr = self.probes.setdefault(d, {})
                        for path, v in peaks(before):
                            if v > pr.get(path, -1):
                                pr[path] = v
            if self.stopped:
                self._remove_if_done()
            return out
        return reset

    def _fold(self, d: int) -> None:
        """The pending stats of device d into its shadow (lock held)."""
        p = self.pending.pop(d, None)
        if not p:
            return
        sh = self.shadow.setdefault(d, {})
        for stats in p:
            for path, v in peaks(stats):
                if v > sh.get(path, -1):
                    sh[path] = v

    def _apply(self, d: int, out: Any) -> None:
        """Raises each peak in out to its shadow (lock held)."""
        _raise(out, self.shadow.get(d))

    def _drop_if_passed(self, d: int, stats: Any) -> None:
        """Forgets device d's shadow where the counters hold as much (lock held)."""
        sh = self.shadow.get(d)
        if sh is None:
            return
        live = dict(peaks(stats))
        if all(live.get(path, -1) >= v for path, v in sh.items()):
            del self.shadow[d]

    def _remove_if_done(self) -> None:
        """Puts torch's entry points back once the probe stopped and no
        shadow is left; a wrapper another library put over ours stays."""
        with self.lock:
            if not self.stopped or self.shadow or self.pending or not self.ours:
                return
            for name, w in list(self.ours.items()):
                try:
                    if getattr(self.C, name, None) is w:
                        setattr(self.C, name, self.orig[name])
                        del self.ours[name]
                        del self.orig[name]
                except Exception:
                    pass


def _raise(stats: Any, to: Optional[Dict[Path, int]]) -> None:
    """Raises each peak in stats to its value in to, in place."""
    if not to or not isinstance(stats, dict):
        return
    for path, v in to.items():
        node = stats
        for k in path:
            node = node.get(k) if isinstance(node, dict) else None
        if isinstance(node, dict) and "peak" in node and v > node["peak"]:
            node["peak"] = v


_views: Dict[int, JobView] = {}
_views_lock = threading.Lock()


def view(C: Any) -> JobView:
    """The JobView of this torch._C, one per process (a new probe, or a
    forked child's, finds the wrappers its predecessor left)."""
    v = _views.get(id(C))
    if v is not None and v.C is C:
        return v
    with _views_lock:
        v = _views.get(id(C))
        if v is None or v.C is not C:
            v = _views[id(C)] = JobView(C)
        return v


def _after_fork() -> None:
    """A lock held by another thread at fork is never released in the child."""
    global _views_lock
    _views_lock = threading.Lock()
    for v in _views.values():
        v.lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
