"""Tests of memrec's probe with a fake torch (no GPU, no torch needed).

Run: python3 -m unittest discover -s python/tests
With MEMREC_BIN set to a memrec binary, the transport is also tested against
the real recorder (`go test ./cmd/memrec` does that).
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
sys.path.insert(0, PKG)

import memrec  # noqa: E402
from memrec import _probe  # noqa: E402

FAKE_TORCH = textwrap.dedent('''
    import sys, types

    def make_fake_torch(devices=1, allocated=1000, observer=True):
        torch = types.ModuleType("torch")
        state = {"allocated": allocated, "peak": [allocated * 3] * devices, "resets": [], "observer": None}

        class OutOfMemoryError(RuntimeError):
            pass

        def stats(d):
            return {
                "allocated_bytes": {"all": {"current": state["allocated"] + d, "peak": state["peak"][d]}},
                "reserved_bytes": {"all": {"current": 4096 * (d + 1)}},
                "active_bytes": {"all": {"current": state["allocated"] + 512}},
                "inactive_split_bytes": {"all": {"current": 256}},
                "segment": {"all": {"current": 3}},
                "num_alloc_retries": 2,
                "num_ooms": 0,
            }

        def reset(d):
            state["resets"].append(d)
            state["peak"][d] = state["allocated"]

        torch.cuda = types.SimpleNamespace(
            is_initialized=lambda: True, device_count=lambda: devices, current_device=lambda: 0,
            memory_summary=lambda d=0: "|  fake memory summary of GPU %d  |" % d, OutOfMemoryError=OutOfMemoryError)
        C = types.SimpleNamespace(_cuda_memoryStats=stats, _cuda_resetPeakMemoryStats=reset)
        if observer:
            C._cuda_attach_out_of_memory_observer = lambda f: state.__setitem__("observer", f)
        torch._C = C
        torch._state = state
        # The allocator's segments: the largest with room free is 64 MiB on
        # device 0 (its blocks free at a step's end); the larger one is
        # wholly in use (a parameter's), and strands nothing.
        state["segments"] = [{"device": 0, "total_size": 2 << 20, "allocated_size": 1 << 20},
                             {"device": 0, "total_size": 64 << 20, "is_expandable": False,
                              "blocks": [{"size": 64 << 20, "state": "inactive"}]},
                             {"device": 0, "total_size": 256 << 20, "allocated_size": 256 << 20}]
        torch.cuda.memory_snapshot = lambda: state["segments"]
        return torch
''')
exec(FAKE_TORCH)


class Server:
    """A Unix socket that collects the lines it receives."""

    def __init__(self):
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "s.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(8)
        self.lines = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(c,), daemon=True).start()

    def _read(self, c):
        buf = b""
        while True:
            data = c.recv(65536)
            if not data:
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                with self.lock:
                    self.lines.append(json.loads(line))

    def wait(self, pred, timeout=3.0):
        end = time.time() + timeout
        while time.time() < end:
            with self.lock:
                if pred(self.lines):
                    return list(self.lines)
            time.sleep(0.01)
        with self.lock:
            return list(self.lines)

    def close(self):
        self.sock.close()


def save_modules(*names):
    """The modules of these names as they are now (None where absent)."""
    return {k: sys.modules.get(k) for k in names}


def restore_modules(saved):
    for k, v in saved.items():
        if v is None:
            sys.modules.pop(k, None)
        else:
            sys.modules[k] = v


class ProbeTest(unittest.TestCase):
    def setUp(self):
        self.saved = save_modules("torch", "torch.distributed")
        self.env = dict(os.environ)
        for k in ("CUDA_VISIBLE_DEVICES", "MEMREC_GPUS"):
            os.environ.pop(k, None)

    def tearDown(self):
        restore_modules(self.saved)
        os.environ.clear()
        os.environ.update(self.env)
        memrec._instance = None

    def probe(self, server, timer=0):
        p = _probe.Probe(path=server.path, timer=timer)
        memrec._instance = p
        return p

    def test_noop_without_recorder(self):
        os.environ.pop("MEMREC_SOCKET", None)
        memrec._instance = None
        sys.modules["torch"] = make_fake_torch()
        t0 = time.perf_counter()
        for i in range(10000):
            memrec.step(i)
        per_call = (time.perf_counter() - t0) / 10000
        self.assertFalse(memrec.enabled())
        self.assertIsNone(memrec._instance.sender)
        self.assertLess(per_call, 20e-6)
        with memrec.epoch(0):
            memrec.mark("nothing listens")
        self.assertEqual(sys.modules["torch"]._state["resets"], [])

    def test_recorder_gone_becomes_noop(self):
        p = _probe.Probe(path="/nonexistent/memrec.sock", timer=0)
        memrec._instance = p
        sys.modules["torch"] = make_fake_torch()
        memrec.step(0)
        memrec.flush(1.0)
        self.assertFalse(p.enabled)
        memrec.step(1)  # no error, no thread

    def test_step_maps_statistics_and_resets_peak(self):
        srv = Server()
        torch = make_fake_torch(devices=2)
        sys.modules["torch"] = torch
        os.environ["RANK"] = "3"
        p = self.probe(srv)
        memrec.step(7)
        memrec.flush()
        lines = srv.wait(lambda ls: len(ls) >= 3)
        marks = [l for l in lines if l["type"] == "mark"]
        samples = [l for l in lines if l["type"] == "torch"]
        self.assertEqual(marks[0]["kind"], "step")
        self.assertEqual(marks[0]["step"], 7)
        self.assertEqual(marks[0]["rank"], 3)
        # The mark names its process as the samples do: memrec fit counts
        # a rank-less process's steps by it.
        self.assertEqual(marks[0]["pid"], os.getpid())
        self.assertEqual({s["pid"] for s in samples}, {os.getpid()})
        self.assertEqual(sorted(s["gpu"] for s in samples), [0, 1])
        s = [s for s in samples if s["gpu"] == 1][0]
        self.assertEqual(s["allocated_bytes"], 1001)
        self.assertEqual(s["reserved_bytes"], 8192)
        self.assertEqual(s["active_bytes"], 1512)
        self.assertEqual(s["inactive_split_bytes"], 256)
        self.assertEqual(s["peak_allocated_bytes"], 3000)  # the step's peak, read before the reset
        self.assertEqual(s["segments"], 3)
        self.assertEqual(s["alloc_retries"], 2)
        self.assertEqual(s["pid"], os.getpid())
        self.assertEqual(s["rank"], 3)
        self.assertEqual(sorted(torch._state["resets"]), [0, 1])
        p.close()
        srv.close()

    def test_largest_segment_after_the_warm_up(self):
        srv = Server()
        torch = make_fake_torch()
        sys.modules["torch"] = torch
        os.environ["MEMREC_STEP_SAMPLE_MS"] = "0"
        try:
            p = self.probe(srv)
            for i in range(4):
                memrec.step(i)
            memrec.flush()
            lines = srv.wait(lambda ls: len([l for l in ls if l["type"] == "torch"]) >= 4)
        finally:
            del os.environ["MEMREC_STEP_SAMPLE_MS"]
        samples = [l for l in lines if l["type"] == "torch"]
        # Not looked at before the third step: the field is left out; the
        # third step's own sample carries it (a fit trial may end there).
        self.assertNotIn("largest_segment_bytes", samples[1])
        self.assertEqual(samples[2]["largest_segment_bytes"], 64 << 20)
        self.assertEqual(samples[-1]["largest_segment_bytes"], 64 << 20)
        # A snapshot that fails leaves what was seen.
        torch.cuda.memory_snapshot = lambda: (_ for _ in ()).throw(RuntimeError("no"))
        p.look_at_segments(torch)
        self.assertEqual(p.largest, {0: 64 << 20})
        # With expandable segments a segment's size says nothing of a
        # request: nothing is kept, and the probe does not look again.
        torch._state["segments"].append({"device": 0, "total_size": 1 << 30, "is_expandable": True})
        torch.cuda.memory_snapshot = lambda: torch._state["segments"]
        p.look_at_segments(torch)
        self.assertEqual(p.largest, {})
        self.assertGreater(p.segments_due_ns, time.time_ns() + 10**15)
        p.close()
        srv.close()

    def test_torch_without_cuda_sends_a_probe_note(self):
        srv = Server()
        torch = make_fake_torch(devices=1)
        torch.__version__ = "1.13.1"
        torch.cuda = types.SimpleNamespace(is_available=lambda: False, is_initialized=lambda: False)
        sys.modules["torch"] = torch
        p = self.probe(srv)
        for i in range(5):
            memrec.step(i)
        with memrec.track("t") as tr:
            pass
        memrec.flush()
        lines = srv.wait(lambda ls: len([l for l in ls if l.get("kind") == "step"]) >= 5)
        notes = [l for l in lines if l.get("kind") == "probe"]
        self.assertEqual([n["text"] for n in notes], ["torch 1.13.1 without CUDA: no allocator view"])
        self.assertEqual(notes[0]["pid"], os.getpid())
        self.assertEqual([l for l in lines if l["type"] == "torch"], [])
        self.assertFalse(tr.available)
        self.assertEqual(tr.note, "torch 1.13.1 without CUDA: no allocator view")
        p.close()
        srv.close()

    def test_cuda_never_initialised_is_noted_at_exit(self):
        srv = Server()
        torch = make_fake_torch(devices=1)
        torch.__version__ = "2.11.0"
        torch.cuda = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: False)
        sys.modules["torch"] = torch
        p = self.probe(srv)
        memrec.step(0)  # CUDA may still start: nothing said yet
        p.note_no_allocator(at_exit=True)
        p.note_no_allocator(at_exit=True)
        memrec.flush()
        lines = srv.wait(lambda ls: any(l.get("kind") == "probe" for l in ls))
        notes = [l["text"] for l in lines if l.get("kind") == "probe"]
        self.assertEqual(notes, ["torch 2.11.0: CUDA was never initialised in this process: no allocator view"])
        p.close()
        srv.close()

    def test_no_probe_note_with_an_allocator(self):
        srv = Server()
        sys.modules["torch"] = make_fake_torch(devices=1)
        p = self.probe(srv)
        memrec.step(0)
        p.note_no_allocator(at_exit=True)
        memrec.flush()
        lines = srv.wait(lambda ls: any(l["type"] == "torch" for l in ls))
        self.assertEqual([l for l in lines if l.get("kind") == "probe"], [])
        p.close()
        srv.close()

    def test_close_steps_share_one_sample(self):
        srv = Server()
        torch = make_fake_torch(devices=1)
        sys.modules["torch"] = torch
        p = self.probe(srv)
        p.step_sample_ns = 3600 * 10**9
        for i in range(5):
            memrec.step(i)
        memrec.flush()
        lines = srv.wait(lambda ls: len(ls) >= 6)
        self.assertEqual([l["step"] for l in lines if l.get("kind") == "step"], [0, 1, 2, 3, 4])
        # The first step's sample and the third's: however close the last
        # sample, the third step looks at the segments and carries the
        # largest (a 3-step fit trial ends after it); the peak keeps
        # growing until the next sample.
        samples = [l for l in lines if l["type"] == "torch"]
        self.assertEqual(len(samples), 2)
        self.assertNotIn("largest_segment_bytes", samples[0])
        self.assertEqual(samples[1]["largest_segment_bytes"], 64 << 20)
        self.assertEqual(torch._state["resets"], [0, 0])
        p.step_sample_ns = p.base_sample_ns = 0
        p.space_by_cost = False
        memrec.step(5)
        memrec.step(6)
        memrec.flush()
        lines = srv.wait(lambda ls: sum(1 for l in ls if l["type"] == "torch") >= 4)
        self.assertEqual(torch._state["resets"], [0, 0, 0, 0])
        p.close()
        srv.close()

    def test_samples_spaced_by_their_cost(self):
        # A sample that costs 90 us keeps samples 36 ms apart (0.25 % of
        # the time); a cheap one, the base interval.
        p = _probe.Probe(path="", timer=0)
        self.assertTrue(p.space_by_cost)
        p._space_samples(90_000)
        self.assertEqual(p.step_sample_ns, 36_000_000)
        for _ in range(60):
            p._space_samples(1_000)
        self.assertEqual(p.step_sample_ns, p.base_sample_ns)
        os.environ["MEMREC_STEP_SAMPLE_MS"] = "0"
        try:
            self.assertFalse(_probe.Probe(path="", timer=0).space_by_cost)
        finally:
            del os.environ["MEMREC_STEP_SAMPLE_MS"]

    def test_long_step_has_its_own_sample(self):
        # However wide the spacing, a step of 10 ms or more is sampled.
        srv = Server()
        torch = make_fake_torch(devices=1)
        sys.modules["torch"] = torch
        p = self.probe(srv)
        memrec.step(0)
        p.step_sample_ns = p.base_sample_ns = 3600 * 10**9
        p.space_by_cost = False
        memrec.step(1)  # right after step 0: shares its sample
        self.assertEqual(torch._state["resets"], [0])
        p.last_step_ns -= 20_000_000  # step 2 lasted 20 ms
        memrec.step(2)
        self.assertEqual(torch._state["resets"], [0, 0])
        p.close()
        srv.close()

    def test_gpu_index_under_cuda_visible_devices(self):
        # CUDA numbers only the visible GPUs; memrec's device samples use NVML's
        # numbers, which the probe finds by UUID (MEMREC_GPUS), or else from
        # CUDA_VISIBLE_DEVICES.
        uuids = {0: "8a1b0000-0000-0000-0000-00000000000a", 1: "8a1b0000-0000-0000-0000-00000000000b"}
        torch = make_fake_torch(devices=2)
        gpus = "0=GPU-ffff0000-0000-0000-0000-000000000000,5=GPU-8A1B0000-0000-0000-0000-00000000000B,6=GPU-8a1b0000-0000-0000-0000-00000000000a"
        cases = [
            ({}, None, [0, 1]),
            ({"CUDA_VISIBLE_DEVICES": "3,1"}, None, [3, 1]),
            ({"MEMREC_GPUS": gpus}, uuids, [6, 5]),
            ({"MEMREC_GPUS": gpus, "CUDA_VISIBLE_DEVICES": "GPU-8a1b0000-0000-0000-0000-00000000000a,GPU-8a1b0000-0000-0000-0000-00000000000b"}, None, [6, 5]),
            ({"MEMREC_GPUS": gpus, "CUDA_VISIBLE_DEVICES": "GPU-8a1b"}, None, [0, 1]),  # ambiguous prefix: unchanged
        ]
        for env, props, want in cases:
            if props:
                torch.cuda.get_device_properties = lambda d, props=props: types.SimpleNamespace(uuid=props[d])
            elif hasattr(torch.cuda, "get_device_properties"):
                del torch.cuda.get_device_properties
            self.assertEqual([_probe.nvml_index(torch, d, env) for d in (0, 1)], want, env)

        # End to end: the samples and the OOM mark carry the NVML index.
        srv = Server()
        sys.modules["torch"] = make_fake_torch(devices=1, observer=True)
        os.environ["CUDA_VISIBLE_DEVICES"] = "4"
        p = self.probe(srv)
        memrec.step(0)
        sys.modules["torch"]._state["observer"](0, 1 << 20, 1 << 30, 0)
        memrec.flush()
        lines = srv.wait(lambda ls: any(l.get("kind") == "oom" for l in ls))
        self.assertEqual({l["gpu"] for l in lines if l["type"] == "torch" or l.get("kind") == "oom"}, {4})
        p.close()
        srv.close()

    def test_rank_from_torch_distributed(self):
        srv = Server()
        sys.modules["torch"] = make_fake_torch()
        sys.modules["torch.distributed"] = types.SimpleNamespace(
            is_available=lambda: True, is_initialized=lambda: True, get_rank=lambda: 5)
        os.environ["RANK"] = "1"
        p = self.probe(srv)
        memrec.mark("hello")
        memrec.flush()
        lines = srv.wait(lambda ls: ls)
        self.assertEqual(lines[0]["rank"], 5)
        self.assertEqual(lines[0]["kind"], "event")
        self.assertEqual(lines[0]["text"], "hello")
        p.close()

    def test_epoch_marks_and_text_escaping(self):
        srv = Server()
        p = self.probe(srv)
        with memrec.epoch(2):
            memrec.mark('quote " backslash \\ newline \n unicode é ✓')
        memrec.flush()
        lines = srv.wait(lambda ls: len(ls) >= 3)
        self.assertEqual([l["kind"] for l in lines], ["epoch_start", "event", "epoch_end"])
        self.assertEqual(lines[0]["epoch"], 2)
        self.assertEqual(lines[1]["text"], 'quote " backslash \\ newline \n unicode é ✓')
        p.close()

    def test_epoch_marks_carry_an_allocator_sample_at_their_time(self):
        # The value at a mark is the last sample at or before it: the
        # samples sent with epoch_start and epoch_end share the mark's time,
        # so epoch 0 has a start value even before any step.
        srv = Server()
        sys.modules["torch"] = make_fake_torch(devices=2)
        p = self.probe(srv)
        with memrec.epoch(0):
            pass
        memrec.flush()
        lines = srv.wait(lambda ls: len(ls) >= 6)
        for kind in ("epoch_start", "epoch_end"):
            m = [l for l in lines if l.get("kind") == kind]
            self.assertEqual(len(m), 1, kind)
            at = [l for l in lines if l["type"] == "torch" and l["t_ns"] == m[0]["t_ns"]]
            self.assertEqual(sorted(l["gpu"] for l in at), [0, 1], kind)
        self.assertEqual(sys.modules["torch"]._state["resets"], [])  # the step peak is left alone
        p.close()
        srv.close()

    def test_oom_observer(self):
        srv = Server()
        torch = make_fake_torch()
        sys.modules["torch"] = torch
        p = self.probe(srv)
        memrec.step(0)  # attaches the observer once CUDA is up
        observer = torch._state["observer"]
        self.assertIsNotNone(observer)
        observer(0, 2 << 30, 80 << 30, 1 << 20)
        lines = srv.wait(lambda ls: any(l.get("kind") == "oom" for l in ls))
        oom = [l for l in lines if l.get("kind") == "oom"][0]
        self.assertIn("Tried to allocate 2.00 GiB", oom["text"])
        self.assertIn("fake memory summary of GPU 0", oom["text"])
        self.assertEqual(oom["gpu"], 0)
        self.assertTrue(any(l["type"] == "torch" and l["t_ns"] >= oom["t_ns"] for l in lines))
        # The exception that follows is not reported twice.
        try:
            with memrec.epoch(0):
                raise torch.cuda.OutOfMemoryError("CUDA out of memory.")
        except torch.cuda.OutOfMemoryError:
            pass
        memrec.flush()
        time.sleep(0.05)
        self.assertEqual(sum(1 for l in srv.lines if l.get("kind") == "oom"), 1)
        p.close()

    def test_oom_exception_without_observer(self):
        srv = Server()
        torch = make_fake_torch(observer=False)
        sys.modules["torch"] = torch
        p = self.probe(srv)
        with self.assertRaises(torch.cuda.OutOfMemoryError):
            with memrec.epoch(1):
                memrec.step(0)
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 MiB\nmore")
        lines = srv.wait(lambda ls: any(l.get("kind") == "oom" for l in ls))
        oom = [l for l in lines if l.get("kind") == "oom"][0]
        self.assertTrue(oom["text"].startswith("CUDA out of memory. Tried to allocate 20.00 MiB"))
        self.assertIn("epoch_end", [l.get("kind") for l in srv.wait(lambda ls: any(l.get("kind") == "epoch_end" for l in ls))])
        p.close()

    def test_oom_of_cublas_and_cudnn(self):
        # Their own allocations fail outside the caching allocator: no
        # observer call, a RuntimeError with their status; a script that
        # catches it reports it with report_oom. Other errors are ignored.
        srv = Server()
        sys.modules["torch"] = make_fake_torch(observer=False)
        p = self.probe(srv)
        memrec.report_oom(RuntimeError("shape mismatch"))
        memrec.report_oom(RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"))
        lines = srv.wait(lambda ls: any(l.get("kind") == "oom" for l in ls))
        ooms = [l for l in lines if l.get("kind") == "oom"]
        self.assertEqual(len(ooms), 1)
        self.assertIn("CUBLAS_STATUS_ALLOC_FAILED", ooms[0]["text"])
        p.close()

    def test_full_queue_drops_and_reports(self):
        srv = Server()
        p = _probe.Probe(path=srv.path, timer=0)
        memrec._instance = p
        p.max_queue = 10
        with p.lock:  # hold the sender so the queue fills
            for i in range(25):
                memrec.mark("m%d" % i)
            self.assertEqual(p.dropped_total, 15)
        memrec.flush()
        lines = srv.wait(lambda ls: any(l.get("kind") == "probe_dropped" for l in ls))
        dropped = [l for l in lines if l.get("kind") == "probe_dropped"]
        self.assertEqual(dropped[0]["code"], 15)
        self.assertEqual(sum(1 for l in lines if l.get("kind") == "event"), 10)
        p.close()

    def test_timer_samples_between_steps(self):
        srv = Server()
        sys.modules["torch"] = make_fake_torch()
        p = _probe.Probe(path=srv.path, timer=0.02)
        memrec._instance = p
        lines = srv.wait(lambda ls: sum(1 for l in ls if l["type"] == "torch") >= 5, timeout=3)
        self.assertGreaterEqual(sum(1 for l in lines if l["type"] == "torch"), 5)
        self.assertEqual(sys.modules["torch"]._state["resets"], [])  # only steps reset the peak
        p.close()

    def test_step_cost(self):
        srv = Server()
        sys.modules["torch"] = make_fake_torch()
        p = self.probe(srv)
        memrec.step(0)
        n = 2000
        t0 = time.perf_counter()
        for i in range(n):
            memrec.step(i)
        per = (time.perf_counter() - t0) / n
        # With the fake torch this is the probe's own cost; generous bound
        # for a loaded CI machine (the H200 figure is in the README).
        self.assertLess(per, 200e-6)
        p.close()


class IntegrationsTest(unittest.TestCase):
    """The Lightning and Hugging Face callbacks, against stand-ins of the
    frameworks' base classes (neither framework is needed)."""

    def setUp(self):
        self.saved = save_modules("lightning", "lightning.pytorch", "lightning.pytorch.callbacks", "pytorch_lightning",
                                  "pytorch_lightning.callbacks", "transformers", "torch")

    def tearDown(self):
        restore_modules(self.saved)
        memrec._instance = None

    def test_lightning_and_transformers_callbacks(self):
        cb_mod = types.ModuleType("lightning.pytorch.callbacks")
        cb_mod.Callback = type("Callback", (), {})
        sys.modules["lightning"] = types.ModuleType("lightning")
        sys.modules["lightning.pytorch"] = types.ModuleType("lightning.pytorch")
        sys.modules["lightning.pytorch.callbacks"] = cb_mod
        tr = types.ModuleType("transformers")
        tr.TrainerCallback = type("TrainerCallback", (), {})
        sys.modules["transformers"] = tr
        sys.modules["torch"] = make_fake_torch()
        from memrec import integrations

        srv = Server()
        p = _probe.Probe(path=srv.path, timer=0)
        memrec._instance = p
        trainer = types.SimpleNamespace(current_epoch=0, global_step=0)
        lc = integrations.lightning_callback()
        self.assertIsInstance(lc, cb_mod.Callback)
        lc.on_train_epoch_start(trainer, None)
        for i in range(3):
            trainer.global_step = i
            lc.on_train_batch_end(trainer, None, None, None, i)
        lc.on_train_epoch_end(trainer, None)
        hc = integrations.transformers_callback()
        self.assertIsInstance(hc, tr.TrainerCallback)
        state = types.SimpleNamespace(epoch=1.0, global_step=10)
        hc.on_epoch_begin(None, state, None)
        hc.on_step_end(None, state, None)
        state.epoch = 2.0
        hc.on_epoch_end(None, state, None)
        memrec.flush()
        lines = srv.wait(lambda ls: sum(1 for l in ls if l["type"] == "mark") >= 8)
        marks = [(l["kind"], l.get("epoch", l.get("step"))) for l in lines if l["type"] == "mark"]
        self.assertEqual(marks, [("epoch_start", 0), ("step", 0), ("step", 1), ("step", 2), ("epoch_end", 0),
                                 ("epoch_start", 1), ("step", 10), ("epoch_end", 1)])
        p.close()

    def test_lightning_callback_matches_the_imported_package(self):
        # lightning.Trainer and pytorch_lightning.Trainer each accept only their
        # own Callback class.
        new = types.ModuleType("lightning.pytorch.callbacks")
        new.Callback = type("Callback", (), {})
        old = types.ModuleType("pytorch_lightning.callbacks")
        old.Callback = type("Callback", (), {})
        sys.modules.update({"lightning.pytorch.callbacks": new, "pytorch_lightning.callbacks": old,
                            "lightning.pytorch": types.ModuleType("lightning.pytorch")})
        from memrec import integrations

        for imported, want in (({"pytorch_lightning"}, old), ({"lightning"}, new),
                               ({"lightning", "pytorch_lightning"}, new), (set(), new)):
            for name in ("lightning", "pytorch_lightning"):
                if name in imported:
                    sys.modules[name] = types.ModuleType(name)
                else:
                    sys.modules.pop(name, None)
            self.assertIsInstance(integrations.lightning_callback(), want.Callback, imported)


