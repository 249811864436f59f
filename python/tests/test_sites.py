"""Tests of the allocation sites with a fake torch whose allocator history is
a list the test fills (no GPU, no torch needed)."""
import json
import os
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import memrec  # noqa: E402
from memrec import _probe, _sites  # noqa: E402
from test_probe import Server, make_fake_torch, restore_modules, save_modules  # noqa: E402

TORCH_DIR = "/opt/py/lib/python3.11/site-packages/torch"
VISION = "/opt/py/lib/python3.11/site-packages/torchvision/models/resnet.py"
STDLIB = "/usr/lib/python3.11/contextlib.py"
TRAIN = "/home/u/train.py"


def fr(filename, line, name):
    return {"filename": filename, "line": line, "name": name}


# Stacks innermost first, as torch records them.
LINEAR = fr(TORCH_DIR + "/nn/modules/linear.py", 125, "forward")
CALL = fr(TORCH_DIR + "/nn/modules/module.py", 1750, "_call_impl")
LEAK = [LINEAR, CALL, fr(TRAIN, 52, "keep_logits"), fr(STDLIB, 81, "inner"), fr(TRAIN, 80, "train_step"), fr(TRAIN, 99, "main")]
WEIGHT = [fr(TORCH_DIR + "/nn/modules/module.py", 1340, "to"), fr(TRAIN, 30, "main")]
VISION_ONLY = [CALL, fr(VISION, 100, "forward")]
VISION_USER = [CALL, fr(VISION, 100, "forward"), fr(TRAIN, 70, "train_step")]
TORCH_ONLY = [CALL]


def block(size, frames, state="active_allocated"):
    return {"address": 0, "size": size, "requested_size": size, "state": state, "frames": frames}


def add_history(torch):
    """Gives a fake torch an allocator history: h["segments"] and h["trace"]
    are what _snapshot returns; h["calls"] the modes it was switched to."""
    torch.__file__ = TORCH_DIR + "/__init__.py"
    h = {"calls": [], "segments": [], "trace": [], "lazy": []}

    def record(enabled="all", context="all", stacks="all", max_entries=0, clear_history=False, device=None):
        h["calls"].append(enabled)
        if clear_history:
            h["trace"].clear()

    def snapshot():
        traced = h["calls"] and h["calls"][-1] == "all"
        return {"segments": list(h["segments"]), "device_traces": [list(h["trace"]) if traced else []]}

    torch.cuda.memory = types.SimpleNamespace(_record_memory_history=record, _snapshot=snapshot)
    torch.cuda._lazy_call = h["lazy"].append
    torch.cuda.is_available = lambda: True
    torch._history = h
    return h


