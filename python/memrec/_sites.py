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

A snapshot is summarised per allocation site: the innermost frame in the
user's code (outside torch, the standard library and installed packages,
falling back to the innermost frame outside torch and the standard library),
with its callers kept for display; live bytes and blocks, and what the
window's trace allocated and freed there. Blocks without frames (allocated
while the history was off, or by autograd's backward threads, which run no
Python) form one "untracked" entry. A summary is one JSON line of at most
MAX_MESSAGE bytes: sites that do not fit are added up as "other".

Nothing here raises into the training code.
"""

from __future__ import annotations

import collections
import json
import math
import os
import sys
import sysconfig
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

try:
    from typing import Protocol
except ImportError:  # Python 3.7
    Protocol = object  # type: ignore

MAX_MESSAGE = 64 << 10  # the recorder's longest line
MAX_STACK = 4  # callers kept per site, for display
MAX_ENTRIES = 200000  # trace entries kept while a window is open
WINDOW_AT = 10  # a trace window opens at this step of each epoch ...
WINDOW_STEPS = 3  # ... and lasts this many steps (MEMREC_SITES_WINDOW; 0: never)
STATE_BUDGET = 0.01  # the share of a step the state history may cost
WINDOW_BUDGET = 0.01  # the share of the time the trace windows may cost
CAL_BLOCK = 16  # steps a calibration block lasts ...
CAL_PAIRS = 8  # ... and pairs of blocks without and with the history
MAX_EVERY = 64  # the history is on at least one step in this many

STEADY = ("epoch_end", "window", "snapshot")  # summaries of the steady state
LIVE = ("active_allocated", "active_pending_free", "active_awaiting_free")
UNTRACKED = "untracked"


class Frames:
    """Tells the user's frames from those of torch, the standard library
    and installed packages."""

    def __init__(self, torch_dir: Optional[str] = None) -> None:
        paths = sysconfig.get_paths()
        self.stdlib = tuple(p for p in {paths.get("stdlib"), paths.get("platstdlib")} if p)
        self.packages = tuple(p for p in {paths.get("purelib"), paths.get("platlib")} if p)
        self.torch = torch_dir
        self.own = os.path.dirname(os.path.abspath(__file__))
        self.memo = {}

    def kind(self, filename: str) -> int:
        """0: the user's code; 1: an installed package other than torch;
        2: torch, the standard library, the probe, or not Python."""
        k = self.memo.get(filename)
        if k is None:
            k = self.memo[filename] = self._kind(filename)
        return k

    def _kind(self, f: str) -> int:
        if not f or f.startswith("<") or not f.endswith(".py"):
            return 2
        if f.startswith(self.own):
            return 2
        if self.torch and f.startswith(self.torch + os.sep):
            return 2
        return frame_kind(f, self.stdlib, self.packages)


def frame_kind(f: str, stdlib: Tuple[str, ...] = (), packages: Tuple[str, ...] = ()) -> int:
    """The rule of Frames.kind on a path alone (the same one memrec's
    snapshot reader applies to files from other machines)."""
    if not f or f.startswith("<") or not f.endswith(".py"):
        return 2
    parts = f.replace("\\", "/").split("/")
    for i, p in enumerate(parts[:-1]):
        if p in ("site-packages", "dist-packages"):
            return 2 if parts[i + 1] == "torch" else 1
    if any(f.startswith(p + os.sep) for p in packages):
        return 1
    if any(f.startswith(p + os.sep) for p in stdlib):
        return 2
    for i, p in enumerate(parts[:-1]):
        if p.startswith("python3") and i > 0 and parts[i - 1] in ("lib", "lib64"):
            return 2
    return 0


def site_of(frames: Sequence[Dict[str, Any]], kinds: Frames) -> int:
    """The index of the site's frame among a block's frames (innermost
    first): the innermost user frame, else the innermost frame outside torch
    and the standard library, else the innermost frame; -1 without frames."""
    fallback = -1
    for i, fr in enumerate(frames):
        k = kinds.kind(fr.get("filename", ""))
        if k == 0:
            return i
        if k == 1 and fallback < 0:
            fallback = i
    if fallback < 0 and frames:
        return 0
    return fallback


def _label(fr: Dict[str, Any]) -> str:
    return "%s:%d" % (os.path.basename(fr.get("filename", "?")), int(fr.get("line", 0) or 0))


class _Site:
    __slots__ = ("file", "line", "func", "stack", "live_bytes", "live_blocks", "alloc_bytes", "allocs",
                 "freed_bytes", "frees")

    def __init__(self, frames: Sequence[Dict[str, Any]], i: int, kinds: Frames) -> None:
        fr = frames[i]
        self.file = str(fr.get("filename", ""))
        self.line = int(fr.get("line", 0) or 0)
        self.func = str(fr.get("name", ""))
        stack = []
        for up in frames[i + 1:]:
            if len(stack) >= MAX_STACK:
                break
            if kinds.kind(up.get("filename", "")) < 2:
                stack.append("%s %s" % (_label(up), up.get("name", "")))
        self.stack = stack
        self.live_bytes = self.live_blocks = self.alloc_bytes = self.allocs = self.freed_bytes = self.frees = 0

    def json(self) -> Dict[str, Any]:
        d = {"site": "%s:%d" % (os.path.basename(self.file), self.line), "file": self.file, "line": self.line,
             "func": self.func, "live_bytes": self.live_bytes, "live_blocks": self.live_blocks}
        if self.stack:
            d["stack"] = self.stack
        if self.allocs or self.frees:
            d.update(alloc_bytes=self.alloc_bytes, allocs=self.allocs, freed_bytes=self.freed_bytes, frees=self.frees)
        return d


# With memrec.watch, a live block that holds a watched tensor's storage is
# summed under its category instead of the line that allocated it: the
# site tables then say "<optimizer state> AdamW exp_avg" where they would
# say "adamw.py:..." or the model's __init__.
CATEGORY_FILES = ("<parameters>", "<gradients>", "<optimizer state>", "<buffers>")


class Summary:
    """The per-site figures of one device in one snapshot. watched is
    memrec.watch's storages, (address, bytes, category, label) sorted by
    address, or None."""

    def __init__(self, watched: Optional[Sequence[Tuple[int, int, int, str]]] = None) -> None:
        self.watched = list(watched or ())
        self.watched_at = [w[0] for w in self.watched]
        self.sites = {}  # (file, line) -> _Site
        self.untracked = [0, 0, 0, 0]  # live bytes, live blocks, alloc bytes, freed bytes
        self.bad = 0  # entries of the snapshot that made no sense
        self.traced = False

    def _site(self, frames: Sequence[Dict[str, Any]], kinds: Frames) -> Optional[_Site]:
        """The block's site, or None for a block without frames."""
        i = site_of(frames, kinds) if frames else -1
        if i < 0:
            return None
        fr = frames[i]
        k = (fr.get("filename", ""), int(fr.get("line", 0) or 0))
        s = self.sites.get(k)
        if s is None:
            s = self.sites[k] = _Site(frames, i, kinds)
        return s

    def _category(self, addr: int, size: int, kinds: Frames) -> Optional[_Site]:
        """The category site of a block holding a watched storage, or None."""
        import bisect

        i = bisect.bisect_left(self.watched_at, addr)
        if i >= len(self.watched_at) or self.watched_at[i] >= addr + size:
            return None
        _, _, cat, label = self.watched[i]
        key = (CATEGORY_FILES[cat], 0)
        s = self.sites.get(key)
        if s is None:
            s = self.sites[key] = _Site([{"filename": key[0], "line": 0, "name": label}], 0, kinds)
        elif label and label not in s.func.split(", "):
            s.func = s.func + ", " + label if s.func else label
        return s

    def add(self, snapshot: Dict[str, Any], device: int, kinds: Frames, since_us: int = 0) -> None:
        """Adds the live blocks of device and its trace entries after since_us."""
        for seg in snapshot.get("segments") or ():
            try:
                if int(seg.get("device", 0)) != device:
                    continue
                blocks = seg.get("blocks") or ()
            except (TypeError, ValueError, AttributeError):
                self.bad += 1
                continue
            for b in blocks:
                try:
                    if b.get("state") not in LIVE:
                        continue
                    size = int(b["size"])
                    if size < 0:
                        raise ValueError(size)
                    s = None
                    if self.watched:
                        s = self._category(int(b.get("address", -1)), size, kinds)
                    if s is None:
                        s = self._site(b.get("frames") or (), kinds)
                except (KeyError, TypeError, ValueError, AttributeError):
                    self.bad += 1
                    continue
                if s is None:
                    self.untracked[0] += size
                    self.untracked[1] += 1
                else:
                    s.live_bytes += size
                    s.live_blocks += 1
        traces = snapshot.get("device_traces") or ()
        if device < len(traces):
            self.traced = True
            # A free's frames are where it was freed (often autograd's threads,
            # with none): it counts at the site that allocated the address.
            owner = {}
            for e in traces[device] or ():
                try:
                    action = e.get("action")
                    if action not in ("alloc", "free_completed"):
                        continue
                    if int(e.get("time_us", 0) or 0) < since_us:
                        continue
                    size = int(e["size"])
                    addr = e.get("addr")
                    if action == "alloc":
                        s = self._site(e.get("frames") or (), kinds)
                        owner[addr] = s
                    else:
                        s = owner.pop(addr, None)
                except (KeyError, TypeError, ValueError, AttributeError):
                    self.bad += 1
                    continue
                if action == "alloc":
                    if s is None:
                        self.untracked[2] += size
                    else:
                        s.alloc_bytes += size
                        s.allocs += 1
                elif s is None:
                    self.untracked[3] += size
                else:
                    s.freed_bytes += size
                    s.frees += 1

    def message(self, head: Mapping[str, Any], limit: int = MAX_MESSAGE) -> str:
        """One JSON line: head's fields, then the sites by live bytes (then
        bytes allocated) until the line would pass limit; the rest as other."""
        order = sorted(self.sites.values(), key=lambda s: (-s.live_bytes, -s.alloc_bytes, s.file, s.line))
        d = dict(head)
        d["untracked"] = {"live_bytes": self.untracked[0], "live_blocks": self.untracked[1]}
        if self.untracked[2] or self.untracked[3]:
            d["untracked"].update(alloc_bytes=self.untracked[2], freed_bytes=self.untracked[3])
        d["traced"] = self.traced
        if self.bad:
            d["bad"] = self.bad
        base = json.dumps(d, separators=(",", ":"))
        room = limit - len(base) - 200  # "sites", "other" and the newline
        parts, other = [], [0, 0, 0]
        for s in order:
            j = json.dumps(s.json(), separators=(",", ":"))
            if len(j) + 1 <= room:
                parts.append(j)
                room -= len(j) + 1
            else:
                other[0] += 1
                other[1] += s.live_bytes
                other[2] += s.live_blocks
        tail = ',"sites":[' + ",".join(parts) + "]"
        if other[0]:
            tail += ',"other":{"sites":%d,"live_bytes":%d,"live_blocks":%d}' % tuple(other)
        return base[:-1] + tail + "}\n"


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
