"""The allocator trace: every request a process makes of PyTorch's caching
allocator, from CUDA's initialisation to the end of its third step, sent
once as marks of kind "alloc_trace" (storage/alloctrace.go has the bytes).
compare --by and memrec fit replay the traces of runs at two small batches
through a model of the allocator, scaled, to find the largest batch that
fits (docs/analysis.md, "The allocator replay").

On with MEMREC_ALLOC_TRACE=1 (``memrec record`` sets it unless ``--alloc-trace=false``; memrec fit
sets it in its trials). The history must start before the job's first
allocation, so the probe queues its start with ``torch.cuda._lazy_call``,
which runs it inside CUDA's initialisation; if torch is not imported yet,
an import hook does that once ``torch.cuda`` is loaded. The probe never
initialises CUDA itself (a context on the wrong device would cost a rank
500 MiB). Where CUDA was up before, or the allocator is configured
(PYTORCH_CUDA_ALLOC_CONF: its rules are then not the replay's), or sites
use the history, there is no trace and a probe mark says why; the same
where the job allocates on more than one stream (the replay knows one).
Where the job records the history itself (a snapshot of its own), the
history is the job's from its first call: the probe gives up its trace
with a note and never turns the history off.

Cost: the history without stacks is paid per request for three steps only,
and the snapshot and its encoding once, at the third step's end
(bench/README.md, "The allocator trace's cost").
"""

from __future__ import annotations

import base64
import importlib.abc
import importlib.util
import os
import sys
import time
import zlib
from typing import Any, Callable, Dict, List, Optional

MAX_ENTRIES = 1_000_000  # the history's ring; a trace that filled it is not sent
PIECE = 3000  # bytes of trace per mark (storage.allocTracePiece): its base64 fits a mark text (4 KiB)
# The most compressed trace bytes a process sends (all its devices): in
# base64 a third more, half the recorder's 1 MiB a second for one process,
# so that the step's samples and marks sent with it are never dropped.
MAX_SENT = 384 << 10
AFTER_STEPS = 3
# A job that marks no steps (--torch without memrec.step) would keep the
# history on for its whole run: it is turned off this long after it started.
MAX_SECONDS = 120.0


def wanted() -> bool:
    return os.environ.get("MEMREC_ALLOC_TRACE", "") not in ("", "0")


def configured() -> str:
    """The allocator's configuration where one is set ("" if none)."""
    for k in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        v = os.environ.get(k, "").strip()
        if v:
            return "%s=%s" % (k, v)
    return ""


def _uvarint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


class Refused(Exception):
    """A history the replay cannot follow; its text says why."""


def encode(events: List[Dict[str, Any]], gpu: int, pid: int, steps: int) -> bytes:
    """The trace's bytes from one device's entries of
    torch.cuda.memory._snapshot()["device_traces"]. Refused where the
    entries do not start at the allocator's first request (a free of a
    block the history never saw), show expandable segments, or allocate on
    more than one stream (each stream has its own free blocks; the replay
    knows one). An out-of-memory error the job went on from (cuDNN trying a
    smaller workspace) is a failed request: 1 and its size, in a trace of
    version 2."""
    ops = bytearray()
    n = 0
    version = 1
    live = {}
    streams = set()
    segments = seg_bytes = 0
    for e in events:
        a = e.get("action")
        if a == "alloc":
            live[e["addr"]] = n
            streams.add(e.get("stream", 0))
            if len(streams) > 1:
                raise Refused("requests on more than one CUDA stream (the replay knows one)")
            _uvarint(ops, int(e["size"]) << 1)
            n += 1
        elif a == "free_completed":
            of = live.pop(e["addr"], None)
            if of is None:
                raise Refused("the history does not start at the allocator's first request")
            _uvarint(ops, (n - of) << 1 | 1)
            n += 1
        elif a == "segment_alloc":
            segments += 1
            seg_bytes += int(e["size"])
        elif a == "oom":
            _uvarint(ops, 1)
            _uvarint(ops, int(e["size"]))
            n += 1
            version = 2
        elif a in ("segment_map", "segment_unmap"):
            raise Refused("expandable segments (their rules are not the replay's)")
    head = bytearray()
    for v in (version, gpu, pid, steps, segments, seg_bytes, n):
        _uvarint(head, v)
    return bytes(head + ops)


def mark_lines(data: bytes, t_ns: int, gpu: int, pid: int, line: Callable[..., str]) -> List[str]:
    pieces = [data[i:i + PIECE] for i in range(0, len(data), PIECE)] or [b""]
    return [line(t_ns, "alloc_trace", {"gpu": gpu, "pid": pid,
                                       "text": "%d/%d %s" % (i, len(pieces), base64.b64encode(p).decode())})
            for i, p in enumerate(pieces)]


class _Finder(importlib.abc.MetaPathFinder):
    """Runs a callback once torch.cuda has been loaded."""

    def __init__(self, then: Callable[[Any], None]) -> None:
        self.then = then
        self.done = False

    def find_spec(self, name, path, target=None):
        if name != "torch.cuda" or self.done:
            return None
        self.done = True
        try:
            spec = importlib.util.find_spec(name)  # the other finders', this one is done
        except Exception:
            return None
        loader = getattr(spec, "loader", None) if spec else None
        if loader is None or not hasattr(loader, "exec_module"):
            return None
        run, then = loader.exec_module, self.then

        def exec_module(module):
            run(module)
            try:
                then(module)
            except Exception:
                pass

        loader.exec_module = exec_module
        return spec


