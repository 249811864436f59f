"""The probe: reads PyTorch's caching allocator and sends marks to memrec.

Everything the training thread calls does the least it can: it reads the
allocator's counters (one ``torch._C._cuda_memoryStats`` call per device,
about 11 µs on an H200) and appends a tuple to a bounded queue. One
background thread wakes every SEND_INTERVAL, formats what queued up as JSON
lines and writes them to the recorder's socket in one send. When the queue
is full, messages are dropped and counted, and the count is sent later.
Nothing here raises into the training code.

Why the background thread wakes on a timer and not per message: on a
CPU-bound job (a tiny MLP whose step takes 1.2 ms on an H200) waking it at
every step cost 230 µs per step. Every torch operation releases the GIL, so
a woken thread takes the GIL at the next operation and the training thread
waits for it to finish its formatting and its send; a few such hand-overs a
step, each a futex wake and a context switch, cost far more than the work.
Woken four times a second, the thread formats a batch of steps per hand-over.
For the same reason steps close together share one allocator sample (the
peak is reset only when a sample is taken, so that sample's peak covers
every step since the previous one): steps closer than STEP_SAMPLE_INTERVAL,
and closer than the sample's own measured cost / SAMPLE_BUDGET. A step that
lasted LONG_STEP or more always has its own sample. On an H200 host a
sample took about 22 µs in a tight loop and about 90 µs right after a
training step (cold caches), so a job of 1 ms steps takes one every 36 steps,
while any job whose steps last 10 ms or more keeps one sample per step.
For the same reason the background thread skips its timer sample when a
step took one since its last wake, and wakes four times a second.

Once after the third step and then at most once a minute, a step sample also
looks at the allocator's segments (one ``torch.cuda.memory_snapshot()``;
that step is sampled however close the last sample was: a 3-step fit trial
of a fast job ends right after it):
the largest with room free is the size of the job's largest request that
comes and goes, which compare --by adds at the limit (what the allocator may
hold there beyond the peak). Each sample from that step on carries it as
``largest_segment_bytes``.
"""

from __future__ import annotations

import collections
import json
import os
import socket
import sys
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from . import _alloctrace, _budget, _peaks, _sites

MAX_QUEUE = 10000
TIMER_INTERVAL = 0.25  # an allocator sample this often when no step took one
SEND_INTERVAL = 0.25  # how often the background thread formats and sends
WAKE_AT = 2048  # a queue this long wakes the background thread early
STEP_SAMPLE_INTERVAL = 0.005  # steps closer than this share an allocator sample ...
SAMPLE_BUDGET = 0.0025  # ... and closer than the sample's own cost / this, ...
LONG_STEP = 0.010  # ... unless the step lasted this long: such a step has its own sample

LONG_STEP_NS = int(LONG_STEP * 1e9)
# The allocator's segments are looked at after this many steps (the warm-up
# has made its largest requests by then) and then at most this often: a
# look is one memory_snapshot, 1.0 to 1.6 ms on an H200 for 600 to 800 blocks.
SEGMENTS_AFTER_STEPS = 3
SEGMENTS_INTERVAL = 60.0

# Message kinds on the queue.
_MARK, _TORCH, _DROPPED, _STEP, _LINE = 0, 1, 2, 3, 4

def stats_line(t_ns: int, device: int, pid: int, rank: Optional[int], stats: Dict[str, Any],
               peak: Optional[int] = None, extra: str = "", largest_segment: int = 0) -> str:
    """Formats one allocator sample from torch's nested memory stats dict;
    extra is more fields (the budget's), each starting with a comma;
    largest_segment the largest segment the allocator was seen to hold
    (0: not looked at yet, left out)."""
    def cur(key: str) -> int:
        try:
            return int(stats[key]["all"]["current"])
        except (KeyError, TypeError):
            return 0

    if peak is None:
        try:
            peak = int(stats["allocated_bytes"]["all"]["peak"])
        except (KeyError, TypeError):
            peak = 0
    rank_part = ',"rank":%d' % rank if rank is not None and rank >= 0 else ""
    return (
        '{"type":"torch","t_ns":%d,"gpu":%d,"pid":%d%s,"allocated_bytes":%d,"reserved_bytes":%d,'
        '"active_bytes":%d,"inactive_split_bytes":%d,"peak_allocated_bytes":%d,"segments":%d,'
        '"alloc_retries":%d,"ooms":%d%s%s}\n'
        % (t_ns, device, pid, rank_part, cur("allocated_bytes"), cur("reserved_bytes"), cur("active_bytes"),
           cur("inactive_split_bytes"), peak, cur("segment"), int(stats.get("num_alloc_retries", 0) or 0),
           int(stats.get("num_ooms", 0) or 0),
           ',"largest_segment_bytes":%d' % largest_segment if largest_segment > 0 else "", extra)
    )


