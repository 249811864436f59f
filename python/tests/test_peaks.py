"""The job's view of its peaks under the probe (memrec/_peaks.py), with a
fake torch whose Python layer calls torch._C as torch's own does
(torch/cuda/memory.py, torch/accelerator/memory.py)."""
import collections
import os
import random
import sys
import threading
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import memrec  # noqa: E402
from memrec import _peaks, _probe  # noqa: E402
from test_probe import Server, restore_modules, save_modules  # noqa: E402

STATS = ("allocated_bytes", "reserved_bytes", "active_bytes", "allocation")
POOLS = ("all", "large_pool", "small_pool")
SMALL = 1 << 20  # requests up to this size come from the small pool


class Allocator:
    """The counters of PyTorch's caching allocator for a few devices:
    current, peak, allocated and freed per stat and pool, a pool-less stat
    (oversize_allocations) and scalars, as _cuda_memoryStats gives them."""

    def __init__(self, devices):
        self.dev = [self._fresh() for _ in range(devices)]
        self.reserved = [0] * devices

    @staticmethod
    def _fresh():
        st = {name: {pool: {"current": 0, "peak": 0, "allocated": 0, "freed": 0} for pool in POOLS} for name in STATS}
        st["oversize_allocations"] = {"current": 0, "peak": 0, "allocated": 0, "freed": 0}
        return st

    def _add(self, d, name, pool, n):
        for p in ("all", pool):
            s = self.dev[d][name][p]
            s["current"] += n
            s["peak"] = max(s["peak"], s["current"])
            s["allocated" if n > 0 else "freed"] += abs(n)

    def alloc(self, n, d=0):
        pool = "small_pool" if n <= SMALL else "large_pool"
        for name in ("allocated_bytes", "active_bytes"):
            self._add(d, name, pool, n)
        self._add(d, "allocation", pool, 1)
        cur = self.dev[d]["allocated_bytes"]["all"]["current"]
        if cur > self.reserved[d]:
            self._add(d, "reserved_bytes", pool, cur - self.reserved[d])
            self.reserved[d] = cur
        return (n, d, pool)

    def free(self, block):
        n, d, pool = block
        for name in ("allocated_bytes", "active_bytes"):
            self._add(d, name, pool, -n)
        self._add(d, "allocation", pool, -1)

    def stats(self, d):
        if not 0 <= d < len(self.dev):
            raise RuntimeError("Invalid device argument %d" % d)
        out = {k: {p: dict(s) for p, s in v.items()} if k in STATS else dict(v) for k, v in self.dev[d].items()}
        out.update(num_alloc_retries=0, num_ooms=0)
        return out

    def reset_peak(self, d):
        if not 0 <= d < len(self.dev):
            raise RuntimeError("Invalid device argument %d" % d)
        for k, v in self.dev[d].items():
            for s in (v.values() if k in STATS else [v]):
                s["peak"] = s["current"]


def fake_torch(devices=1, accelerator=True):
    """torch with its Python memory functions written as torch's are: each
    looks up its torch._C entry point at call time."""
    a = Allocator(devices)
    torch = types.ModuleType("torch")
    torch._allocator = a
    C = types.SimpleNamespace(_cuda_memoryStats=a.stats, _cuda_resetPeakMemoryStats=a.reset_peak)
    if accelerator:
        C._accelerator_getDeviceStats = a.stats
        C._accelerator_resetPeakStats = a.reset_peak
    torch._C = C
    current = [0]

    def index(device):
        return current[0] if device is None else int(device)

    def flatten(nested):
        out = []

        def walk(prefix, obj):
            if isinstance(obj, dict):
                for k, v in obj.items():
                    walk(prefix + "." + k if prefix else k, v)
            else:
                out.append((prefix, obj))
        walk("", nested)
        out.sort()
        return collections.OrderedDict(out)

    def memory_stats(device=None):
        return flatten(torch._C._cuda_memoryStats(index(device)))

    torch.cuda = types.SimpleNamespace(
        is_initialized=lambda: True, device_count=lambda: devices, current_device=lambda: current[0],
        memory_snapshot=lambda: [], OutOfMemoryError=MemoryError,
        memory_stats=memory_stats,
        memory_stats_as_nested_dict=lambda device=None: torch._C._cuda_memoryStats(index(device)),
        max_memory_allocated=lambda device=None: memory_stats(device).get("allocated_bytes.all.peak", 0),
        max_memory_reserved=lambda device=None: memory_stats(device).get("reserved_bytes.all.peak", 0),
        reset_peak_memory_stats=lambda device=None: torch._C._cuda_resetPeakMemoryStats(index(device)),
    )
    if accelerator:
        torch.accelerator = types.SimpleNamespace(
            memory_stats=lambda device=None: flatten(torch._C._accelerator_getDeviceStats(index(device))),
            max_memory_allocated=lambda device=None: flatten(
                torch._C._accelerator_getDeviceStats(index(device))).get("allocated_bytes.all.peak", 0),
            reset_peak_memory_stats=lambda device=None: torch._C._accelerator_resetPeakStats(index(device)),
        )
    return torch


