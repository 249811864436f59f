"""Tests of memrec.watch: the budget's sums with fake tensors whose storages,
devices and shards are known, so every expected figure is computed here from
the fake model's own description, not read from the probe.

Run: python3 -m unittest discover -s python/tests
"""
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import memrec  # noqa: E402
from memrec import _budget, _probe  # noqa: E402
from test_probe import Server, make_fake_torch, restore_modules, save_modules  # noqa: E402

_next_addr = [1 << 20]


class Storage:
    def __init__(self, nbytes, device):
        self.addr = _next_addr[0]
        _next_addr[0] += nbytes + 4096
        self.n = nbytes
        self.device = device

    def data_ptr(self):
        return self.addr

    def nbytes(self):
        return self.n


class Tensor:
    """What the budget reads of a torch tensor: its storage, device, size."""

    def __init__(self, numel, elem=4, device=0, storage=None, requires_grad=False, dtype="torch.float32"):
        self._numel, self._elem = numel, elem
        self._storage = storage if storage is not None else Storage(numel * elem, device)
        self.is_cuda = device >= 0
        self._device = device
        self.requires_grad = requires_grad
        self.grad = None
        self.dtype = dtype

    def untyped_storage(self):
        return self._storage

    def get_device(self):
        return self._device

    def numel(self):
        return self._numel

    def element_size(self):
        return self._elem

    def view(self):
        """A view: another tensor object over the same storage."""
        return Tensor(self._numel, self._elem, self._device, storage=self._storage, requires_grad=self.requires_grad)


