"""The probe's OOM reports: torch's out-of-memory observer where it has one,
else the exception the job raised; each an "oom" mark with the allocator's
summary and a last sample.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from ._sender import _TORCH


class OOMReports:
    """The Probe's OOM methods (it derives from this)."""

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


def _size(n: float) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return "%.2f %s" % (n, unit)
        n /= 1024
