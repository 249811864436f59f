"""Tests of the allocator trace (memrec._alloctrace) with a fake torch.

Run: python3 -m unittest discover -s python/tests
"""
import base64
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import types
import unittest
import zlib
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
sys.path.insert(0, PKG)

from memrec import _alloctrace, _probe  # noqa: E402

EVENTS = [
    {"action": "segment_alloc", "addr": 100, "size": 2 << 20},
    {"action": "alloc", "addr": 100, "size": 8},
    {"action": "alloc", "addr": 612, "size": 1000},
    {"action": "free_requested", "addr": 100, "size": 8},
    {"action": "free_completed", "addr": 100, "size": 8},
]
# The bytes storage.DecodeAllocTrace reads (storage/alloctrace_test.go
# decodes the same): version 1, gpu 0, pid 7, 3 steps, 1 segment of 2 MiB,
# 3 ops: alloc 8, alloc 1000, the free of op 0.
WANT = bytes([1, 0, 7, 3, 1, 0x80, 0x80, 0x80, 0x01, 3, 0x10, 0xD0, 0x0F, 0x05])


class EncodeTest(unittest.TestCase):
    def test_bytes(self):
        self.assertEqual(_alloctrace.encode(EVENTS, 0, 7, 3), WANT)

    def test_refused_where_the_replay_cannot_follow(self):
        for events, why in (([{"action": "free_completed", "addr": 5, "size": 8}], "first request"),
                            (EVENTS + [{"action": "segment_map", "addr": 0, "size": 2 << 20}], "expandable"),
                            (EVENTS + [{"action": "alloc", "addr": 9000, "size": 8, "stream": 77}], "more than one CUDA stream")):
            with self.assertRaises(_alloctrace.Refused) as e:
                _alloctrace.encode(events, 0, 7, 3)
            self.assertIn(why, str(e.exception))
        # One stream other than the default is one stream.
        one = [dict(e, stream=77) for e in EVENTS]
        self.assertEqual(_alloctrace.encode(one, 0, 7, 3), WANT)

    def test_a_caught_oom_is_a_failed_request(self):
        # Version 2; op 3 failed asking for 1 GiB (1, then the size), op 4
        # frees op 1 (back 3). storage/alloctrace_test.go decodes the same.
        events = EVENTS + [{"action": "oom", "addr": 0, "size": 1 << 30},
                           {"action": "free_completed", "addr": 612, "size": 1000}]
        want = bytes([2]) + WANT[1:9] + bytes([5, 0x10, 0xD0, 0x0F, 0x05, 0x01, 0x80, 0x80, 0x80, 0x80, 0x04, 0x07])
        self.assertEqual(_alloctrace.encode(events, 0, 7, 3), want)

    def test_pieces(self):
        data = bytes(range(256)) * 40  # 10 KiB: four pieces
        lines = _alloctrace.mark_lines(data, 5, 2, 7, _probe.mark_line)
        self.assertEqual(len(lines), 4)
        got = b""
        for i, l in enumerate(lines):
            m = json.loads(l)
            self.assertEqual((m["kind"], m["gpu"], m["pid"], m["t_ns"]), ("alloc_trace", 2, 7, 5))
            head, b64 = m["text"].split(" ")
            self.assertEqual(head, "%d/4" % i)
            self.assertLessEqual(len(m["text"]), 4 << 10)  # the recorder's longest mark text
            got += base64.b64decode(b64)
        self.assertEqual(got, data)


def fake_cuda(initialized=False):
    calls = {"history": [], "queued": []}
    cuda = types.SimpleNamespace(is_initialized=lambda: initialized,
                                 _lazy_call=lambda f: calls["queued"].append(f))
    cuda.memory = types.SimpleNamespace(
        _record_memory_history=lambda enabled="all", **kw: calls["history"].append(enabled),
        _snapshot=lambda: {"device_traces": [EVENTS]})
    torch = types.SimpleNamespace(cuda=cuda)
    return torch, calls