@unittest.skipUnless(os.environ.get("MEMREC_BIN"), "MEMREC_BIN not set")
class RecorderTransportTest(unittest.TestCase):
    """The probe against the real `memrec record`."""

    def run_memrec(self, db, *args, env=None):
        e = dict(os.environ)
        e.update(env or {})
        return subprocess.run([os.environ["MEMREC_BIN"], "--db", db] + list(args), env=e,
                              capture_output=True, text=True, timeout=60)

    def export(self, db, name):
        r = self.run_memrec(db, "export", name)
        self.assertEqual(r.returncode, 0, r.stderr)
        return [json.loads(l) for l in r.stdout.splitlines()]

    def test_child_marks_reach_the_store(self):
        d = tempfile.mkdtemp()
        db = os.path.join(d, "t.db")
        child = os.path.join(d, "child.py")
        with open(child, "w") as f:
            f.write(FAKE_TORCH + textwrap.dedent('''
                sys.modules["torch"] = make_fake_torch()
                import memrec
                for e in range(2):
                    with memrec.epoch(e):
                        for i in range(5):
                            memrec.step(e * 5 + i)
                memrec.mark("checkpoint saved")
                memrec.flush()
            '''))
        r = self.run_memrec(db, "record", "--source", "sim", "--sim-gpus", "1", "--name", "py", "--",
                            sys.executable, child, env={"PYTHONPATH": PKG, "MEMREC_STEP_SAMPLE_MS": "0"})
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = self.export(db, "py")
        kinds = [l["kind"] for l in lines if l["type"] == "mark"]
        self.assertEqual(kinds.count("epoch_start"), 2)
        self.assertIn("checkpoint saved", [l.get("text") for l in lines if l["type"] == "mark"])
        steps = sorted(l["step"] for l in lines if l["type"] == "mark" and l["kind"] == "step")
        self.assertEqual(steps, list(range(10)))
        # one sample per step (MEMREC_STEP_SAMPLE_MS=0) and per epoch end (the timer may add more)
        child_torch = [l for l in lines if l["type"] == "torch" and l["allocated_bytes"] == 1000]
        self.assertGreaterEqual(len(child_torch), 12)
        self.assertIn("marks       ", r.stderr)
        # Every epoch mark has an allocator sample of its own moment in the
        # store (times are kept to the microsecond).
        torch_times = {l["t_ns"] for l in child_torch}
        for m in lines:
            if m["type"] == "mark" and m["kind"] in ("epoch_start", "epoch_end"):
                self.assertIn(m["t_ns"], torch_times, m)
        # So the analysis has the allocated memory at the start of epoch 0.
        a = self.run_memrec(db, "analyze", "py", "--json")
        self.assertEqual(a.returncode, 0, a.stderr)
        epochs = json.loads(a.stdout)["gpus"][0]["epochs"]
        self.assertEqual([e["allocated_start_bytes"] for e in epochs], [1000, 1000])

    def test_marks_reach_the_store_without_flush(self):
        # A script that ends without memrec.flush(): what it queued last is
        # sent as the interpreter exits.
        d = tempfile.mkdtemp()
        db = os.path.join(d, "t.db")
        child = os.path.join(d, "child.py")
        with open(child, "w") as f:
            f.write(textwrap.dedent('''
                import memrec
                for i in range(3):
                    memrec.step(i)
                memrec.mark("done")
            '''))
        r = self.run_memrec(db, "record", "--source", "sim", "--sim-gpus", "1", "--name", "nf", "--",
                            sys.executable, child, env={"PYTHONPATH": PKG})
        self.assertEqual(r.returncode, 0, r.stderr)
        marks = [l for l in self.export(db, "nf") if l["type"] == "mark"]
        self.assertEqual(sorted(l["step"] for l in marks if l["kind"] == "step"), [0, 1, 2])
        self.assertIn("done", [l.get("text") for l in marks])

    def test_sites_flag_stores_site_snapshots(self):
        d = tempfile.mkdtemp()
        db = os.path.join(d, "t.db")
        child = os.path.join(d, "child.py")
        with open(child, "w") as f:
            f.write(FAKE_TORCH + "\nsys.path.insert(0, %r)\n" % HERE + textwrap.dedent('''
                from test_sites import add_history, block, LEAK, WEIGHT
                torch = make_fake_torch()
                h = add_history(torch)
                sys.modules["torch"] = torch
                import memrec
                memrec.step(0)  # CUDA is up: the history starts
                for e in range(3):
                    h["segments"].append({"device": 0, "blocks": [block(256000, LEAK)]})
                    with memrec.epoch(e):
                        memrec.step(e)
                memrec.flush()
            '''))
        r = self.run_memrec(db, "record", "--source", "sim", "--sim-gpus", "1", "--name", "s", "--sites", "--",
                            sys.executable, child, env={"PYTHONPATH": PKG})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("allocation-site snapshots", r.stderr)
        sites = [l for l in self.export(db, "s") if l["type"] == "sites"]
        ends = [l for l in sites if l["reason"] == "epoch_end"]
        self.assertEqual([l["epoch"] for l in ends], [0, 1, 2])
        self.assertEqual([l["sites"][0]["live_bytes"] for l in ends], [256000, 512000, 768000])
        self.assertEqual(ends[0]["sites"][0]["file"], "/home/u/train.py")
        self.assertEqual(ends[0]["sites"][0]["line"], 52)
        self.assertEqual(sites[-1]["reason"], "exit")

    def test_torch_flag_loads_probe_without_code_change(self):
        d = tempfile.mkdtemp()
        db = os.path.join(d, "t.db")
        child = os.path.join(d, "plain.py")
        with open(child, "w") as f:
            f.write(FAKE_TORCH + textwrap.dedent('''
                sys.modules["torch"] = make_fake_torch(allocated=777)
                import time
                time.sleep(1.2)   # the probe's timer samples the allocator meanwhile (every 250 ms)
            '''))
        env = {"PYTHONPATH": ""}
        r = self.run_memrec(db, "record", "--torch", "--source", "sim", "--sim-gpus", "1", "--name", "auto", "--",
                            sys.executable, child, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        samples = [l for l in self.export(db, "auto") if l["type"] == "torch" and l["allocated_bytes"] == 777]
        self.assertGreaterEqual(len(samples), 3)

    def test_torch_flag_keeps_users_sitecustomize(self):
        d = tempfile.mkdtemp()
        db = os.path.join(d, "t.db")
        mine = os.path.join(d, "mine")
        os.makedirs(mine)
        with open(os.path.join(mine, "sitecustomize.py"), "w") as f:
            f.write("import os\nos.environ['USER_SITECUSTOMIZE'] = 'ran'\n")
        child = os.path.join(d, "check.py")
        with open(child, "w") as f:
            f.write("import os, sys\nsys.exit(0 if os.environ.get('USER_SITECUSTOMIZE') == 'ran' and 'memrec' in sys.modules else 3)\n")
        r = self.run_memrec(db, "record", "--torch", "--source", "sim", "--sim-gpus", "1", "--name", "chain", "--",
                            sys.executable, child, env={"PYTHONPATH": mine})
        self.assertEqual(r.returncode, 0, r.stderr)


class PublicEntryPointsTest(unittest.TestCase):
    def test_version(self):
        self.assertRegex(memrec.__version__, r"^[0-9]+[.][0-9]+[.][0-9]+$")
        self.assertIn("__version__", memrec.__all__)

    def test_nothing_raises_when_the_probe_cannot_start(self):
        # A probe whose construction fails (no thread can start, say) must
        # leave the training script running without one.
        saved, saved_start = memrec._instance, _probe.Probe._start_threads
        saved_env = os.environ.get("MEMREC_SOCKET")
        def fail(self):
            raise RuntimeError("can't start new thread")
        try:
            _probe.Probe._start_threads = fail
            memrec._instance = None
            os.environ["MEMREC_SOCKET"] = "/nonexistent/memrec.sock"
            memrec.step(1)
            memrec.mark("x")
            memrec.report_oom(RuntimeError("CUDA out of memory"))
            with memrec.epoch(0):
                pass
            self.assertFalse(memrec.enabled())
            self.assertEqual(memrec.stats()["sent"], 0)
        finally:
            os.environ.pop("MEMREC_SOCKET", None)
            if saved_env is not None:
                os.environ["MEMREC_SOCKET"] = saved_env
            _probe.Probe._start_threads = saved_start
            memrec._instance = saved


if __name__ == "__main__":
    unittest.main()