def step_line(t_ns: int, step: Optional[int], rank: Optional[int], pid: Optional[int] = None) -> str:
    """The mark of one step, formatted without a dict. pid names the
    process, so its steps and its allocator samples are one rank's even
    where no rank is known."""
    tail = ""
    if step is not None:
        tail = ',"step":%d' % step
    if rank is not None:
        tail += ',"rank":%d' % rank
    if pid is not None:
        tail += ',"pid":%d' % pid
    return '{"type":"mark","t_ns":%d,"kind":"step"%s}\n' % (t_ns, tail)


def mark_line(t_ns: int, kind: str, fields: Dict[str, Any]) -> str:
    parts = ['{"type":"mark","t_ns":%d,"kind":%s' % (t_ns, json.dumps(kind))]
    for k, v in fields.items():
        if v is None:
            continue
        if isinstance(v, str):
            parts.append(',"%s":%s' % (k, json.dumps(v)))
        else:
            parts.append(',"%s":%d' % (k, int(v)))
    parts.append("}\n")
    return "".join(parts)


class Probe:
    """One per process. Its public methods never raise."""

    def __init__(self, path: Optional[str] = None, timer: Optional[float] = None,
                 send_interval: Optional[float] = None) -> None:
        self.path = path if path is not None else os.environ.get("MEMREC_SOCKET", "")
        self.enabled = bool(self.path)
        self.pid = os.getpid()
        self.queue = collections.deque()
        self.dropped = 0  # messages dropped since the last report
        self.dropped_total = 0
        self.sent = 0
        self.lock = threading.Lock()  # held by the sender while it drains the queue
        self.wake = threading.Event()
        self.busy = False  # the sender holds messages it took from the queue
        self.sock = None
        self.sender = None
        self.timer_interval = TIMER_INTERVAL if timer is None else timer
        self.send_interval = SEND_INTERVAL if send_interval is None else send_interval
        self.step_sample_ns = int(_env_seconds("MEMREC_STEP_SAMPLE_MS", STEP_SAMPLE_INTERVAL) * 1e9)
        self.base_sample_ns = self.step_sample_ns
        self.sample_cost_ns = 0  # what a step's sample cost, smoothed
        # MEMREC_STEP_SAMPLE_MS fixes the spacing; else the samples' cost widens it.
        self.space_by_cost = "MEMREC_STEP_SAMPLE_MS" not in os.environ
        self.last_step_sample_ns = -(1 << 62)
        self.last_step_ns = -(1 << 62)  # when the previous step ended
        self.step_rank = None  # the rank at the last step sample
        self.steps_seen = 0
        self.segments_due_ns = 0  # when the allocator's segments are next looked at
        self.largest = {}  # memrec's GPU index -> the largest segment seen (bytes), sent with each sample after
        self._devs = None  # CUDA devices this process uses
        self.gpus = {}  # CUDA device -> the GPU's index in memrec's device samples
        self.devices_checked = 0
        self._rank = None
        self.oom_reported = 0.0  # time of the last OOM report
        self.observer_attached = False
        self.allocator_seen = False  # an allocator sample was queued
        self.noted = False  # the probe note (no allocator view) was sent
        self.stopped = False
        self.views: List[_peaks.JobView] = []  # the job's view of its peaks, per torch._C
        # JAX (memrec.jax): read JAX's allocators instead of torch's.
        self.jax_wanted = os.environ.get("MEMREC_JAX", "") not in ("", "0")
        self.jax_allocator = None
        self.sites = _sites.Sites(self)
        self.watch: Optional[_budget.Watch] = None  # memrec.watch's model and optimizer
        if os.environ.get("MEMREC_SITES", "") not in ("", "0"):
            self.sites.on = True
        # MEMREC_ALLOC_TRACE: the allocator's requests until the third step.
        self.alloc_trace = _alloctrace.AllocTrace(lambda text: self.mark("probe", text=text, pid=self.pid))
        if self.enabled:
            self.alloc_trace.arm(self.sites.on)
            self._start_threads()

    # ---- the background thread -------------------------------------------

    def _start_threads(self) -> None:
        self.sender = threading.Thread(target=self._send_loop, name="memrec-sender", daemon=True)
        self.sender.start()

    def _put(self, item: Tuple[Any, ...]) -> None:
        q = self.queue
        if len(q) >= MAX_QUEUE:
            self.dropped += 1
            self.dropped_total += 1
            return
        q.append(item)
        if len(q) == WAKE_AT:
            self.wake.set()

    def put_line(self, line: str) -> None:
        """Queues a line formatted already (a site summary)."""
        self._put((_LINE, line))

    def _connect(self) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(5.0)
            s.connect(self.path)
        except OSError:
            s.close()
            raise
        return s

    def _format(self, item: Tuple[Any, ...], out: List[str]) -> None:
        """Appends the lines of one queued item to out."""
        kind = item[0]
        if kind == _STEP:
            _, t, step, rank, samples = item
            out.append(step_line(t, step, rank, self.pid))
            for gpu, stats, fig, largest in samples:
                out.append(stats_line(t, gpu, self.pid, rank, stats, extra=self._budget_fields(fig),
                                      largest_segment=largest))
        elif kind == _TORCH:
            _, t, dev, rank, stats, peak = item[:6]
            fig = item[6] if len(item) > 6 else None
            largest = item[7] if len(item) > 7 else 0
            out.append(stats_line(t, dev, self.pid, rank, stats, peak, extra=self._budget_fields(fig),
                                  largest_segment=largest))
        elif kind == _MARK:
            out.append(mark_line(item[1], item[2], item[3]))
        elif kind == _LINE:
            out.append(item[1])
        else:
            out.append(mark_line(item[1], "probe_dropped", {"code": item[2], "text": "memrec probe dropped %d messages" % item[2]}))

    def _send_loop(self) -> None:
        next_sample = time.monotonic() + self.timer_interval
        while not self.stopped:
            self.wake.wait(self.send_interval)
            self.wake.clear()
            if self.timer_interval and self.timer_interval > 0 and time.monotonic() >= next_sample:
                next_sample = time.monotonic() + self.timer_interval
                self._timer_sample()
            self._drain()

    def _drain(self) -> None:
        """Formats and sends everything queued, in one send."""
        with self.lock:
            q = self.queue
            if not q and not self.dropped:
                return
            self.busy = True
            try:
                lines = []
                while q:
                    item = q.popleft()
                    try:
                        self._format(item, lines)
                    except Exception:  # a value that does not format
                        self.dropped += 1
                        self.dropped_total += 1
                if self.dropped:
                    n, self.dropped = self.dropped, 0
                    self._format((_DROPPED, time.time_ns(), n), lines)
                data = "".join(lines).encode("utf-8")
                try:
                    if self.sock is None:
                        self.sock = self._connect()
                    self.sock.sendall(data)
                    self.sent += len(lines)
                except OSError:
                    # The recorder is gone: become a no-op.
                    if self.sock is not None:
                        self.sock.close()
                        self.sock = None
                    self.enabled = False
                    self.stopped = True
                    q.clear()
                    self._stop_views()
            except Exception:
                pass
            finally:
                self.busy = False

    def _timer_sample(self) -> None:
        if not self.enabled:
            return
        try:
            if self.sites.on and not self.sites.armed:
                t = sys.modules.get("torch")
                if t is not None:
                    self.sites.arm(t)
            torch = self._torch()
            if torch is not None and time.monotonic() - self.devices_checked > 5.0:
                self.devices(torch, rescan=True)
            if torch is not None:
                self.alloc_trace.expire(torch, self.steps_seen)
            if time.time_ns() - self.last_step_sample_ns >= self.timer_interval * 1e9:
                self.sample()  # no step took one since the last wake
        except Exception:
            pass

    def flush(self, timeout: float = 2.0) -> None:
        """Waits until the queue is sent (or timeout)."""
        if not self.enabled:
            return
        self.wake.set()
        end = time.monotonic() + timeout
        while (self.queue or self.busy) and time.monotonic() < end and not self.stopped:
            time.sleep(0.001)
            self.wake.set()

    def close(self) -> None:
        self.flush()
        self.stopped = True
        self._stop_views()
        self.wake.set()
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass

    # ---- torch -----------------------------------------------------------

    def _jax(self) -> Any:
        """The JAX allocator reader (memrec.jax) once the script imported
        jax, when the JAX probe is on; else None."""
        if not self.jax_wanted:
            return None
        a = self.jax_allocator
        if a is None:
            from . import jax as _jax  # here, not at import: memrec.jax imports memrec
            a = _jax.allocator(self)
        return a

    def _torch(self) -> Any:
        """The allocator to read: torch if the process imported it and CUDA
        is up, or JAX's (memrec.jax, read through the same calls) when the
        JAX probe is on and JAX has started; never imports either."""
        a = self._jax()
        if a is not None and a.is_initialized():
            return a
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        try:
            if not torch.cuda.is_initialized():
                return None
        except Exception:
            return None
        self._attach_observer(torch)
        if self.sites.on and not self.sites.armed:
            self.sites.arm(torch)
        return torch

    def view(self, torch: Any) -> _peaks.JobView:
        """The allocator's counters as the probe reads and resets them,
        leaving the job its own view of its peaks (_peaks)."""
        for v in self.views:
            if v.C is torch._C:
                return v
        v = _peaks.view(torch._C)
        v.start()
        self.views.append(v)
        return v

    def _stop_views(self) -> None:
        for v in self.views:
            try:
                v.stop()
            except Exception:
                pass

    def rank(self) -> Optional[int]:
        if self._rank is not None:
            return self._rank
        dist = sys.modules.get("torch.distributed")
        try:
            if dist is not None and dist.is_available() and dist.is_initialized():
                self._rank = int(dist.get_rank())
                return self._rank
        except Exception:
            pass
        env = os.environ.get("RANK")
        if env is not None and env.lstrip("-").isdigit():
            return int(env)
        return None

    def devices(self, torch: Any, rescan: bool = False) -> List[int]:
        """The CUDA devices this process uses: those where its allocator holds
        memory. The list is made at the first call and refreshed by the timer
        thread, so a step does not pay for the scan."""
        if self._devs is not None and not rescan:
            return self._devs
        devs = []
        try:
            for d in range(int(torch.cuda.device_count())):
                st = self.view(torch).read(d)
                if st.get("reserved_bytes", {}).get("all", {}).get("current", 0) > 0:
                    devs.append(d)
        except Exception:
            pass
        # Cache only a list that found memory: right after CUDA starts nothing
        # is allocated yet, and an empty answer would hide the device.
        self._devs = devs or None
        self.devices_checked = time.monotonic()
        return devs

    def sample(self, reset_peak: bool = False, t: Optional[int] = None) -> None:
        """Queues one allocator sample per device in use; with reset_peak the
        per-step peak is read and then reset, so the next one is fresh. t
        (ns) dates the sample; by default it is now."""
        torch = self._torch()
        if torch is None:
            self.note_no_allocator()
            return
        self.allocator_seen = True
        if t is None:
            t = time.time_ns()
        rank = self.rank()
        figs = self._budget()
        view = self.view(torch)
        for d in self.devices(torch):
            stats = view.read_and_reset(d) if reset_peak else view.read(d)
            g = self.gpu(torch, d)
            self._put((_TORCH, t, g, rank, stats, None, figs.get(d), self.largest.get(g, 0)))

    def step(self, i: Optional[int]) -> None:
        """The end of step i: one queue item with the step's mark and, unless
        the previous step sample is closer than step_sample_ns, one
        allocator sample per device (its peak read, then reset). The common
        case, a step between samples, is a clock read and an append: on a
        CPU-bound job every microsecond here is one the step pays."""
        t = time.time_ns()
        q = self.queue
        if self.jax_wanted:
            a = self._jax()
            if a is not None:
                a.stepped = True  # a step ran: JAX's backend is up
        long_step = t - self.last_step_ns >= LONG_STEP_NS
        self.last_step_ns = t
        self.steps_seen += 1
        # The look at the segments is due: this step is sampled, however
        # close the last sample (a 3-step fit trial ends after it).
        segments_due = self.steps_seen >= SEGMENTS_AFTER_STEPS and t >= self.segments_due_ns
        if t - self.last_step_sample_ns < self.step_sample_ns and not long_step and not segments_due and not self.sites.armed:
            if len(q) < MAX_QUEUE:
                q.append((_STEP, t, i, self.step_rank, ()))
            else:
                self.dropped += 1
                self.dropped_total += 1
            return
        samples = ()
        if t - self.last_step_sample_ns >= self.step_sample_ns or long_step or segments_due:
            c0 = time.perf_counter_ns()
            self.step_rank = self.rank()  # refreshed with each sample
            torch = self._torch()
            if torch is None:
                self.note_no_allocator()
            else:
                self.allocator_seen = True
                self.last_step_sample_ns = t
                view = self.view(torch)
                samples = []
                figs = self._budget()
                for d in self.devices(torch):
                    g = self.gpu(torch, d)
                    samples.append((g, view.read_and_reset(d), figs.get(d), self.largest.get(g, 0)))
                if self.space_by_cost:
                    self._space_samples(time.perf_counter_ns() - c0)
                if segments_due:
                    # After the sample's cost is measured; this step's
                    # samples carry what it saw (a trial may end here).
                    self.segments_due_ns = t + int(SEGMENTS_INTERVAL * 1e9)
                    self.look_at_segments(torch)
                    samples = [(g, st, f, self.largest.get(g, 0)) for g, st, f, _ in samples]
                    self._send_trace(torch, t)
        self._put((_STEP, t, i, self.step_rank, samples))
        if self.sites.armed:
            self.sites.step(sys.modules.get("torch"))

    def _send_trace(self, torch: Any, t: int) -> None:
        """Queues the allocator trace's marks (once: the history is then off)."""
        for line in self.alloc_trace.finish(torch, self.devices(torch), lambda d: self.gpu(torch, d),
                                            self.pid, self.steps_seen, t, mark_line):
            self.put_line(line)

    def trace_at_exit(self) -> None:
        """At exit before the third step (an OOM ended the job, or it was
        short): the allocator trace so far, whose last failed request is
        the one that ended it. Never raises."""
        try:
            if not self.enabled or self.alloc_trace.state != "on":
                return
            torch = self._torch()
            if torch is None:
                return
            self._send_trace(torch, time.time_ns())
            self.flush(2.0)
        except Exception:
            pass

    def look_at_segments(self, torch: Any) -> None:
        """Keeps, per GPU, the largest segment of the caching allocator that
        has room free (at a step's end the activations' segments are free;
        one wholly in use, a parameter's or the optimizer's, is allocated
        once and strands nothing): the size of the job's largest request
        that comes and goes, which compare's projection adds at the limit
        (docs/analysis.md). With expandable_segments a segment grows and
        says nothing of a request: where any is expandable nothing is kept,
        and compare falls back to its default."""
        try:
            segs = torch.cuda.memory_snapshot()
        except Exception:
            return
        largest = {}
        for seg in segs or ():
            try:
                if seg.get("is_expandable"):
                    self.largest.clear()
                    self.segments_due_ns = 1 << 62  # not again
                    return
                size = int(seg["total_size"])
                used = seg.get("allocated_size")
                if used is None:
                    used = sum(int(b["size"]) for b in seg.get("blocks") or () if b.get("state") == "active_allocated")
                if int(used) >= size:
                    continue
                g = self.gpu(torch, int(seg["device"]))
            except Exception:
                continue
            largest[g] = max(largest.get(g, 0), size)
        for g, size in largest.items():
            if size > self.largest.get(g, 0):
                self.largest[g] = size

    def _budget(self) -> Dict[int, Any]:
        """The watched model's sums per CUDA device (empty without watch)."""
        w = self.watch
        if w is None:
            return {}
        try:
            return w.figures()
        except Exception:
            return {}

    def watched_blocks(self) -> Optional[List[Tuple[int, int, int, str]]]:
        """memrec.watch's storages sorted by address, for the site summaries;
        None without watch."""
        w = self.watch
        if w is None:
            return None
        try:
            return sorted(w.blocks())
        except Exception:
            return None

    def _budget_fields(self, fig: Any) -> str:
        w = self.watch
        if fig is None or w is None:
            return ""
        return w.fields(fig)

    def _space_samples(self, cost_ns: int) -> None:
        """Keeps the step samples within SAMPLE_BUDGET of the time: the
        spacing is the smoothed cost / SAMPLE_BUDGET, never below the base
        interval."""
        c = self.sample_cost_ns
        self.sample_cost_ns = cost_ns if c == 0 else (7 * c + cost_ns) // 8
        self.step_sample_ns = max(self.base_sample_ns, int(self.sample_cost_ns / SAMPLE_BUDGET))

    def gpu(self, torch: Any, device: int) -> int:
        """The index memrec's device samples give CUDA device ``device``: its
        NVML index, which differs when CUDA_VISIBLE_DEVICES hides some GPUs."""
        g = self.gpus.get(device)
        if g is None:
            ordinal = getattr(torch, "cuda_ordinal", None)  # JAX: its device's CUDA ordinal
            g = self.gpus[device] = nvml_index(torch, ordinal(device) if ordinal else device)
        return g

    def note_no_allocator(self, at_exit: bool = False) -> None:
        """Sends, once, a "probe" mark saying why there is no allocator view
        when the job imported torch: a torch built without CUDA (or without
        a GPU it can use) says so at the first sample it cannot take; one
        whose CUDA was never initialised, at exit without a sample sent.
        memrec analyze shows the note in place of "no probe"."""
        if self.noted or not self.enabled or (at_exit and self.allocator_seen):
            return
        torch = sys.modules.get("torch")
        if torch is None or self._jax() is not None:
            return
        version = str(getattr(torch, "__version__", "?"))
        try:
            available = bool(torch.cuda.is_available())
        except Exception:
            available = False
        if available and not at_exit:
            return  # CUDA may still start
        self.noted = True
        if available:
            text = "torch %s: CUDA was never initialised in this process: no allocator view" % version
        else:
            text = "torch %s without CUDA: no allocator view" % version
        self.mark("probe", text=text, pid=self.pid)

    def mark(self, kind: str, t: Optional[int] = None, **fields: Any) -> None:
        """Queues a mark at time t (ns; by default now)."""
        if "rank" not in fields:
            r = self.rank()
            if r is not None:
                fields["rank"] = r
        fields.setdefault("pid", self.pid)
        self._put((_MARK, time.time_ns() if t is None else t, kind, fields))

    def mark_with_sample(self, kind: str, **fields: Any) -> None:
        """Queues a mark and an allocator sample dated the same nanosecond,
        so the mark has the allocator's value at its own moment: memrec
        reads the value at a mark as the last sample at or before it."""
        t = time.time_ns()
        self.mark(kind, t=t, **fields)
        self.sample(t=t)

    # ---- OOM -----------------------------------------------------------

    def _attach_observer(self, torch: Any) -> None:
        if self.observer_attached:
            return
        self.observer_attached = True
        attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
        if attach is None:
            return
        try:
            attach(self._on_oom)
        except Exception:
            pass

    def _on_oom(self, device: int, requested: int, device_total: int, device_free: int) -> None:
        """torch's out-of-memory observer: called before the error is raised."""
        try:
            if self.sites.armed:
                self.sites.send(sys.modules.get("torch"), "oom", devices=[device])
        except Exception:
            pass
        try:
            text = "CUDA out of memory. Tried to allocate %s on GPU %d (%s free of %s)" % (
                _size(requested), device, _size(device_free), _size(device_total))
            self.report_oom(device, text)
        except Exception:
            pass

    def report_oom(self, device: int, text: str, allocator: Any = None) -> None:
        """Sends an oom mark with the allocator's summary and a last sample."""
        torch = allocator if allocator is not None else sys.modules.get("torch")
        summary = ""
        try:
            summary = torch.cuda.memory_summary(device)
        except Exception:
            pass
        if summary:
            text = text + "\n\n" + summary
        self.oom_reported = time.monotonic()
        gpu = self.gpu(torch, device)
        self.mark("oom", gpu=gpu, pid=self.pid, text=text[: 60 << 10])
        try:
            t = time.time_ns()
            self._put((_TORCH, t, gpu, self.rank(), self.view(torch).read(device), None, self._budget().get(device),
                       self.largest.get(gpu, 0)))
        except Exception:
            pass
        self.flush(1.0)

    def exception_oom(self, exc: BaseException) -> None:
        """Reports an OOM exception that the observer did not (older torch)."""
        if time.monotonic() - self.oom_reported < 5.0:
            return
        a = self._jax()
        if a is not None and a.is_oom(exc):
            a.ooms += 1
            self.report_oom(0, str(exc).split("\n")[0], allocator=a)
            return
        torch = sys.modules.get("torch")
        oom_type = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None) if torch else None
        if oom_type is None or not isinstance(exc, oom_type):
            # cuBLAS and cuDNN report their own allocations' failures as a
            # RuntimeError, outside the caching allocator and its observer.
            if not any(s in str(exc) for s in _OOM_TEXTS):
                return
        device = 0
        try:
            device = int(torch.cuda.current_device())
        except Exception:
            pass
        self.report_oom(device, str(exc).split("\n")[0])