class ArmTest(unittest.TestCase):
    def setUp(self):
        self.notes = []
        self.env = mock.patch.dict(os.environ, {"MEMREC_ALLOC_TRACE": "1"})
        self.env.start()
        for k in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
            os.environ.pop(k, None)

    def tearDown(self):
        self.env.stop()

    def arm(self, torch, sites=False):
        t = _alloctrace.AllocTrace(self.notes.append)
        with mock.patch.dict(sys.modules, {"torch": torch, "torch.cuda": torch.cuda}):
            t.arm(sites)
        return t

    def test_starts_inside_cuda_init_and_sends_at_the_third_step(self):
        torch, calls = fake_cuda()
        original = torch.cuda.memory._record_memory_history
        t = self.arm(torch)
        self.assertEqual(len(calls["queued"]), 1)  # queued for CUDA's initialisation
        with mock.patch.dict(sys.modules, {"torch": torch}):
            calls["queued"][0]()
        self.assertEqual(calls["history"], ["all"])
        lines = t.finish(torch, [0], lambda d: 4, 7, 3, 9, _probe.mark_line)
        self.assertEqual(calls["history"], ["all", None])  # and off again
        self.assertIs(torch.cuda.memory._record_memory_history, original)  # torch's own again
        self.assertEqual(len(lines), 1)
        m = json.loads(lines[0])
        self.assertEqual(m["gpu"], 4)
        data = zlib.decompress(base64.b64decode(m["text"].split(" ")[1]))  # sent compressed
        self.assertEqual(data[1], 4)  # the trace names memrec's GPU
        self.assertEqual(t.finish(torch, [0], lambda d: 4, 7, 3, 9, _probe.mark_line), [])  # once

    def test_the_job_records_the_history_itself(self):
        # The job turns the history on for a snapshot of its own: the trace
        # is given up with a note, the probe never turns the history off,
        # and the job's later calls go straight to torch.
        torch, calls = fake_cuda()
        original = torch.cuda.memory._record_memory_history
        t = self.arm(torch)
        with mock.patch.dict(sys.modules, {"torch": torch}):
            calls["queued"][0]()
        torch.cuda.memory._record_memory_history(enabled="all")
        self.assertIs(torch.cuda.memory._record_memory_history, original)
        self.assertEqual(calls["history"], ["all", "all"])
        self.assertIn("records the allocator's history itself", self.notes[-1])
        self.assertEqual(t.finish(torch, [0], lambda d: 0, 7, 3, 9, _probe.mark_line), [])
        t.started -= _alloctrace.MAX_SECONDS
        t.expire(torch, 0)
        self.assertEqual(calls["history"], ["all", "all"])  # never off
        torch.cuda.memory._record_memory_history(enabled=None)
        self.assertEqual(calls["history"], ["all", "all", None])

    def test_the_job_records_the_history_before_cuda_is_up(self):
        # The job's call comes before CUDA's initialisation (or starts it):
        # the probe's queued start then does nothing, and it never turns the
        # job's history off.
        torch, calls = fake_cuda()
        original = torch.cuda.memory._record_memory_history
        t = self.arm(torch)
        torch.cuda.memory._record_memory_history(enabled="all", context="all")
        self.assertIs(torch.cuda.memory._record_memory_history, original)
        with mock.patch.dict(sys.modules, {"torch": torch}):
            calls["queued"][0]()  # CUDA's initialisation
        self.assertEqual(calls["history"], ["all"])  # the job's call only
        self.assertIn("records the allocator's history itself", self.notes[-1])
        self.assertEqual(t.finish(torch, [0], lambda d: 0, 7, 3, 9, _probe.mark_line), [])
        self.assertEqual(calls["history"], ["all"])

    def test_a_trace_on_two_streams_is_refused_with_a_note(self):
        torch, calls = fake_cuda()
        torch.cuda.memory._snapshot = lambda: {"device_traces": [EVENTS + [{"action": "alloc", "addr": 9000, "size": 8, "stream": 5}]]}
        t = self.arm(torch)
        with mock.patch.dict(sys.modules, {"torch": torch}):
            calls["queued"][0]()
        self.assertEqual(t.finish(torch, [0], lambda d: 0, 7, 3, 9, _probe.mark_line), [])
        self.assertIn("more than one CUDA stream", self.notes[-1])
        self.assertEqual(calls["history"], ["all", None])  # off again
        self.assertIsNot(torch.cuda.memory._record_memory_history, None)

    def test_a_trace_too_large_to_send_at_once_is_left_out_with_a_note(self):
        # Incompressible sizes past MAX_SENT: a note instead of pieces that
        # would push the step's own lines past the recorder's budget.
        import random
        rnd = random.Random(1)
        events = []
        for i in range(_alloctrace.MAX_SENT // 3):
            events.append({"action": "alloc", "addr": i, "size": rnd.randrange(1 << 40)})
        torch, calls = fake_cuda()
        torch.cuda.memory._snapshot = lambda: {"device_traces": [events]}
        t = self.arm(torch)
        with mock.patch.dict(sys.modules, {"torch": torch}):
            calls["queued"][0]()
        self.assertEqual(t.finish(torch, [0], lambda d: 0, 7, 3, 9, _probe.mark_line), [])
        self.assertIn("more than the probe sends at once", self.notes[-1])
        self.assertEqual(calls["history"], ["all", None])

    def test_off_again_without_steps(self):
        # A job that marks no steps: the timer turns the history off after
        # MAX_SECONDS, with a note, and no trace is sent after it.
        torch, calls = fake_cuda()
        t = self.arm(torch)
        with mock.patch.dict(sys.modules, {"torch": torch}):
            calls["queued"][0]()
        t.expire(torch, 0)
        self.assertEqual(calls["history"], ["all"])  # not yet
        t.started -= _alloctrace.MAX_SECONDS
        t.expire(torch, 1)
        self.assertEqual(calls["history"], ["all", None])
        self.assertIn("1 of 3 steps marked", self.notes[-1])
        self.assertEqual(t.finish(torch, [0], lambda d: 0, 7, 3, 9, _probe.mark_line), [])

    def test_refuses_where_it_cannot_be_whole(self):
        torch, calls = fake_cuda(initialized=True)
        self.arm(torch)
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        self.arm(fake_cuda()[0])
        del os.environ["PYTORCH_CUDA_ALLOC_CONF"]
        self.arm(fake_cuda()[0], sites=True)
        self.assertEqual(len(self.notes), 3, self.notes)
        self.assertIn("CUDA was up", self.notes[0])
        self.assertIn("expandable_segments", self.notes[1])
        self.assertIn("sites", self.notes[2])
        self.assertEqual(calls["queued"], [])

    def test_off_without_the_variable(self):
        os.environ["MEMREC_ALLOC_TRACE"] = "0"
        torch, calls = fake_cuda()
        self.arm(torch)
        self.assertEqual((calls["queued"], self.notes), ([], []))

    def test_import_hook(self):
        # A torch not imported yet: the hook queues the start once torch.cuda
        # has loaded (a fake package on disk, in a fresh interpreter).
        d = tempfile.mkdtemp()
        os.makedirs(os.path.join(d, "torch", "cuda"))
        with open(os.path.join(d, "torch", "__init__.py"), "w") as f:
            f.write("from . import cuda\n")
        with open(os.path.join(d, "torch", "cuda", "__init__.py"), "w") as f:
            f.write(textwrap.dedent('''
                import types
                queued = []
                memory = types.SimpleNamespace(_record_memory_history=lambda *a, **k: None)
                def is_initialized(): return False
                def _lazy_call(f): queued.append(f)
            '''))
        code = textwrap.dedent('''
            import sys
            sys.path[:0] = [%r, %r]
            from memrec import _alloctrace
            t = _alloctrace.AllocTrace(print)
            t.arm(False)
            import torch
            print(len(torch.cuda.queued), t.state)
        ''' % (PKG, d))
        out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, MEMREC_ALLOC_TRACE="1"),
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.stdout.strip(), "1 armed", out.stderr)


