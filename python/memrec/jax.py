"""memrec's probe for JAX: the allocator view of a JAX training job.

JAX preallocates 75 % of each GPU by default, so the device view (NVML) says
little about the job: the memory is taken at start and held. What the job
uses is in ``jax.Device.memory_stats()``, which this module reads into the
same allocator samples the PyTorch probe sends:

    memory_stats()               memrec's allocator sample
    bytes_in_use              -> allocated_bytes, active_bytes
    pool_bytes (else bytes_limit) -> reserved_bytes (what the allocator holds,
                                    or may hold without a pool)
    peak_bytes_in_use         -> peak_allocated_bytes (see below)
    largest_free_block_bytes  -> inactive_split_bytes: free memory of the pool
                                 outside its largest free block, which no
                                 allocation larger than that block can use
                                 (a fragmentation figure; 0 when not reported)
    (OOMs caught)             -> ooms

JAX's peak is the process's peak, and cannot be reset. The peak of a step is
therefore exact when the process's peak rose during the step (the new peak
was reached in it), and otherwise the highest bytes_in_use the probe read
since the previous step's sample: a lower bound.

Use it with ``memrec record --jax -- python train.py`` (nothing to change in
the script), or ``import memrec.jax`` in the script; ``memrec.step()``,
``memrec.epoch()`` and ``memrec.mark()`` then work as with PyTorch. An
uncaught ``XlaRuntimeError: RESOURCE_EXHAUSTED`` is reported as an OOM mark
with the allocator's figures at that moment; ``memrec.report_oom(e)``
reports one the script catches itself. Standard library and jax only; jax is
never imported here, only read once the script has imported it.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Dict, List, Optional

__all__ = ["enable", "Allocator", "torch_stats"]

GPU_PLATFORMS = ("gpu", "cuda", "rocm")


def torch_stats(ms: Dict[str, Any], peak: Optional[int] = None, ooms: int = 0) -> Dict[str, Any]:
    """One device's memory_stats() in the shape of PyTorch's memory stats,
    which the probe formats (see the table in this module's doc)."""
    def get(key: str) -> int:
        try:
            return int(ms.get(key) or 0)
        except (TypeError, ValueError):
            return 0

    in_use = get("bytes_in_use")
    reserved = get("pool_bytes") or get("bytes_limit")
    largest = ms.get("largest_free_block_bytes")
    frag = 0
    if largest is not None and reserved:
        frag = max(0, reserved - in_use - get("largest_free_block_bytes"))
    if peak is None:
        peak = get("peak_bytes_in_use") or in_use
    return {
        "allocated_bytes": {"all": {"current": in_use, "peak": peak}},
        "reserved_bytes": {"all": {"current": reserved}},
        "active_bytes": {"all": {"current": in_use}},
        "inactive_split_bytes": {"all": {"current": frag}},
        "segment": {"all": {"current": 0}},
        "num_alloc_retries": 0,
        "num_ooms": ooms,
    }


class _Peak:
    """What the step peak of one device is computed from."""

    __slots__ = ("at_reset", "seen", "last_peak", "last_in_use")

    def __init__(self) -> None:
        self.at_reset = -1  # the process's peak at the last reset; -1: none yet
        self.seen = 0  # the highest bytes_in_use read since the reset
        self.last_peak = 0
        self.last_in_use = 0


class Allocator:
    """JAX's allocators read through the few calls the probe makes on torch
    (``cuda.device_count``, ``_C._cuda_memoryStats``, ...), so the probe's
    step, epoch, timer and OOM paths serve JAX unchanged. Device d is the
    d-th local GPU device of jax.local_devices()."""

    def __init__(self, jax: Any) -> None:
        self.jax = jax
        self.cuda = self
        self._C = self
        self.ooms = 0
        self.stepped = False  # a step was marked: the backend is surely up
        self.peaks: Dict[int, _Peak] = {}
        self._devs: Optional[List[Any]] = None

    class OutOfMemoryError(Exception):
        """Never raised: JAX raises XlaRuntimeError (see is_oom)."""

    # -- the calls the probe makes ----------------------------------------

    def is_initialized(self) -> bool:
        """True once JAX has started a backend. The probe's timer thread
        must not be the one to start it (that would preallocate the GPU
        before the script could configure JAX), so before the first step
        this looks at jax's backend table without touching it."""
        if self._devs is not None or self.stepped:
            return True
        xb = sys.modules.get("jax._src.xla_bridge")
        return bool(getattr(xb, "_backends", None))

    def devices(self) -> List[Any]:
        if self._devs is None:
            devs = []
            for d in self.jax.local_devices():
                if getattr(d, "platform", "") in GPU_PLATFORMS:
                    devs.append(d)
            self._devs = devs
        return self._devs

    def device_count(self) -> int:
        try:
            return len(self.devices())
        except Exception:
            return 0

    def current_device(self) -> int:
        return 0

    def get_device_properties(self, d: int) -> Any:
        """Only the fields the probe reads; JAX has no UUID, so the NVML
        index comes from the device's CUDA ordinal (local_hardware_id)
        through CUDA_VISIBLE_DEVICES."""
        raise LookupError("no UUID in JAX")

    def cuda_ordinal(self, d: int) -> int:
        dev = self.devices()[d]
        hw = getattr(dev, "local_hardware_id", None)
        return int(hw) if hw is not None else d

    def _cuda_memoryStats(self, d: int) -> Dict[str, Any]:
        ms = self.devices()[d].memory_stats() or {}
        p = self.peaks.get(d)
        if p is None:
            p = self.peaks[d] = _Peak()
        in_use = int(ms.get("bytes_in_use") or 0)
        peak_all = int(ms.get("peak_bytes_in_use") or in_use)
        p.seen = max(p.seen, in_use)
        p.last_peak, p.last_in_use = peak_all, in_use
        if p.at_reset < 0 or peak_all > p.at_reset:
            peak = peak_all  # reached since the last reset (or none yet)
        else:
            peak = p.seen
        return torch_stats(ms, peak=peak, ooms=self.ooms)

    def _cuda_resetPeakMemoryStats(self, d: int) -> None:
        p = self.peaks.get(d)
        if p is None:
            return
        p.at_reset = p.last_peak
        p.seen = p.last_in_use

    def memory_summary(self, d: int = 0) -> str:
        try:
            ms = self.devices()[d].memory_stats() or {}
        except Exception:
            return ""
        return "\n".join("%-28s %d" % (k, v) for k, v in sorted(ms.items()) if isinstance(v, int))

    # -- OOMs --------------------------------------------------------------

    @staticmethod
    def is_oom(exc: BaseException) -> bool:
        """XLA's out-of-memory error: an XlaRuntimeError (or JaxRuntimeError)
        whose message starts with RESOURCE_EXHAUSTED."""
        return "RESOURCE_EXHAUSTED" in str(exc)


def enable(probe: Any = None) -> bool:
    """Makes the probe read JAX's allocators (``memrec record --jax`` calls
    it at start-up through MEMREC_JAX=1). Returns whether the probe is
    recording. jax is read from sys.modules when the script has imported it;
    until then the probe waits."""
    if probe is None:
        import memrec

        probe = memrec._get()
    probe.jax_wanted = True
    return bool(probe.enabled)


def allocator(probe: Any) -> Optional[Allocator]:
    """The probe's Allocator, made once jax is imported; None before."""
    a = getattr(probe, "jax_allocator", None)
    if a is not None:
        return a
    jax = sys.modules.get("jax")
    if jax is None or not isinstance(jax, types.ModuleType) or not hasattr(jax, "local_devices"):
        return None
    a = probe.jax_allocator = Allocator(jax)
    return a


# `import memrec.jax` in a script turns the JAX probe on.
try:
    enable()
except Exception:
    pass
