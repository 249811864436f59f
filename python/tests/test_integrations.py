"""memrec.integrations with stand-ins of Lightning's and transformers'
callback bases, driven in the order the frameworks call their hooks."""
import os
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import memrec  # noqa: E402
from memrec import _probe, integrations  # noqa: E402
from test_probe import Server, make_fake_torch, restore_modules, save_modules  # noqa: E402

FRAMEWORKS = ("lightning", "lightning.pytorch", "lightning.pytorch.callbacks", "pytorch_lightning",
              "pytorch_lightning.callbacks", "transformers")


def fake_lightning(package):
    """lightning (or pytorch_lightning) with a Callback whose hooks do nothing."""
    class Callback:
        def on_train_start(self, trainer, pl_module):
            pass

        def on_fit_start(self, trainer, pl_module):
            pass

    Callback.__module__ = package + ".callbacks"
    mods = {}
    if package == "lightning":
        mods["lightning"] = types.ModuleType("lightning")
        mods["lightning.pytorch"] = types.ModuleType("lightning.pytorch")
        cb = mods["lightning.pytorch.callbacks"] = types.ModuleType("lightning.pytorch.callbacks")
        mods["lightning"].pytorch = mods["lightning.pytorch"]
        mods["lightning.pytorch"].callbacks = cb
    else:
        mods["pytorch_lightning"] = types.ModuleType("pytorch_lightning")
        cb = mods["pytorch_lightning.callbacks"] = types.ModuleType("pytorch_lightning.callbacks")
        mods["pytorch_lightning"].callbacks = cb
    cb.Callback = Callback
    sys.modules.update(mods)
    return Callback


def fake_transformers():
    class TrainerCallback:
        def on_init_end(self, args, state, control, **kwargs):
            pass

    mod = types.ModuleType("transformers")
    mod.TrainerCallback = TrainerCallback
    sys.modules["transformers"] = mod
    return TrainerCallback


class Case(unittest.TestCase):
    def setUp(self):
        self.saved = save_modules("torch", *FRAMEWORKS)
        for k in FRAMEWORKS:
            sys.modules.pop(k, None)
        self.env = dict(os.environ)
        for k in ("MEMREC_ALLOC_TRACE", "MEMREC_SITES", "RANK"):
            os.environ.pop(k, None)
        integrations._classes.clear()
        sys.modules["torch"] = make_fake_torch()
        self.srv = Server()
        self.p = _probe.Probe(path=self.srv.path, timer=0)
        memrec._instance = self.p

    def tearDown(self):
        self.p.close()
        self.srv.close()
        memrec._instance = None
        integrations._classes.clear()
        restore_modules(self.saved)
        os.environ.clear()
        os.environ.update(self.env)

    def marks(self, n_steps):
        memrec.flush()
        lines = self.srv.wait(lambda ls: sum(1 for l in ls if l.get("kind") == "step") >= n_steps)
        return [l for l in lines if l["type"] == "mark"]

    def check_epochs_pair(self, marks, want):
        starts = [m["epoch"] for m in marks if m["kind"] == "epoch_start"]
        ends = [m["epoch"] for m in marks if m["kind"] == "epoch_end"]
        self.assertEqual(starts, want)
        self.assertEqual(ends, want)

    def events(self, marks):
        return [m["text"] for m in marks if m["kind"] == "event"]