if __name__ == "__main__":
    unittest.main()


class AtExitTest(unittest.TestCase):
    def test_a_job_that_ends_before_its_third_step_sends_its_trace(self):
        # An OOM ended the job at its first step: at exit the trace so far
        # is sent, the fatal request last (version 2), and the history off.
        from test_probe import Server
        srv = Server()
        try:
            p = _probe.Probe(path=srv.path, timer=0)
            torch, calls = fake_cuda()
            events = EVENTS + [{"action": "oom", "addr": 0, "size": 1 << 30}]
            torch.cuda.memory._snapshot = lambda: {"device_traces": [events]}
            p._torch = lambda: torch
            p.devices = lambda t, rescan=False: [0]
            p.gpu = lambda t, d: 0
            p.alloc_trace.state = "on"
            p.steps_seen = 1
            p.trace_at_exit()
            lines = srv.wait(lambda ls: any(l.get("kind") == "alloc_trace" for l in ls))
            traces = [l for l in lines if l.get("kind") == "alloc_trace"]
            self.assertEqual(len(traces), 1, lines)
            data = zlib.decompress(base64.b64decode(traces[0]["text"].split(" ")[1]))
            head, i = [], 0
            while len(head) < 4:  # version, gpu, pid, steps: LEB128
                v = shift = 0
                while True:
                    b = data[i]
                    i += 1
                    v |= (b & 0x7F) << shift
                    shift += 7
                    if b < 0x80:
                        break
                head.append(v)
            self.assertEqual((head[0], head[2], head[3]), (2, os.getpid(), 1))  # version 2, this process, one step
            self.assertEqual(calls["history"], [None])
            p.trace_at_exit()  # once
            self.assertEqual(len([l for l in srv.lines if l.get("kind") == "alloc_trace"]), 1)
        finally:
            srv.close()