class DTensor(Tensor):
    """A sharded parameter: its own sizes are the global tensor's, its local
    shard is what this rank holds."""

    def __init__(self, numel, shards, device=0):
        super().__init__(numel, device=device, requires_grad=True)
        self._local_tensor = Tensor(numel // shards, device=device, requires_grad=True)


class Model:
    def __init__(self, params, buffers=()):
        self.params = list(params)
        self.bufs = list(buffers)
        self.hooks = []

    def parameters(self):
        seen = set()
        for p in self.params:  # as nn.Module does: each Parameter object once
            if id(p) not in seen:
                seen.add(id(p))
                yield p

    def buffers(self):
        return iter(self.bufs)

    def register_forward_pre_hook(self, f):
        model = self

        class Handle:
            def remove(self):
                model.hooks.remove(f)

        self.hooks.append(f)
        return Handle()

    def forward(self):
        for h in list(self.hooks):
            h(self, ())


class AdamW:
    def __init__(self, params):
        self.param_groups = [{"params": list(params)}]
        self.state = {}

    def step(self):
        for p in self.param_groups[0]["params"]:
            if p not in self.state:
                loc = getattr(p, "_local_tensor", p)
                self.state[p] = {"step": Tensor(1, device=-1),  # torch keeps step on the CPU
                                 "exp_avg": Tensor(loc.numel(), device=loc.get_device()),
                                 "exp_avg_sq": Tensor(loc.numel(), device=loc.get_device())}


def backward(params):
    for p in params:
        if p.requires_grad:
            loc = getattr(p, "_local_tensor", p)
            p.grad = Tensor(loc.numel(), loc._elem, loc.get_device())


class BudgetTest(unittest.TestCase):
    def setUp(self):
        self.saved = save_modules("torch", "torch.distributed")

    def tearDown(self):
        restore_modules(self.saved)
        memrec._instance = None

    def test_counts_each_storage_once_on_its_own_gpu(self):
        embed = Tensor(1000, requires_grad=True)  # tied: the same object twice
        w = Tensor(300, requires_grad=True)
        view = w.view()  # a second parameter over w's storage
        frozen = Tensor(50)  # no gradient
        other_gpu = Tensor(700, device=1, requires_grad=True)
        cpu = Tensor(900, device=-1, requires_grad=True)
        bn = Tensor(64)
        model = Model([embed, w, view, frozen, other_gpu, cpu, embed], [bn, bn.view()])
        opt = AdamW(list(model.parameters()))
        watch = _budget.Watch(model, opt)

        f = watch.figures()
        self.assertEqual(sorted(f), [0, 1])
        self.assertEqual(f[0].params, (1000 + 300 + 50) * 4)
        self.assertEqual(f[0].n_params, 1000 + 300 + 300 + 50)  # elements, views included
        self.assertEqual(f[0].n_trainable, 1000 + 300 + 300)
        self.assertEqual(f[0].buffers, 64 * 4)
        self.assertEqual((f[0].grads, f[0].state), (0, 0))
        self.assertEqual(f[1].params, 700 * 4)

        backward(model.params)
        opt.step()
        f = watch.figures()
        self.assertEqual(watch.walks, 2, "the optimizer's state appeared: one walk more")
        # Gradients: embed, w and view each got their own; the CPU one is not a GPU's.
        self.assertEqual(f[0].grads, (1000 + 300 + 300) * 4)
        # State: exp_avg and exp_avg_sq per parameter object the optimizer has,
        # on that parameter's GPU; step is on the CPU.
        self.assertEqual(f[0].state, 2 * (1000 + 300 + 300 + 50) * 4)
        self.assertEqual(f[1].state, 2 * 700 * 4)
        self.assertEqual(watch.state_keys, "exp_avg,exp_avg_sq")

        f = watch.figures()
        self.assertEqual(watch.walks, 2, "nothing changed: no walk")
        self.assertEqual(f[0].grads, (1000 + 300 + 300) * 4)
        for p in model.params:  # zero_grad(set_to_none=True)
            p.grad = None
        self.assertEqual(watch.figures()[0].grads, 0)

    def test_bucket_views_are_one_gradient(self):
        # DDP's gradient_as_bucket_view: every .grad is a view into one bucket.
        ps = [Tensor(n, requires_grad=True) for n in (10, 20, 30)]
        bucket = Storage(60 * 4, 0)
        for p in ps:
            p.grad = Tensor(p.numel(), storage=bucket)
        watch = _budget.Watch(Model(ps), None)
        self.assertEqual(watch.figures()[0].grads, 60 * 4)

    def test_dtensor_counts_the_local_shard(self):
        shard = DTensor(4096, shards=4)
        opt = AdamW([shard])
        watch = _budget.Watch(Model([shard]), opt)
        backward([shard])
        opt.step()
        f = watch.figures()[0]
        self.assertEqual(f.params, 1024 * 4)
        self.assertEqual(f.grads, 1024 * 4)
        self.assertEqual(f.state, 2 * 1024 * 4)
        self.assertEqual(f.n_params, 1024)

    def test_autocast_noted_at_the_next_forward(self):
        torch = make_fake_torch()
        on = [True]
        torch.is_autocast_enabled = lambda device_type: on[0]
        sys.modules["torch"] = torch
        model = Model([Tensor(10, requires_grad=True)])
        watch = _budget.Watch(model, None)
        self.assertIsNone(watch.autocast)
        backward(model.params)  # a step ran: the hook then also settles the gradients
        watch.figures()
        model.forward()
        self.assertTrue(watch.autocast)
        self.assertEqual(model.hooks, [], "the hook removes itself")
        on[0] = False
        model.forward()
        self.assertTrue(watch.autocast, "no hook until re-armed")
        watch.arm_autocast()
        model.forward()
        self.assertFalse(watch.autocast)

    def test_gradients_at_forward(self):
        """Whether the gradients exist as the forward starts: known only once
        a backward ran (the first forward never has them)."""
        sys.modules["torch"] = make_fake_torch()
        w = Tensor(16, requires_grad=True)
        model = Model([w])
        watch = _budget.Watch(model, None)
        watch.figures()
        model.forward()  # step 0: no backward yet
        self.assertIsNone(watch.grads_at_forward)
        self.assertEqual(len(model.hooks), 1, "still armed")
        backward([w])
        watch.figures()  # the step's sample counts the gradients
        w.grad = None  # zero_grad(set_to_none=True) before the next forward
        model.forward()
        self.assertIs(watch.grads_at_forward, False)
        self.assertEqual(model.hooks, [])
        backward([w])
        watch.arm_autocast()
        model.forward()  # set_to_none=False: they stay
        self.assertIs(watch.grads_at_forward, True)

    def test_site_summary_names_the_categories(self):
        """With --sites, a live block holding a watched storage is summed under
        its category; other blocks keep their line of code."""
        import json
        from memrec import _sites

        w = Tensor(256, requires_grad=True)
        bn = Tensor(8)
        opt = AdamW([w])
        backward([w])
        opt.step()
        watch = _budget.Watch(Model([w], [bn]), opt)
        watch.figures()
        st = opt.state[w]
        act = Storage(4096, 0)  # an activation, allocated at train.py:9

        def block(stor, frames=()):
            return {"address": stor.addr, "size": stor.n, "state": "active_allocated", "frames": list(frames)}

        snap = {"segments": [{"device": 0, "blocks": [
            block(w._storage), block(w.grad._storage), block(st["exp_avg"]._storage), block(st["exp_avg_sq"]._storage),
            block(bn._storage), block(act, [{"filename": "/u/train.py", "line": 9, "name": "step"}])]}]}
        s = _sites.Summary(sorted(watch.blocks()))
        s.add(snap, 0, _sites.Frames("/nonexistent-torch"))
        line = json.loads(s.message({"type": "sites", "t_ns": 1, "gpu": 0, "pid": 1, "reason": "snapshot"}))
        got = {e["file"]: (e["live_bytes"], e["func"]) for e in line["sites"]}
        self.assertEqual(got["<parameters>"], (1024, ""))
        self.assertEqual(got["<gradients>"], (1024, ""))
        self.assertEqual(got["<optimizer state>"], (2048, "AdamW exp_avg, AdamW exp_avg_sq"))
        self.assertEqual(got["<buffers>"], (32, ""))
        self.assertEqual(got["/u/train.py"], (4096, "step"))

    def test_torch_line_carries_the_budget(self):
        srv = Server()
        torch = make_fake_torch(devices=1)
        torch.is_autocast_enabled = lambda device_type: False
        sys.modules["torch"] = torch
        p = _probe.Probe(path=srv.path, timer=0)
        memrec._instance = p
        w = Tensor(256, requires_grad=True)
        model = Model([w], [Tensor(8)])
        opt = AdamW([w])
        memrec.watch(model, opt)
        model.forward()
        backward([w])
        opt.step()
        memrec.step(0)
        memrec.flush()
        lines = srv.wait(lambda ls: any(l["type"] == "torch" for l in ls))
        s = [l for l in lines if l["type"] == "torch"][0]
        self.assertEqual(s["params_bytes"], 1024)
        self.assertEqual(s["grads_bytes"], 1024)
        self.assertEqual(s["optimizer_bytes"], 2048)
        self.assertEqual(s["buffers_bytes"], 32)
        self.assertEqual((s["params"], s["trainable"]), (256, 256))
        self.assertEqual(s["optimizer"], "AdamW")
        self.assertEqual(s["optimizer_state"], "exp_avg,exp_avg_sq")
        self.assertEqual(s["dtype"], "float32")
        self.assertIs(s["autocast"], False)
        p.close()
        srv.close()

    def test_without_watch_no_budget_fields(self):
        srv = Server()
        sys.modules["torch"] = make_fake_torch(devices=1)
        p = _probe.Probe(path=srv.path, timer=0)
        memrec._instance = p
        memrec.step(0)
        memrec.flush()
        lines = srv.wait(lambda ls: any(l["type"] == "torch" for l in ls))
        s = [l for l in lines if l["type"] == "torch"][0]
        self.assertNotIn("params_bytes", s)
        p.close()
        srv.close()

    def test_cost_of_an_unchanged_set(self):
        """How long figures() takes when nothing changed (the common case),
        for a model of 150 parameter tensors with gradients kept between
        steps; printed, not asserted (timings belong to benchmarks)."""
        ps = [Tensor(1000, requires_grad=True) for _ in range(150)]
        opt = AdamW(ps)
        watch = _budget.Watch(Model(ps), opt)
        backward(ps)
        opt.step()
        watch.figures()
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            watch.figures()
        per = (time.perf_counter() - t0) / n
        self.assertEqual(watch.walks, 1, "one walk, at the first call")
        if os.environ.get("MEMREC_VERBOSE"):
            print("figures(), 150 parameters, unchanged: %.1f µs" % (per * 1e6))


if __name__ == "__main__":
    unittest.main()
