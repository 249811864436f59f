"""Allocation sites: which line of the training code holds GPU memory.

PyTorch's allocator can keep the Python stack of every block it hands out
(``torch.cuda.memory._record_memory_history``). Two modes, chosen by what they
cost (bench/README.md, "Allocation sites"):

- "state" keeps the stack of each live block and no event trace: that is all
  a leak needs (which line allocated the blocks that stay). Its cost is a
  Python stack per allocation: on a GPU-bound job it hides behind the GPU,
  on a CPU-bound one it does not. So the probe measures it: over the first
  257 steps it alternates blocks of 16 steps without and with the history,
  and when the history costs more than STATE_BUDGET of a step it keeps it on
  one step in N only (N = cost / STATE_BUDGET, rounded up). Blocks allocated
  in the other steps have no stack; each summary says N ("sampled_every":
  the steps since the previous summary over those that had the history on,
  which counts the measuring blocks and trace windows too) and the analysis
  scales the growth of a site by it, as a sampling profiler does.
- "all" adds a trace of every alloc and free: it lengthens every step and
  makes each snapshot slow, so it is on only in short windows of a few
  steps, where the alloc and free counts per site are wanted, and a window
  opens only when the windows so far cost less than WINDOW_BUDGET of the
  time since the first one.

A snapshot is summarised per allocation site in _sitesummary.

Nothing here raises into the training code.
"""

from __future__ import annotations

import collections
import math
import os
import sys
import time
from typing import Any, Callable, Dict, Iterable, List, Optional

from ._sitesummary import MAX_MESSAGE, UNTRACKED, Frames, Summary, frame_kind, site_of  # noqa: F401 (the probe's callers)

try:
    from typing import Protocol
except ImportError:  # Python 3.7
    Protocol = object  # type: ignore

MAX_ENTRIES = 200000  # trace entries kept while a window is open
WINDOW_AT = 10  # a trace window opens at this step of each epoch ...
WINDOW_STEPS = 3  # ... and lasts this many steps (MEMREC_SITES_WINDOW; 0: never)
STATE_BUDGET = 0.01  # the share of a step the state history may cost
WINDOW_BUDGET = 0.01  # the share of the time the trace windows may cost
CAL_BLOCK = 16  # steps a calibration block lasts ...
CAL_PAIRS = 8  # ... and pairs of blocks without and with the history
MAX_EVERY = 64  # the history is on at least one step in this many

STEADY = ("epoch_end", "window", "snapshot")  # summaries of the steady state


def history(torch: Any, mode: Optional[str], max_entries: int = MAX_ENTRIES) -> bool:
    """Switches the allocator's history: "state", "all" or None (off)."""
    rec = getattr(getattr(torch.cuda, "memory", None), "_record_memory_history", None)
    if rec is None:
        return False
    if mode is None:
        rec(enabled=None)
    elif mode == "all":
        rec(enabled="all", context="alloc", stacks="python", max_entries=max_entries, clear_history=True)
    else:
        rec(enabled="state", context="alloc", stacks="python", clear_history=True)
    return True


def snapshot(torch: Any) -> Dict[str, Any]:
    return torch.cuda.memory._snapshot()


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return default


class Emitter(Protocol):
    """What the sites part needs of the probe, and all it may use: who the
    summaries are from and where they go."""

    pid: int
    enabled: bool  # put_line sends somewhere

    def devices(self, torch: Any) -> List[int]: ...  # the CUDA devices in use

    def gpu(self, torch: Any, device: int) -> int: ...  # a device's NVML index

    def rank(self) -> Optional[int]: ...

    def put_line(self, line: str) -> None: ...


def header(out: Emitter, torch: Any, device: int, reason: str, t_ns: int, since_us: int = 0,
           **fields: Any) -> Dict[str, Any]:
    """The head of one "sites" line (docs/format.md), keys in the wire's
    order; fields that are None are left out."""
    head = {"type": "sites", "t_ns": t_ns, "gpu": out.gpu(torch, device), "pid": out.pid}
    rank = out.rank()
    if rank is not None:
        head["rank"] = rank
    head["reason"] = reason
    for k, v in fields.items():
        if v is not None:
            head[k] = v
    if since_us:
        head["since_ns"] = since_us * 1000
    return head


