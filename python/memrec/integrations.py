"""Callbacks that mark epochs, optimizer steps, evaluations and checkpoint
saves for you, as the frameworks expect callbacks: classes to pass, and to
remove by class.

    from memrec.integrations import LightningCallback, TransformersCallback

    trainer = lightning.Trainer(callbacks=[LightningCallback()])
    trainer = transformers.Trainer(..., callbacks=[TransformersCallback()])

Each class derives from its framework's callback base, found when the class
is first used (this module imports without either framework; where both
Lightning packages are installed, import the one the script uses first). An
evaluation is two "event" marks, EVAL_START and EVAL_END, and a checkpoint
save one, CHECKPOINT, each with an allocator sample at its moment: the two
places memory most often jumps. ``lightning_callback()`` and
``transformers_callback()`` make an instance.
"""

import sys
from typing import Any, Optional

import memrec

EVAL_START = "evaluation start"
EVAL_END = "evaluation end"
CHECKPOINT = "checkpoint saved"


def _event(text: str) -> None:
    """An event mark with the allocator's value at that moment."""
    p = memrec._get()
    if p.enabled:
        try:
            p.mark_with_sample("event", text=text)
        except Exception:
            pass


def _lightning_base() -> type:
    """Lightning comes as two packages whose Trainers accept only their own
    Callback class: the one the script imported (``lightning`` if both or
    neither), object where neither imports."""
    if "pytorch_lightning" in sys.modules and "lightning" not in sys.modules:
        names = ("pytorch_lightning.callbacks", "lightning.pytorch.callbacks")
    else:
        names = ("lightning.pytorch.callbacks", "pytorch_lightning.callbacks")
    for name in names:
        try:
            return __import__(name, fromlist=["Callback"]).Callback
        except ImportError:
            continue
    return object


def _transformers_base() -> type:
    try:
        from transformers import TrainerCallback
    except ImportError:
        return object
    return TrainerCallback


class _Lightning:
    """The hooks of memrec's Lightning callback (Lightning 2.x signatures)."""

    def __init__(self) -> None:
        self._epoch: Optional[int] = None  # the epoch this callback opened
        self._global_step: Optional[int] = None  # at the last step mark

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        opts = list(getattr(trainer, "optimizers", None) or [])
        memrec.watch(pl_module, opts[0] if len(opts) == 1 else _Optimizers(opts) if opts else None)
        self._global_step = getattr(trainer, "global_step", None)

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._close_epoch()
        self._epoch = int(trainer.current_epoch)
        memrec.epoch_start(self._epoch)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._close_epoch()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._close_epoch()  # stopped inside an epoch (max_steps, early stopping)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        # Under gradient accumulation global_step counts optimizer steps:
        # the batches between two of them are one step.
        gs = int(trainer.global_step)
        if gs != self._global_step:
            self._global_step = gs
            memrec.step(gs)

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        _event(EVAL_START)

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        _event(EVAL_END)

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: Any) -> None:
        _event(CHECKPOINT)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._close_epoch()
        memrec.report_oom(exception)

    def _close_epoch(self) -> None:
        if self._epoch is not None:
            n, self._epoch = self._epoch, None
            memrec.epoch_end(n)


class _Transformers:
    """The hooks of memrec's Hugging Face callback."""

    def __init__(self) -> None:
        self._epoch: Optional[int] = None  # the epoch this callback opened
        self._evaluating = False

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                       **kwargs: Any) -> None:
        if model is not None:
            memrec.watch(model, optimizer)

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._close_epoch()
        # state.epoch is the float progress (2.0 at the start of the third
        # epoch; 1.9999 where a float sum fell short).
        self._epoch = int((state.epoch or 0) + 1e-6)
        memrec.epoch_start(self._epoch)

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._close_epoch()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._close_epoch()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # Called once per optimizer step (on_substep_end marks the
        # accumulation's other batches).
        memrec.step(state.global_step)

    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # transformers has no hook at an evaluation's start: its first batch is.
        if not self._evaluating:
            self._evaluating = True
            _event(EVAL_START)

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self._evaluating:
            _event(EVAL_START)  # an evaluation of no batch
        self._evaluating = False
        _event(EVAL_END)

    def on_predict(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.on_evaluate(args, state, control, **kwargs)  # Trainer.predict's batches are prediction steps too

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        _event(CHECKPOINT)

    def _close_epoch(self) -> None:
        if self._epoch is not None:
            n, self._epoch = self._epoch, None
            memrec.epoch_end(n)


_classes = {}


def _make(name: str) -> type:
    """LightningCallback or TransformersCallback: memrec's hooks over the
    framework's base class, made once per base (the same class at each use,
    so a Trainer's remove_callback(cls) finds it)."""
    hooks, base = {"LightningCallback": (_Lightning, _lightning_base),
                   "TransformersCallback": (_Transformers, _transformers_base)}[name]
    b = base()
    cls = _classes.get((name, b))
    if cls is not None:
        return cls

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if b is not object:
            b.__init__(self, *args, **kwargs)
        hooks.__init__(self)

    bases = (hooks,) if b is object else (hooks, b)
    cls = type(name, bases, {"__init__": __init__, "__module__": __name__, "__doc__": hooks.__doc__})
    _classes[(name, b)] = cls
    return cls


def __getattr__(name: str) -> Any:
    if name in ("LightningCallback", "TransformersCallback"):
        return _make(name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def lightning_callback() -> Any:
    """A LightningCallback."""
    return _make("LightningCallback")()


def transformers_callback() -> Any:
    """A TransformersCallback."""
    return _make("TransformersCallback")()


class _Optimizers:
    """Several optimizers seen as one by memrec.watch: their parameter groups
    and state together."""

    def __init__(self, opts):
        self.opts = opts
        self.name = "+".join(type(o).__name__ for o in opts)

    @property
    def param_groups(self):
        return [g for o in self.opts for g in o.param_groups]

    @property
    def state(self):
        s = {}
        for o in self.opts:
            s.update(o.state)
        return s
