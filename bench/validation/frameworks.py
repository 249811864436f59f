"""Trains a tiny model for 2 epochs of 8 steps on the GPU with memrec's callback
for a real framework: lightning, pytorch_lightning or transformers.

    memrec record -- python3 bench/validation/frameworks.py lightning

bench/validation/h200_frameworks.sh runs each under memrec and checks the marks.
"""
import os
import sys

import torch

try:
    import memrec
except ImportError:  # not pip-installed: use the copy in this repository
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import memrec
from memrec import integrations

EPOCHS, STEPS, BATCH, WIDTH = 2, 8, 8, 256


def lightning(pkg):
    if pkg == "lightning":
        import lightning as L
    else:
        import pytorch_lightning as L

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(WIDTH, WIDTH)

        def training_step(self, batch, i):
            return self.net(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(STEPS * BATCH, WIDTH)), batch_size=BATCH)
    trainer = L.Trainer(max_epochs=EPOCHS, accelerator="gpu", devices=1, callbacks=[integrations.lightning_callback()],
                        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Model(), data)


def transformers():
    from transformers import Trainer, TrainingArguments

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(WIDTH, WIDTH)

        def forward(self, x, labels=None):
            return {"loss": self.net(x).pow(2).mean()}

    data = [{"x": torch.randn(WIDTH)} for _ in range(STEPS * BATCH)]
    args = TrainingArguments(output_dir="/tmp/memrec-hf", num_train_epochs=EPOCHS, per_device_train_batch_size=BATCH,
                             report_to="none", save_strategy="no", logging_strategy="no", disable_tqdm=True)
    Trainer(model=Model(), args=args, train_dataset=data, callbacks=[integrations.transformers_callback()]).train()


if __name__ == "__main__":
    which = sys.argv[1]
    if which == "transformers":
        transformers()
    else:
        lightning(which)
    memrec.flush()