class Sites:
    """The probe's part for allocation sites: history on from CUDA's start
    (on every step, or on one step in `every` where it costs more than
    STATE_BUDGET), a trace window of WINDOW_STEPS steps at the WINDOW_AT-th
    step of an epoch while the windows stay within WINDOW_BUDGET, summaries
    at epoch ends, at an OOM, at exit and on request."""

    def __init__(self, out: Emitter, clock: Callable[[], float] = time.perf_counter) -> None:
        self.out = out
        self.clock = clock
        self.on = False
        self.armed = False  # the history works: summaries can be taken
        self.mode = None  # what the allocator records now
        self.pending = False  # history waits for CUDA to start
        self.window_at = _env_int("MEMREC_SITES_AT", WINDOW_AT)
        self.window_steps = _env_int("MEMREC_SITES_WINDOW", WINDOW_STEPS)
        # 0: not measured yet; MEMREC_SITES_EVERY fixes it.
        self.every = max(0, _env_int("MEMREC_SITES_EVERY", 0))
        self.cost = None  # the state history's measured share of a step
        self.cal = []  # calibration: each block's step durations
        self.steps = 0  # steps since the epoch started
        self.count = 0  # steps since the history was measured
        self.span_steps = 0  # steps since the last steady summary ...
        self.span_on = 0  # ... and how many of them had the history on
        self.last_step = 0.0
        self.window_end = -1
        self.window_start_us = 0
        self.window_opened = 0.0  # clock when the open window opened
        self.windows_first = 0.0  # clock when the first window opened
        self.windows_cost = 0.0  # seconds the windows took in all
        self.recent = collections.deque(maxlen=32)  # recent step durations
        self.kinds = None
        self.last_cost = 0.0  # seconds the last snapshot and summary took
        self.sent = 0

    def enable(self, on: bool = True) -> None:
        self.on = bool(on)
        self.window_end = -1  # a window open when the history stops is dropped
        torch = sys.modules.get("torch")
        if torch is None:
            return
        if not self.on:
            if self.mode is not None:
                history(torch, None)
            self.mode, self.armed = None, False
            return
        self.arm(torch)

    def arm(self, torch: Any) -> None:
        """Turns the state history on now if CUDA is up, else when it starts
        (torch runs queued calls at its lazy init), so the first weights
        moved to the GPU already carry their stacks."""
        if not self.on or self.armed or self.pending:
            return
        try:
            if torch.cuda.is_initialized():
                self._start(torch)
            else:
                lazy = getattr(torch.cuda, "_lazy_call", None)
                if lazy is not None:
                    self.pending = True
                    lazy(lambda: self._start(torch))
        except Exception:
            pass

    def _start(self, torch: Any) -> None:
        self.pending = False
        try:
            if self.on and history(torch, "state"):
                self.mode, self.armed = "state", True
                self.kinds = Frames(os.path.dirname(os.path.abspath(torch.__file__)))
                self.cal, self.last_step = [], 0.0
        except Exception:
            self.mode, self.armed = None, False

    def epoch_start(self) -> None:
        self.steps = 0

    def step(self, torch: Any) -> None:
        """Called at every step end: measures the state history's cost,
        keeps it on the steps it samples, and opens and closes the trace
        window."""
        now = self.clock()
        dt = now - self.last_step if self.last_step else None
        self.last_step = now
        self.steps += 1
        if not self.armed:
            return
        self.span_steps += 1
        self.span_on += self.mode is not None  # what the step that ended ran with
        if self.window_end >= 0:
            if self.steps >= self.window_end:
                self.window_end = -1
                self.send(torch, "window", since_us=self.window_start_us)
                self.windows_cost += max(0.0, self.clock() - self.window_opened - self.window_steps * self._typical())
                self._set(torch, self._duty_mode(self.count))
            return
        if dt is not None:
            self.recent.append(dt)
        if self.every == 0:
            self._calibrate(torch, dt)
            return
        self.count += 1
        if self.window_steps > 0 and self.steps == self.window_at and self._window_fits(now):
            if self._set(torch, "all"):
                self.window_end = self.steps + self.window_steps
                self.window_start_us = time.time_ns() // 1000
                self.window_opened = now
                if not self.windows_first:
                    self.windows_first = now
                return
        want = self._duty_mode(self.count)
        if want != self.mode:
            self._set(torch, want)

    def _duty_mode(self, count: int) -> Optional[str]:
        """The history for the step after the count-th: on every step, or
        on one in `every`."""
        return "state" if self.every <= 1 or count % self.every == 0 else None

    def _typical(self) -> float:
        r = sorted(self.recent)
        return r[len(r) // 2] if r else 0.0

    def _window_fits(self, now: float) -> bool:
        """Whether a window may open now: the windows so far took less than
        WINDOW_BUDGET of the time since the first one opened."""
        if not self.windows_first:
            return True
        return self.windows_cost <= WINDOW_BUDGET * (now - self.windows_first)

    def _calibrate(self, torch: Any, dt: Optional[float]) -> None:
        """Alternates blocks of CAL_BLOCK steps without and with the state
        history (dt: the step that just ended, in the block's mode) and,
        after CAL_PAIRS pairs, keeps it on every step or on one in every."""
        if not self.cal:  # the first block: without
            self._set(torch, None)
            self.cal = [[]]
            return
        if dt is None:
            return
        block = self.cal[-1]
        block.append(dt)
        if len(block) < CAL_BLOCK:
            return
        if len(self.cal) < 2 * CAL_PAIRS:
            self.cal.append([])
            self._set(torch, "state" if len(self.cal) % 2 == 0 else None)
            return
        ratios = []
        for i in range(0, len(self.cal), 2):
            off, on = sorted(self.cal[i]), sorted(self.cal[i + 1])
            m_off, m_on = off[len(off) // 2], on[len(on) // 2]
            if m_off > 0:
                ratios.append(m_on / m_off - 1)
        ratios.sort()
        self.cost = ratios[len(ratios) // 2] if ratios else 0.0
        self.every = 1 if self.cost <= STATE_BUDGET else min(MAX_EVERY, math.ceil(self.cost / STATE_BUDGET))
        self.cal, self.count = [], 0
        self._set(torch, "state")

    def _set(self, torch: Any, mode: Optional[str]) -> bool:
        try:
            history(torch, mode)
            self.mode = mode
            return True
        except Exception:
            return False

    def send(self, torch: Any, reason: str, devices: Optional[Iterable[int]] = None, since_us: int = 0,
             **fields: Any) -> List[str]:
        """Takes a snapshot and queues one summary per device in use.
        Returns the summaries' lines (for tests and memrec.snapshot)."""
        if not self.armed or torch is None:
            return []
        t0 = time.perf_counter()
        lines = []
        try:
            snap = snapshot(torch)
            t = time.time_ns()
            out = self.out
            sampled = None
            if self.span_on < self.span_steps:
                sampled = round(self.span_steps / max(1, self.span_on), 3)
            watched = None
            wb = getattr(out, "watched_blocks", None)
            if wb is not None:
                watched = wb()
            for d in (out.devices(torch) or [0]) if devices is None else devices:
                s = Summary(watched)
                s.add(snap, d, self.kinds, since_us)
                line = s.message(header(out, torch, d, reason, t, since_us, sampled_every=sampled, **fields))
                lines.append(line)
                if out.enabled:
                    out.put_line(line)
            self.sent += len(lines)
        except Exception:
            pass
        if reason in STEADY:  # the analysis reads growth between these
            self.span_steps = self.span_on = 0
        self.last_cost = time.perf_counter() - t0
        return lines
