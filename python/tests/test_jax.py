"""Tests of memrec's JAX probe (memrec.jax) with a fake jax module: no GPU,
no jax needed. The real check, on an H200 with jax, is
bench/validation/jax_check.sh.

Run: python3 -m unittest discover -s python/tests
"""
import os
import sys
import time
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import memrec  # noqa: E402
from memrec import _probe  # noqa: E402
from memrec import jax as mjax  # noqa: E402
from test_probe import Server, save_modules, restore_modules  # noqa: E402

GiB = 1 << 30


class FakeDevice:
    """A jax.Device with the memory_stats() of XLA's BFC allocator."""

    def __init__(self, id, hw, platform="gpu"):
        self.id = id
        self.local_hardware_id = hw
        self.platform = platform
        self.in_use = 1 << 20
        self.peak = 1 << 20
        self.pool = 100 * GiB
        self.largest_free = 100 * GiB - (1 << 20)
        self.reads = 0

    def alloc(self, n):
        self.in_use += n
        self.peak = max(self.peak, self.in_use)
        self.largest_free -= n

    def memory_stats(self):
        self.reads += 1
        if self.platform == "cpu":
            return None
        return {"bytes_in_use": self.in_use, "peak_bytes_in_use": self.peak, "bytes_limit": 105 * GiB,
                "pool_bytes": self.pool, "largest_free_block_bytes": self.largest_free, "num_allocs": 7}


def make_fake_jax(gpus=1):
    jax = types.ModuleType("jax")
    jax.devs = [FakeDevice(i, hw=i) for i in range(gpus)] + [FakeDevice(99, hw=0, platform="cpu")]
    jax.calls = 0

    def local_devices():
        jax.calls += 1
        return list(jax.devs)

    jax.local_devices = local_devices
    return jax


class XlaRuntimeError(RuntimeError):
    pass


