"""Lightning's BatchSizeFinder on one of fitmodels.MODELS, for comparison with memrec fit.

Runs Tuner.scale_batch_size (--mode power or binsearch, --steps per trial, from
Lightning's default initial value 2) in one process and writes to --out the batch
it found, the batch sizes it tried (one per trial: the size of the first batch
each trial's training step saw) and the seconds it took.
"""
import argparse, json, os, sys, time
import torch
import lightning as L
from lightning.pytorch.tuner import Tuner

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fitmodels

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--mode", default="power")
ap.add_argument("--steps", type=int, default=3)
ap.add_argument("--init", type=int, default=2)
ap.add_argument("--out", required=True)
a = ap.parse_args()


class Job(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.batch_size = a.init
        self.net, self.make_opt, amp, self.make_batch, self.loss_of = fitmodels.build(a.model)
        self.tried = []

    def train_dataloader(self):
        # Indices only: the batch itself is made on the GPU, as fitjob.py does.
        return torch.utils.data.DataLoader(range(10 ** 7), batch_size=self.batch_size)

    def training_step(self, idx, i):
        b = len(idx)
        if not self.tried or self.tried[-1] != b:
            self.tried.append(b)
        return self.loss_of(self.net, *self.make_batch(b, self.device))

    def configure_optimizers(self):
        return self.make_opt(self.net.parameters())


job = Job()
precision = "32-true" if a.model.startswith("resnet") else "bf16-mixed"
trainer = L.Trainer(accelerator="gpu", devices=1, precision=precision, max_epochs=1, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                    num_sanity_val_steps=0, limit_val_batches=0)
t0 = time.perf_counter()
found = Tuner(trainer).scale_batch_size(job, mode=a.mode, steps_per_trial=a.steps, init_val=a.init, max_trials=25)
seconds = time.perf_counter() - t0
json.dump({"model": a.model, "mode": a.mode, "steps_per_trial": a.steps, "found": found,
           "trials": len(job.tried), "tried": job.tried, "seconds": round(seconds, 1)}, open(a.out, "w"))
print(a.model, a.mode, "found", found, "in", len(job.tried), "trials,", round(seconds, 1), "s")