class AllocTrace:
    """The probe's trace. note(text) sends a probe mark; its methods never
    raise."""

    def __init__(self, note: Callable[[str], None]) -> None:
        self.note = note
        self.state = "off"  # off, armed, on, done
        self.started = 0.0  # time.monotonic() when the history went on
        # torch's _record_memory_history, the module it lives in, and the
        # function the probe put in its place (_hand_over)
        self._record: Optional[Callable[..., Any]] = None
        self._memory: Any = None
        self._in_place: Optional[Callable[..., Any]] = None

    def arm(self, sites_on: bool) -> None:
        if self.state != "off" or not wanted():
            return
        self.state = "done"
        conf = configured()
        if conf:
            self.note("allocator configured (%s): its rules are not the replay's, no allocator trace" % conf)
            return
        if sites_on:
            self.note("sites use the allocator's history: no allocator trace")
            return
        cuda = sys.modules.get("torch.cuda")
        if cuda is not None:
            self._queue(cuda)
            return
        self.state = "armed"
        sys.meta_path.insert(0, _Finder(self._queue))

    def _queue(self, cuda: Any) -> None:
        try:
            if cuda.is_initialized():
                self.state = "done"
                self.note("CUDA was up before the probe: no allocator trace (it must start at the first request)")
                return
            self.state = "armed"
            self._hand_over(cuda.memory)
            cuda._lazy_call(self._start)
        except Exception:
            self.state = "done"

    def _start(self) -> None:
        if self.state != "armed":  # the job took the history first
            return
        try:
            self._record(enabled="all", context=None, stacks="python", max_entries=MAX_ENTRIES)
            self.started = time.monotonic()
            self.state = "on"
        except Exception:
            self.state = "done"

    def _hand_over(self, memory: Any) -> None:
        """Where the job records the allocator's history itself (a snapshot
        of its own), before CUDA is up or after, the history is the job's
        from its first call on: the trace is given up, with a note, and the
        probe neither turns the history on nor off. torch's function is put
        back in place at that call."""
        record = memory._record_memory_history

        def job_records(*args: Any, **kwargs: Any) -> Any:
            self._put_back()
            if self.state in ("armed", "on"):
                self.state = "done"
                self.note("the job records the allocator's history itself: no allocator trace, its history left as it sets it")
            return record(*args, **kwargs)
        self._record, self._memory, self._in_place = record, memory, job_records
        memory._record_memory_history = job_records

    def _put_back(self) -> None:
        """torch's function in its place again, where the probe's still is."""
        try:
            if self._in_place is not None and self._memory._record_memory_history is self._in_place:
                self._memory._record_memory_history = self._record
        except Exception:
            pass

    def _off(self, torch: Any) -> None:
        """The history off, through torch's function (the one _hand_over
        kept, else torch's), which is put back in place."""
        try:
            (self._record or torch.cuda.memory._record_memory_history)(enabled=None)
        except Exception:
            pass
        self._put_back()

    def expire(self, torch: Any, steps: int) -> None:
        """From the probe's timer: the history off where it has been on for
        MAX_SECONDS without reaching step AFTER_STEPS."""
        if self.state != "on" or time.monotonic() - self.started < MAX_SECONDS:
            return
        self.state = "done"
        self._off(torch)
        self.note("%d of %d steps marked in %.0f s (memrec.step() marks them): the allocator's history is off, no allocator trace"
                  % (steps, AFTER_STEPS, MAX_SECONDS))

    def finish(self, torch: Any, devices: List[int], gpu: Callable[[int], int], pid: int, steps: int,
               t_ns: int, line: Callable[..., str]) -> List[str]:
        """At the end of step AFTER_STEPS: the marks of each device's trace,
        and the history off."""
        if self.state != "on":
            return []
        self.state = "done"
        out: List[str] = []
        sent = 0
        try:
            snap = torch.cuda.memory._snapshot()
            traces = snap.get("device_traces") or []
            for d in devices:
                if d >= len(traces):
                    continue
                ev = traces[d]
                if len(ev) >= MAX_ENTRIES:
                    self.note("the allocator's history filled its %d entries by step %d: no allocator trace" % (MAX_ENTRIES, steps))
                    continue
                try:
                    data = encode(ev, gpu(d), pid, steps)
                except Refused as e:
                    self.note("the allocator's history on device %d: %s: no allocator trace" % (d, e))
                    continue
                z = zlib.compress(data, 6)
                if sent + len(z) > MAX_SENT:
                    self.note("the allocator trace on device %d is %d KiB compressed, more than the probe sends at once "
                              "(%d KiB: the socket takes 1 MiB a second, and the step's own lines come with it): no allocator trace"
                              % (d, len(z) >> 10, MAX_SENT >> 10))
                    continue
                sent += len(z)
                out += mark_lines(z, t_ns, gpu(d), pid, line)
        except Exception:
            pass
        self._off(torch)
        return out