class JaxProbeTest(unittest.TestCase):
    def setUp(self):
        self.saved = save_modules("jax", "jax._src.xla_bridge", "torch")
        sys.modules.pop("torch", None)
        sys.modules.pop("jax._src.xla_bridge", None)
        self.env = dict(os.environ)
        for k in ("CUDA_VISIBLE_DEVICES", "MEMREC_GPUS", "RANK"):
            os.environ.pop(k, None)
        os.environ["MEMREC_JAX"] = "1"
        os.environ["MEMREC_STEP_SAMPLE_MS"] = "0"  # a sample at every step
        self.srv = Server()

    def tearDown(self):
        if memrec._instance is not None:
            memrec._instance.close()
        self.srv.close()
        restore_modules(self.saved)
        os.environ.clear()
        os.environ.update(self.env)
        memrec._instance = None

    def probe(self, timer=0):
        p = _probe.Probe(path=self.srv.path, timer=timer)
        memrec._instance = p
        return p

    def samples(self, n):
        lines = self.srv.wait(lambda ls: len([l for l in ls if l["type"] == "torch"]) >= n)
        return [l for l in lines if l["type"] == "torch"], [l for l in lines if l["type"] == "mark"]

    def test_mapping(self):
        ms = {"bytes_in_use": 300, "peak_bytes_in_use": 900, "pool_bytes": 1000, "bytes_limit": 2000,
              "largest_free_block_bytes": 500}
        st = mjax.torch_stats(ms)
        self.assertEqual(st["allocated_bytes"]["all"], {"current": 300, "peak": 900})
        self.assertEqual(st["reserved_bytes"]["all"]["current"], 1000)  # the pool, not the limit
        # 700 free in the pool, 500 of it in one block: 200 no larger allocation can use.
        self.assertEqual(st["inactive_split_bytes"]["all"]["current"], 200)
        # Without a pool (platform allocator) the limit; without a largest block, 0.
        st = mjax.torch_stats({"bytes_in_use": 300, "bytes_limit": 2000})
        self.assertEqual(st["reserved_bytes"]["all"]["current"], 2000)
        self.assertEqual(st["inactive_split_bytes"]["all"]["current"], 0)
        self.assertEqual(st["allocated_bytes"]["all"]["peak"], 300)

    def test_steps_carry_bytes_in_use_and_the_step_peak(self):
        jax = make_fake_jax(gpus=2)
        sys.modules["jax"] = jax
        p = self.probe()
        d0, d1 = jax.devs[0], jax.devs[1]
        want = []
        for i in range(4):
            d0.alloc(1000)  # a leak of 1000 B a step on GPU 0
            if i == 2:
                d1.alloc(5 * GiB)  # a new peak on GPU 1, freed within the step
                d1.alloc(-5 * GiB)
            want.append((i, d0.in_use, d1.in_use))
            memrec.step(i)
        memrec.flush()
        torch_lines, marks = self.samples(8)
        self.assertEqual([m["step"] for m in marks if m["kind"] == "step"], [0, 1, 2, 3])
        by = {(s["t_ns"], s["gpu"]): s for s in torch_lines}
        steps = sorted(m["t_ns"] for m in marks if m["kind"] == "step")
        for (i, a0, a1), t in zip(want, steps):
            self.assertEqual(by[(t, 0)]["allocated_bytes"], a0)
            self.assertEqual(by[(t, 1)]["allocated_bytes"], a1)
            self.assertEqual(by[(t, 0)]["reserved_bytes"], 100 * GiB)
        # GPU 0's peak rises with every step: each step's peak is exact.
        self.assertEqual([by[(t, 0)]["peak_allocated_bytes"] for t in steps], [a0 for _, a0, _ in want])
        # GPU 1: the peak of step 2 is the 5 GiB burst (the process's peak
        # rose in it); steps 1 and 3 did not raise it: bytes in use.
        peaks1 = [by[(t, 1)]["peak_allocated_bytes"] for t in steps]
        self.assertEqual(peaks1[2], (1 << 20) + 5 * GiB)
        self.assertEqual(peaks1[3], 1 << 20)
        # The fragmentation figure: pool - in use - largest free block.
        s = by[(steps[3], 0)]
        self.assertEqual(s["inactive_split_bytes"], 0)
        self.assertEqual(s["pid"], os.getpid())

    def test_timer_never_starts_the_backend(self):
        jax = make_fake_jax()
        sys.modules["jax"] = jax
        p = self.probe(timer=0.02)
        time.sleep(0.2)  # ten timer wakes
        self.assertEqual(jax.calls, 0, "the timer thread listed devices before JAX had a backend")
        # Once JAX has a backend (or a step ran) the timer samples.
        sys.modules["jax._src.xla_bridge"] = types.SimpleNamespace(_backends={"cuda": object()})
        torch_lines, _ = self.samples(1)
        self.assertGreater(len(torch_lines), 0)
        self.assertEqual(torch_lines[0]["allocated_bytes"], 1 << 20)
        p.close()

    def test_gpu_index_from_cuda_visible_devices(self):
        os.environ["CUDA_VISIBLE_DEVICES"] = "3,5"
        jax = make_fake_jax(gpus=2)
        sys.modules["jax"] = jax
        self.probe()
        memrec.step(0)
        memrec.flush()
        torch_lines, _ = self.samples(2)
        self.assertEqual(sorted(s["gpu"] for s in torch_lines), [3, 5])

    def test_resource_exhausted_is_an_oom(self):
        jax = make_fake_jax()
        sys.modules["jax"] = jax
        p = self.probe()
        memrec.step(0)
        err = XlaRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 80.00GiB.\nmore")
        memrec.report_oom(err)
        memrec.report_oom(ValueError("not memory"))
        memrec.flush()
        lines = self.srv.wait(lambda ls: any(l.get("kind") == "oom" for l in ls))
        ooms = [l for l in lines if l.get("kind") == "oom"]
        self.assertEqual(len(ooms), 1)
        self.assertTrue(ooms[0]["text"].startswith("RESOURCE_EXHAUSTED: Out of memory"))
        self.assertIn("bytes_in_use", ooms[0]["text"])  # the allocator's figures
        last = [l for l in lines if l["type"] == "torch"][-1]
        self.assertEqual(last["ooms"], 1)
        p.close()

    def test_off_without_memrec_jax(self):
        os.environ.pop("MEMREC_JAX")
        jax = make_fake_jax()
        sys.modules["jax"] = jax
        self.probe()
        memrec.step(0)
        memrec.flush()
        lines = self.srv.wait(lambda ls: len(ls) >= 1)
        self.assertEqual([l["type"] for l in lines], ["mark"])
        self.assertEqual(jax.calls, 0)


if __name__ == "__main__":
    unittest.main()