class LightningTest(Case):
    def test_class_derives_from_the_imported_package(self):
        for package in ("lightning", "pytorch_lightning"):
            with self.subTest(package=package):
                for k in FRAMEWORKS:
                    sys.modules.pop(k, None)
                integrations._classes.clear()
                base = fake_lightning(package)
                cls = integrations.LightningCallback
                self.assertTrue(issubclass(cls, base))
                self.assertIs(integrations.LightningCallback, cls)  # one class: remove_callback(cls) finds it
                self.assertIsInstance(integrations.lightning_callback(), cls)

    def test_importable_without_lightning(self):
        sys.modules["lightning"] = None  # import lightning raises ImportError
        sys.modules["pytorch_lightning"] = None
        cls = integrations.LightningCallback
        self.assertEqual(cls.__mro__[-1], object)
        cls().on_train_batch_end(types.SimpleNamespace(global_step=1), None, None, None, 0)

    def test_accumulation_max_steps_eval_and_checkpoint(self):
        # 6 batches an epoch, gradient accumulation 2 (3 optimizer steps an
        # epoch), max_steps 7: the run stops inside epoch 2 at its first
        # optimizer step. Validation and a checkpoint after each epoch.
        # Lightning does not call on_train_epoch_end for the epoch it
        # stopped in; on_train_end closes it.
        fake_lightning("lightning")
        cb = integrations.LightningCallback()
        trainer = types.SimpleNamespace(current_epoch=0, global_step=0, optimizers=[])
        cb.on_train_start(trainer, None)
        steps = []
        for epoch in range(3):
            trainer.current_epoch = epoch
            cb.on_train_epoch_start(trainer, None)
            stopped = False
            for b in range(6):
                if b % 2 == 1:
                    trainer.global_step += 1
                cb.on_train_batch_end(trainer, None, None, None, b)
                if b % 2 == 1:
                    steps.append(trainer.global_step)
                if trainer.global_step == 7:
                    stopped = True
                    break
            if stopped:
                break
            cb.on_validation_start(trainer, None)
            cb.on_validation_end(trainer, None)
            cb.on_save_checkpoint(trainer, None, {})
            cb.on_train_epoch_end(trainer, None)
        cb.on_train_end(trainer, None)
        marks = self.marks(len(steps))
        self.check_epochs_pair(marks, [0, 1, 2])
        self.assertEqual([m["step"] for m in marks if m["kind"] == "step"], steps)
        self.assertEqual(steps, list(range(1, 8)))
        self.assertEqual(self.events(marks), [integrations.EVAL_START, integrations.EVAL_END, integrations.CHECKPOINT] * 2)
        samples = self.srv.wait(lambda ls: sum(1 for l in ls if l["type"] == "torch") >= 6)
        event_times = {m["t_ns"] for m in marks if m["kind"] == "event"}
        self.assertTrue(event_times <= {l["t_ns"] for l in samples if l["type"] == "torch"})  # a sample at each


class TransformersTest(Case):
    def test_class_derives_from_trainer_callback(self):
        base = fake_transformers()
        cls = integrations.TransformersCallback
        self.assertTrue(issubclass(cls, base))
        self.assertIsInstance(integrations.transformers_callback(), cls)
        callbacks = [cls(), object()]
        self.assertEqual([c for c in callbacks if c.__class__ == integrations.TransformersCallback], callbacks[:1])

    def test_importable_without_transformers(self):
        sys.modules["transformers"] = None
        self.assertEqual(integrations.TransformersCallback.__mro__[-1], object)

    def test_max_steps_mid_epoch_pairs_its_epoch(self):
        # As Trainer's loop: 8 batches an epoch, gradient accumulation 2,
        # max_steps 10: epoch 2 stops at 2.5. on_step_end comes once per
        # optimizer step (on_substep_end for the other batch); on_epoch_end
        # still comes for the stopped epoch. An evaluation (prediction steps,
        # then on_evaluate) and a save every 4 steps.
        fake_transformers()
        cb = integrations.TransformersCallback()
        state = types.SimpleNamespace(epoch=0.0, global_step=0)
        cb.on_train_begin(None, state, None, model=None)
        per_epoch, accum, max_steps = 8, 2, 10
        done = False
        for epoch in range(5):
            cb.on_epoch_begin(None, state, None)
            for b in range(per_epoch):
                state.epoch = epoch + (b + 1) / per_epoch
                if (b + 1) % accum:
                    continue  # on_substep_end
                state.global_step += 1
                cb.on_step_end(None, state, None)
                if state.global_step % 4 == 0:
                    for _ in range(3):
                        cb.on_prediction_step(None, state, None)
                    cb.on_evaluate(None, state, None, metrics={})
                    cb.on_save(None, state, None)
                if state.global_step >= max_steps:
                    done = True
                    break
            cb.on_epoch_end(None, state, None)
            if done:
                break
        cb.on_train_end(None, state, None)
        self.assertEqual(state.epoch, 2.5)
        marks = self.marks(max_steps)
        self.check_epochs_pair(marks, [0, 1, 2])
        self.assertEqual([m["step"] for m in marks if m["kind"] == "step"], list(range(1, max_steps + 1)))
        self.assertEqual(self.events(marks), [integrations.EVAL_START, integrations.EVAL_END, integrations.CHECKPOINT] * 2)

    def test_train_end_closes_an_epoch_left_open(self):
        fake_transformers()
        cb = integrations.TransformersCallback()
        state = types.SimpleNamespace(epoch=1.9999999, global_step=3)
        cb.on_epoch_begin(None, state, None)
        cb.on_step_end(None, state, None)
        cb.on_train_end(None, state, None)
        cb.on_train_end(None, state, None)
        self.check_epochs_pair(self.marks(1), [2])


if __name__ == "__main__":
    unittest.main()
