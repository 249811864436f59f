"""The probe: reads PyTorch's caching allocator at the job's steps and
sends marks to memrec through _sender's queue.

A step costs the training thread a clock read and an append: on a fast job
every microsecond here is one each step pays. So close steps share one
allocator sample, spaced by the sample's own measured cost, and a step that
lasted LONG_STEP has its own (bench/README.md, "The probe's costs", has
the figures). Nothing here raises into the training code.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from . import _alloctrace, _budget, _peaks, _sites
from ._devices import nvml_index
from ._lines import mark_line, stats_line, step_line  # noqa: F401 (the wire test formats through _probe)
from ._oom import OOMReports
from ._sender import _MARK, _STEP, _TORCH, Sender

TIMER_INTERVAL = 0.25  # an allocator sample this often when no step took one
STEP_SAMPLE_INTERVAL = 0.005  # steps closer than this share an allocator sample ...
SAMPLE_BUDGET = 0.0025  # ... and closer than the sample's own cost / this, ...
LONG_STEP = 0.010  # ... unless the step lasted this long: such a step has its own sample

LONG_STEP_NS = int(LONG_STEP * 1e9)
# The allocator's segments are looked at after this many steps (the warm-up
# has made its largest requests by then) and then at most this often (a look
# is one memory_snapshot, milliseconds).
SEGMENTS_AFTER_STEPS = 3
SEGMENTS_INTERVAL = 60.0


class Probe(Sender, OOMReports):
    """One per process. Its public methods never raise.

    Once after the third step and then at most once a minute, a step sample
    also looks at the allocator's segments: the largest with room free is
    the size of the job's largest request that comes and goes, which compare
    --by adds at the limit. Each sample from that step on carries it as
    largest_segment_bytes."""

    def __init__(self, path: Optional[str] = None, timer: Optional[float] = None,
                 send_interval: Optional[float] = None) -> None:
        Sender.__init__(self, path, send_interval)
        self.timer_interval = TIMER_INTERVAL if timer is None else timer
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

    def on_stop(self) -> None:
        """Sending stopped: the job's peaks are its counters' again once no shadow is needed."""
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
            if len(q) < self.max_queue:
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


def _env_seconds(name: str, default: float) -> float:
    """A duration in milliseconds from the environment, in seconds."""
    try:
        return float(os.environ[name]) / 1000.0
    except (KeyError, ValueError):
        return default