class PeakViewTest(unittest.TestCase):
    def setUp(self):
        self.saved = save_modules("torch", "torch.distributed")
        self.env = dict(os.environ)
        for k in ("CUDA_VISIBLE_DEVICES", "MEMREC_GPUS", "MEMREC_ALLOC_TRACE", "MEMREC_SITES", "RANK"):
            os.environ.pop(k, None)
        self.probes = []

    def tearDown(self):
        for p in self.probes:
            p.close()
        restore_modules(self.saved)
        os.environ.clear()
        os.environ.update(self.env)
        memrec._instance = None

    def probe(self, torch, listening=True):
        """A probe that samples (and resets the peaks) at every step."""
        sys.modules["torch"] = torch
        srv = Server() if listening else None
        p = _probe.Probe(path=srv.path if srv else "", timer=0)
        p.step_sample_ns = p.base_sample_ns = 0
        p.space_by_cost = False
        memrec._instance = p
        self.probes.append(p)
        return p, srv

    def test_a_scripts_peak_is_the_runs(self):
        # Allocate big, then steps whose peaks are smaller: the script's own
        # max_memory_allocated() at the end is the big one, the probe's
        # samples the peak of each step.
        torch = fake_torch()
        a = torch._allocator
        p, srv = self.probe(torch)
        weights = a.alloc(100 << 20)
        big = a.alloc(900 << 20)
        a.free(big)
        step_peaks = []
        for i in range(5):
            act = a.alloc((10 + i) << 20)
            step_peaks.append((100 + 10 + i) << 20)
            a.free(act)
            memrec.step(i)
        self.assertEqual(torch.cuda.max_memory_allocated(), 1000 << 20)
        self.assertEqual(torch.cuda.memory_stats()["allocated_bytes.all.peak"], 1000 << 20)
        self.assertEqual(torch.cuda.memory_stats()["allocated_bytes.large_pool.peak"], 1000 << 20)
        self.assertEqual(torch.cuda.memory_stats()["allocation.all.peak"], 2)
        self.assertEqual(torch.cuda.memory_stats()["oversize_allocations.peak"], 0)
        self.assertEqual(torch.cuda.max_memory_reserved(), 1000 << 20)
        self.assertEqual(torch.accelerator.max_memory_allocated(), 1000 << 20)
        memrec.flush()
        lines = srv.wait(lambda ls: sum(1 for l in ls if l["type"] == "torch") >= 5)
        got = [l["peak_allocated_bytes"] for l in lines if l["type"] == "torch"]
        # The first sample also saw the big request (nothing reset before it).
        self.assertEqual(got, [1000 << 20] + step_peaks[1:])
        a.free(weights)
        srv.close()

    def test_the_jobs_view_is_as_without_memrec(self):
        # A script of random requests, frees, reads and resets on two
        # devices: every figure it reads is the same with the probe
        # stepping between its calls as with no probe at all (the run
        # without the probe is the reference, so no figure is derived from
        # the code under test).
        for seed in range(8):
            with self.subTest(seed=seed):
                want = self.script(seed, probe=False)
                got = self.script(seed, probe=True)
                self.assertEqual(got[:-1], want)
                self.assertEqual(got[-1], got[-2])  # the probe's stop changes nothing
                self.assertGreater(len({r for r in want if isinstance(r, int)}), 5)

    def script(self, seed, probe):
        rnd = random.Random(seed)
        torch = fake_torch(devices=2)
        a = torch._allocator
        if probe:
            p, srv = self.probe(torch)
        readings = []
        live = []
        for i in range(300):
            op = rnd.random()
            d = rnd.randrange(2)
            if op < 0.35:
                live.append(a.alloc(rnd.choice((rnd.randrange(1, SMALL), rnd.randrange(SMALL, 64 * SMALL))), d))
            elif op < 0.65 and live:
                a.free(live.pop(rnd.randrange(len(live))))
            elif op < 0.75:
                readings.append(torch.cuda.max_memory_allocated(d))
            elif op < 0.8:
                readings.append(dict(torch.cuda.memory_stats(d)))
            elif op < 0.84:
                readings.append(torch.accelerator.max_memory_allocated(d))
            elif op < 0.88:
                readings.append(("reset", d, torch.cuda.reset_peak_memory_stats(d)))
            elif op < 0.9:
                readings.append(("reset", d, torch.accelerator.reset_peak_memory_stats(d)))
            else:
                memrec.step(i)
        readings.append([dict(torch.cuda.memory_stats(d)) for d in range(2)])
        if probe:
            p.close()
            srv.close()
            readings.append([dict(torch.cuda.memory_stats(d)) for d in range(2)])
        return readings

    def test_the_probes_step_peak_survives_the_jobs_reset(self):
        # A job that resets the peak inside a step (every figure it logs is
        # per step too) does not take that part of the step from the probe.
        torch = fake_torch()
        a = torch._allocator
        p, srv = self.probe(torch)
        a.alloc(7)
        memrec.step(0)
        x = a.alloc(500)
        a.free(x)
        torch.cuda.reset_peak_memory_stats()
        y = a.alloc(200)
        a.free(y)
        self.assertEqual(torch.cuda.max_memory_allocated(), 207)  # the job's, as without memrec
        memrec.step(1)
        memrec.flush()
        lines = srv.wait(lambda ls: sum(1 for l in ls if l["type"] == "torch") >= 2)
        self.assertEqual([l["peak_allocated_bytes"] for l in lines if l["type"] == "torch"], [7, 507])
        srv.close()

    def test_devices_apart(self):
        torch = fake_torch(devices=2)
        a = torch._allocator
        self.probe(torch)
        for d, n in ((0, 700), (1, 300)):
            a.free(a.alloc(n, d))
            a.alloc(1, d)
        memrec.step(0)
        a.free(a.alloc(50, 1))
        memrec.step(1)
        torch.cuda.reset_peak_memory_stats(0)
        self.assertEqual(torch.cuda.max_memory_allocated(0), 1)
        self.assertEqual(torch.cuda.max_memory_allocated(1), 300)

    def test_wrappers_are_invisible_and_go_when_the_probe_stops(self):
        torch = fake_torch()
        a = torch._allocator
        orig_stats, orig_reset = torch._C._cuda_memoryStats, torch._C._cuda_resetPeakMemoryStats
        p, srv = self.probe(torch)
        self.assertIs(torch._C._cuda_memoryStats, orig_stats)  # nothing wrapped before the probe resets
        a.free(a.alloc(800))
        memrec.step(0)
        self.assertIsNot(torch._C._cuda_memoryStats, orig_stats)
        self.assertEqual(torch._C._cuda_memoryStats.__name__, orig_stats.__name__)
        for call in (lambda: torch._C._cuda_memoryStats(5), lambda: torch._C._cuda_resetPeakMemoryStats(5)):
            with self.assertRaisesRegex(RuntimeError, "Invalid device argument 5"):
                call()
        with self.assertRaises(TypeError):
            torch._C._cuda_memoryStats(0, 1)
        self.assertIs(type(torch._C._cuda_memoryStats(0)), type(orig_stats(0)))
        self.assertIsNone(torch._C._cuda_resetPeakMemoryStats(0))
        # The job reset: nothing to keep, so the probe's stop puts torch's back.
        p.close()
        self.assertIs(torch._C._cuda_memoryStats, orig_stats)
        self.assertIs(torch._C._cuda_resetPeakMemoryStats, orig_reset)
        self.assertEqual(torch._C._accelerator_getDeviceStats, orig_stats)  # a bound method: equal, not the same
        srv.close()

    def test_a_shadow_still_needed_keeps_the_wrappers_until_the_jobs_reset(self):
        torch = fake_torch()
        a = torch._allocator
        orig_stats = torch._C._cuda_memoryStats
        p, srv = self.probe(torch)
        a.free(a.alloc(800))
        memrec.step(0)
        a.free(a.alloc(10))
        memrec.step(1)
        p.close()
        self.assertEqual(torch.cuda.max_memory_allocated(), 800)
        self.assertIsNot(torch._C._cuda_memoryStats, orig_stats)
        # The stopped probe resets nothing: a later step leaves the counters.
        p.view(torch).read_and_reset(0)
        self.assertEqual(torch.cuda.max_memory_allocated(), 800)
        torch.cuda.reset_peak_memory_stats()
        self.assertIs(torch._C._cuda_memoryStats, orig_stats)
        self.assertEqual(torch.cuda.max_memory_allocated(), 0)
        srv.close()

    def test_counters_past_the_shadow_free_the_wrappers(self):
        torch = fake_torch()
        a = torch._allocator
        orig_stats = torch._C._cuda_memoryStats
        p, srv = self.probe(torch)
        a.free(a.alloc(800))
        memrec.step(0)
        p.close()
        self.assertIsNot(torch._C._cuda_memoryStats, orig_stats)
        x = a.alloc(900)
        y = a.alloc(SMALL)
        a.free(y)
        self.assertEqual(torch.cuda.max_memory_allocated(), 900 + SMALL)
        self.assertIs(torch._C._cuda_memoryStats, orig_stats)
        a.free(x)
        srv.close()

    def test_a_wrapper_over_ours_stays(self):
        torch = fake_torch()
        a = torch._allocator
        p, srv = self.probe(torch)
        memrec.step(0)
        ours = torch._C._cuda_memoryStats
        theirs = lambda d: ours(d)  # noqa: E731 (another library's wrapper)
        torch._C._cuda_memoryStats = theirs
        a.free(a.alloc(64))
        p.close()
        self.assertIs(torch._C._cuda_memoryStats, theirs)
        self.assertEqual(torch.cuda.max_memory_allocated(), 64)
        srv.close()

    def test_readers_in_other_threads_never_see_a_lower_peak(self):
        # A thread reads the job's peak while the training thread steps:
        # every reading is the big request's, however the probe's reset
        # falls between its calls.
        torch = fake_torch()
        a = torch._allocator
        self.probe(torch, listening=True)
        a.free(a.alloc(1 << 30))
        seen = []
        done = threading.Event()

        def reader():
            while not done.is_set():
                seen.append(torch.cuda.max_memory_allocated(0))
        t = threading.Thread(target=reader)
        t.start()
        for i in range(2000):
            a.free(a.alloc(100 + i))
            memrec.step(i)
        done.set()
        t.join()
        self.assertTrue(seen)
        self.assertEqual(set(seen), {1 << 30})

    def test_without_a_recorder_nothing_is_wrapped(self):
        torch = fake_torch()
        orig = torch._C._cuda_memoryStats
        self.probe(torch, listening=False)
        memrec.step(0)
        self.assertIs(torch._C._cuda_memoryStats, orig)

    def test_peaks_walks_every_peak(self):
        a = Allocator(1)
        paths = {path for path, _ in _peaks.peaks(a.stats(0))}
        self.assertEqual(len(paths), len(STATS) * len(POOLS) + 1)
        self.assertIn(("oversize_allocations",), paths)


if __name__ == "__main__":
    unittest.main()