class SummaryTest(unittest.TestCase):
    def kinds(self):
        k = _sites.Frames(TORCH_DIR)
        k.stdlib = ("/usr/lib/python3.11",)
        k.packages = ("/opt/py/lib/python3.11/site-packages",)
        return k

    def test_site_skips_torch_stdlib_and_packages(self):
        k = self.kinds()
        cases = [
            (LEAK, 2),  # past torch's frames to the user's helper
            (WEIGHT, 1),
            (VISION_USER, 2),  # the user's frame beats an installed package's
            (VISION_ONLY, 1),  # no user frame: the package, not torch
            (TORCH_ONLY, 0),  # nothing else: the innermost frame
            ([], -1),
        ]
        for frames, want in cases:
            self.assertEqual(_sites.site_of(frames, k), want, frames)

    def test_frame_kind_of_paths_from_other_machines(self):
        cases = [
            ("/home/u/train.py", 0),
            ("/usr/lib/python3.10/threading.py", 2),
            ("/venv/lib64/python3.12/site-packages/torch/nn/functional.py", 2),
            ("/venv/lib/python3.12/dist-packages/lightning/pytorch/loops/fit.py", 1),
            ("<frozen runpy>", 2),
            ("/src/torch/csrc/autograd/engine.cpp", 2),
            ("C:\\Users\\u\\train.py", 0),
        ]
        for path, want in cases:
            self.assertEqual(_sites.frame_kind(path), want, path)

    def test_live_blocks_and_window_by_site(self):
        leak = [block(256000, LEAK) for _ in range(30)]
        weights = [block(4 << 20, WEIGHT), block(1 << 20, WEIGHT, "active_pending_free"), block(512, WEIGHT, "active_awaiting_free")]
        snap = {
            "segments": [
                {"device": 0, "blocks": leak + weights + [block(999, LEAK, "inactive"), block(7000, []), block(3000, VISION_ONLY)]},
                {"device": 1, "blocks": [block(1 << 30, LEAK)]},  # another GPU
                {"device": 0, "blocks": [{"state": "active_allocated", "size": "x"}, {"state": "active_allocated"}]},
                "not a segment",
            ],
            "device_traces": [[
                {"action": "alloc", "size": 100, "time_us": 5, "frames": LEAK},  # before the window
                {"action": "alloc", "size": 256000, "time_us": 20, "frames": LEAK},
                {"action": "alloc", "addr": 64, "size": 4096, "time_us": 21, "frames": VISION_USER},
                {"action": "free_requested", "addr": 64, "size": 4096, "time_us": 22, "frames": []},
                {"action": "free_completed", "addr": 64, "size": 4096, "time_us": 23, "frames": []},  # freed by autograd
                {"action": "free_completed", "addr": 96, "size": 8192, "time_us": 23, "frames": LEAK},  # allocated before
                {"action": "alloc", "size": 64, "time_us": 24, "frames": []},
                {"action": "segment_alloc", "size": 2 << 20, "time_us": 25, "frames": LEAK},
            ]],
        }
        s = _sites.Summary()
        s.add(snap, 0, self.kinds(), since_us=10)
        m = json.loads(s.message({"type": "sites", "gpu": 0}))
        by = {x["site"]: x for x in m["sites"]}
        self.assertEqual(by["train.py:52"]["live_bytes"], 30 * 256000)
        self.assertEqual(by["train.py:52"]["live_blocks"], 30)
        self.assertEqual(by["train.py:52"]["func"], "keep_logits")
        self.assertEqual(by["train.py:52"]["stack"], ["train.py:80 train_step", "train.py:99 main"])
        self.assertEqual(by["train.py:52"]["alloc_bytes"], 256000)
        self.assertEqual(by["train.py:52"]["allocs"], 1)
        self.assertEqual(by["train.py:30"]["live_bytes"], (4 << 20) + (1 << 20) + 512)
        self.assertEqual(by["resnet.py:100"]["live_bytes"], 3000)
        self.assertEqual((by["train.py:70"]["alloc_bytes"], by["train.py:70"]["freed_bytes"]), (4096, 4096))
        self.assertEqual(by["train.py:70"]["live_bytes"], 0)
        self.assertEqual(m["untracked"], {"live_bytes": 7000, "live_blocks": 1, "alloc_bytes": 64, "freed_bytes": 8192})
        self.assertEqual(m["bad"], 3)
        self.assertTrue(m["traced"])
        self.assertEqual([x["site"] for x in m["sites"]][:2], ["train.py:52", "train.py:30"])  # by live bytes

    def test_message_is_bounded(self):
        s = _sites.Summary()
        k = self.kinds()
        blocks = [block(1000 + i, [fr("/home/u/gen_%04d_%s.py" % (i, "x" * 80), i + 1, "f%d" % i), fr(TRAIN, 9, "main")])
                  for i in range(3000)]
        s.add({"segments": [{"device": 0, "blocks": blocks}]}, 0, k)
        line = s.message({"type": "sites", "gpu": 0})
        self.assertLessEqual(len(line.encode()), _sites.MAX_MESSAGE)
        m = json.loads(line)
        self.assertGreater(len(m["sites"]), 100)
        self.assertEqual(len(m["sites"]) + m["other"]["sites"], 3000)
        total = sum(x["live_bytes"] for x in m["sites"]) + m["other"]["live_bytes"]
        self.assertEqual(total, sum(1000 + i for i in range(3000)))
        self.assertEqual(min(x["live_bytes"] for x in m["sites"]), 3000 - len(m["sites"]) + 1000)  # the largest kept


class RealSnapshotTest(unittest.TestCase):
    """The probe's summary of real H200 snapshots (the ones memrec's Go
    reader is tested on): a ResNet-18 job whose helper remember() keeps a
    clone of each step's logits, 64*1000*4 = 256 000 B a step."""

    def load(self, name):
        import gzip
        import pickle
        path = os.path.join(os.path.dirname(os.path.dirname(HERE)), "formats", "torchsnap", "testdata", name)
        with gzip.open(path) as f:
            return pickle.load(f)

    def kinds(self):
        return _sites.Frames("/opt/torch/.venv/lib/python3.12/site-packages/torch")

    def test_state_snapshot(self):
        s = _sites.Summary()
        s.add(self.load("state-leak.pickle.gz"), 0, self.kinds())
        m = json.loads(s.message({"type": "sites", "gpu": 0}))
        top = m["sites"][0]
        self.assertEqual((top["site"], top["func"], top["live_bytes"], top["live_blocks"]), ("snapjob.py:10", "remember", 30 * 256000, 30))
        self.assertEqual(top["stack"], ["snapjob.py:13 train_step", "snapjob.py:25 <module>"])

    def test_trace_tail(self):
        s = _sites.Summary()
        s.add(self.load("trace-leak-tail.pickle.gz"), 0, self.kinds())
        m = json.loads(s.message({"type": "sites", "gpu": 0}))
        leak = [x for x in m["sites"] if x["site"] == "snapjob.py:10"][0]
        # 12 leaking steps in all, the last 4 inside the trace; nothing freed
        self.assertEqual((leak["live_bytes"], leak["allocs"], leak["alloc_bytes"], leak["frees"]), (12 * 256000, 4, 4 * 256000, 0))
        for x in m["sites"]:
            if x is not leak and "allocs" in x:
                self.assertEqual(x["alloc_bytes"] - x["freed_bytes"], x["live_bytes"], x["site"])


