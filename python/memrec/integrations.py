"""Callbacks that mark epochs and steps for you. Each is defined only when its
framework can be imported:

    from memrec.integrations import lightning_callback, transformers_callback

    trainer = lightning.Trainer(callbacks=[lightning_callback()])
    trainer = transformers.Trainer(..., callbacks=[transformers_callback()])
"""

import memrec


def lightning_callback():
    """A PyTorch Lightning Callback. Lightning comes as two packages whose
    Trainers accept only their own Callback class: this one derives from the
    package the script imported (``lightning`` if both or neither)."""
    import sys

    if "pytorch_lightning" in sys.modules and "lightning" not in sys.modules:
        from pytorch_lightning.callbacks import Callback
    else:
        try:
            from lightning.pytorch.callbacks import Callback
        except ImportError:
            from pytorch_lightning.callbacks import Callback

    class MemrecCallback(Callback):
        def on_train_start(self, trainer, pl_module):
            opts = list(getattr(trainer, "optimizers", None) or [])
            memrec.watch(pl_module, opts[0] if len(opts) == 1 else _Optimizers(opts) if opts else None)

        def on_train_epoch_start(self, trainer, pl_module):
            memrec.epoch_start(trainer.current_epoch)

        def on_train_epoch_end(self, trainer, pl_module):
            memrec.epoch_end(trainer.current_epoch)

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            memrec.step(trainer.global_step)

        def on_exception(self, trainer, pl_module, exception):
            memrec.report_oom(exception)

    return MemrecCallback()


def transformers_callback():
    """A Hugging Face transformers TrainerCallback."""
    from transformers import TrainerCallback

    class MemrecCallback(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
            if model is not None:
                memrec.watch(model, optimizer)

        def on_epoch_begin(self, args, state, control, **kwargs):
            memrec.epoch_start(int(state.epoch or 0))

        def on_epoch_end(self, args, state, control, **kwargs):
            memrec.epoch_end(int(round(state.epoch or 0)) - 1 if state.epoch else 0)

        def on_step_end(self, args, state, control, **kwargs):
            memrec.step(state.global_step)

    return MemrecCallback()


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