_OOM_TEXTS = ("out of memory", "ALLOC_FAILED", "cudaErrorMemoryAllocation")


def _env_seconds(name: str, default: float) -> float:
    """A duration in milliseconds from the environment, in seconds."""
    try:
        return float(os.environ[name]) / 1000.0
    except (KeyError, ValueError):
        return default


def _uuid_key(u: str) -> str:
    """A GPU UUID without its "GPU-" prefix and dashes, in lower case: the
    form NVML ("GPU-8a1b...") and torch ("8a1b...") agree on."""
    u = u.strip().lower()
    if u.startswith("gpu-"):
        u = u[4:]
    return u.replace("-", "")


def nvml_index(torch: Any, device: int, env: Optional[Mapping[str, str]] = None) -> int:
    """The NVML index of CUDA device ``device``. memrec record lists its GPUs
    in MEMREC_GPUS ("0=GPU-uuid,1=GPU-uuid"); the device's UUID finds it
    there. Without a UUID, CUDA_VISIBLE_DEVICES ("2,3" or UUID prefixes)
    tells; without that, CUDA and NVML number alike."""
    env = os.environ if env is None else env
    table = {}
    for part in env.get("MEMREC_GPUS", "").split(","):
        index, _, uuid = part.partition("=")
        if uuid and index.strip().isdigit():
            table[_uuid_key(uuid)] = int(index)
    try:
        uuid = _uuid_key(str(torch.cuda.get_device_properties(device).uuid))
        if uuid in table:
            return table[uuid]
    except Exception:
        pass
    visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if device < len(visible):
        v = visible[device]
        if v.isdigit():
            return int(v)
        key = _uuid_key(v)
        found = [i for u, i in table.items() if key and u.startswith(key)]
        if len(found) == 1:
            return found[0]
    return device


def _size(n: float) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return "%.2f %s" % (n, unit)
        n /= 1024