class ProbeSitesTest(unittest.TestCase):
    def setUp(self):
        self.saved = save_modules("torch", "torch.distributed")
        self.env = dict(os.environ)

    def tearDown(self):
        restore_modules(self.saved)
        os.environ.clear()
        os.environ.update(self.env)
        memrec._instance = None

    def test_history_window_and_summaries(self):
        srv = Server()
        torch = make_fake_torch()
        h = add_history(torch)
        sys.modules["torch"] = torch
        os.environ["MEMREC_SITES"] = "1"
        os.environ["MEMREC_SITES_WINDOW"] = "2"
        os.environ["MEMREC_SITES_EVERY"] = "1"  # no measuring: the history on every step
        p = _probe.Probe(path=srv.path, timer=0)
        memrec._instance = p
        memrec.sites(True)
        self.assertEqual(h["calls"], ["state"])
        h["segments"].append({"device": 0, "blocks": [block(1 << 20, WEIGHT)]})
        with memrec.epoch(0):
            for i in range(14):
                if i >= 10:  # inside the window: the trace has the helper's allocations
                    h["trace"].append({"action": "alloc", "size": 256, "time_us": 2**62, "frames": LEAK})
                memrec.step(i)
            self.assertEqual(h["calls"], ["state", "all", "state"])  # at step 10, for 2 steps
        observer = torch._state["observer"]
        observer(0, 1 << 30, 80 << 30, 0)
        memrec.snapshot("after")
        memrec.flush()
        lines = srv.wait(lambda ls: sum(1 for l in ls if l["type"] == "sites") >= 4)
        sites = [l for l in lines if l["type"] == "sites"]
        self.assertEqual([l["reason"] for l in sites], ["window", "epoch_end", "oom", "snapshot"])
        window = sites[0]
        self.assertTrue(window["traced"])
        self.assertEqual({x["site"]: x.get("allocs") for x in window["sites"]}, {"train.py:30": None, "train.py:52": 2})
        self.assertEqual(sites[1]["epoch"], 0)
        self.assertEqual(sites[1]["sites"][0]["live_bytes"], 1 << 20)
        self.assertEqual(sites[3]["name"], "after")
        kinds = [l.get("kind") or l["type"] for l in lines]
        self.assertLess(kinds.index("sites", kinds.index("epoch_end")), kinds.index("oom"))  # the OOM's summary comes first
        p.close()
        srv.close()

    def sites_with_clock(self, step_s):
        """A probe whose sites run on a fake clock: each step takes
        step_s(mode) seconds, mode being what the history records."""
        torch = make_fake_torch()
        h = add_history(torch)
        sys.modules["torch"] = torch
        os.environ["MEMREC_SITES_WINDOW"] = "0"
        p = _probe.Probe(path="", timer=0)
        now = [100.0]
        p.sites.clock = lambda: now[0]
        p.sites.enable(True)

        def run(n):
            for _ in range(n):
                now[0] += step_s(h["calls"][-1])
                p.sites.step(torch)
        return p, h, run

    def test_cheap_history_stays_on(self):
        p, h, run = self.sites_with_clock(lambda mode: 0.014 * (1.005 if mode == "state" else 1))
        run(1 + 2 * _sites.CAL_PAIRS * _sites.CAL_BLOCK)
        self.assertAlmostEqual(p.sites.cost, 0.005)
        self.assertEqual(p.sites.every, 1)
        run(50)
        self.assertEqual(h["calls"][-1], "state")
        self.assertEqual(h["calls"].count("state"), _sites.CAL_PAIRS + 2)  # armed, each "with" block, kept on

    def test_costly_history_is_sampled(self):
        # +11 %, as on a CPU-bound MLP: on one step in ceil(0.11 / 0.01) = 11
        p, h, run = self.sites_with_clock(lambda mode: 0.001 * (1.11 if mode == "state" else 1))
        run(1 + 2 * _sites.CAL_PAIRS * _sites.CAL_BLOCK)
        self.assertAlmostEqual(p.sites.cost, 0.11)
        self.assertEqual(p.sites.every, 11)
        before = len(h["calls"])
        run(88)
        modes = h["calls"][before:]
        self.assertEqual(modes.count("state"), 8)  # 88 steps, on for one in 11
        self.assertEqual(modes.count(None), 8)
        # The 88 steps since the history was measured (8 with it), and the
        # measuring before them: one armed step, then half the blocks with it.
        cal = 2 * _sites.CAL_PAIRS * _sites.CAL_BLOCK
        lines = p.sites.send(sys.modules["torch"], "snapshot")
        self.assertEqual(json.loads(lines[0])["sampled_every"], round((1 + cal + 88) / (1 + cal / 2 + 8), 3))
        run(88)
        lines = p.sites.send(sys.modules["torch"], "epoch_end")
        self.assertEqual(json.loads(lines[0])["sampled_every"], 11)
        run(11)
        lines = p.sites.send(sys.modules["torch"], "oom")  # not a steady summary: the span goes on
        run(11)
        lines = p.sites.send(sys.modules["torch"], "window")
        self.assertEqual(json.loads(lines[0])["sampled_every"], 11)

    def test_noisy_outlier_steps_do_not_decide(self):
        # An epoch's end (a summary, a data loader restart) in one block
        # makes one step slow; medians keep it out.
        n = [0]

        def step_s(mode):
            n[0] += 1
            return 0.5 if n[0] == 20 else 0.010
        p, _, run = self.sites_with_clock(step_s)
        run(1 + 2 * _sites.CAL_PAIRS * _sites.CAL_BLOCK)
        self.assertEqual(p.sites.every, 1)

    def test_windows_stay_in_their_budget(self):
        torch = make_fake_torch()
        h = add_history(torch)
        sys.modules["torch"] = torch
        os.environ["MEMREC_SITES_EVERY"] = "1"
        os.environ["MEMREC_SITES_WINDOW"] = "3"
        p = _probe.Probe(path="", timer=0)
        now = [0.0]
        p.sites.clock = lambda: now[0]
        p.sites.enable(True)
        opened = []
        for epoch in range(120):
            p.sites.epoch_start()
            for i in range(20):  # 20 steps of 10 ms; a window's steps take 40 ms
                now[0] += 0.040 if p.sites.mode == "all" else 0.010
                before = p.sites.window_end
                p.sites.step(torch)
                if before < 0 <= p.sites.window_end:
                    opened.append(epoch)
        # a window costs 3 x 30 ms: one in 0.09 / 0.01 = 9 s at most, and
        # an epoch without one lasts 0.2 s: the first window, then one
        # every 45 epochs
        self.assertEqual(opened, [0, 45, 90])

    def test_history_waits_for_cuda(self):
        torch = make_fake_torch()
        h = add_history(torch)
        torch.cuda.is_initialized = lambda: False
        sys.modules["torch"] = torch
        p = _probe.Probe(path="", timer=0)
        p.sites.enable(True)
        self.assertEqual(h["calls"], [])
        self.assertEqual(len(h["lazy"]), 1)
        h["lazy"][0]()  # torch's lazy init runs the queued call
        self.assertEqual(h["calls"], ["state"])
        self.assertEqual(p.sites.mode, "state")
        p.sites.enable(False)
        self.assertEqual(h["calls"], ["state", None])

    def test_track_without_recorder(self):
        os.environ.pop("MEMREC_SOCKET", None)
        memrec._instance = None
        torch = make_fake_torch()
        h = add_history(torch)
        sys.modules["torch"] = torch
        h["trace"].append({"action": "alloc", "size": 1, "time_us": 0, "frames": LEAK})  # before the block
        with memrec.track("forward") as t:
            h["trace"].append({"action": "alloc", "size": 4096, "time_us": 2**62, "frames": VISION_USER, "addr": 1})
            h["trace"].append({"action": "alloc", "size": 512, "time_us": 2**62, "frames": []})
            h["trace"].append({"action": "free_completed", "size": 4096, "time_us": 2**62, "frames": [], "addr": 1})
        self.assertTrue(t.available)
        self.assertEqual(t.events, [("train.py:70 train_step", "alloc", 4096), ("untracked", "alloc", 512),
                                    ("train.py:70 train_step", "free", 4096)])
        self.assertEqual(t.summaries[0]["name"], "forward")
        self.assertEqual(h["calls"], ["all", None])  # sites were off: the history is off again

    def test_track_without_torch_yields_empty(self):
        sys.modules.pop("torch", None)
        memrec._instance = None
        with memrec.track("x") as t:
            pass
        self.assertFalse(t.available)
        self.assertEqual(t.events, [])


if __name__ == "__main__":
    unittest.main()
