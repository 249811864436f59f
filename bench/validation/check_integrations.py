"""memrec.integrations' LightningCallback and TransformersCallback with the
real frameworks on a GPU: a tiny Lightning 2.x model and a tiny transformers
Trainer (a GPT-2 built from a small config, random weights, no downloads),
each with gradient accumulation 2, max_steps stopping inside an epoch, an
evaluation and a checkpoint save, recorded with `memrec record --torch`.
The marks in `memrec export`'s JSON Lines are checked: one line PASS/FAIL
per check, the exit code 1 if any failed. One GPU, about a minute.

  python3 bench/validation/check_integrations.py MEMREC_BINARY [OUT_DIR]

Run by itself as the recorded job: check_integrations.py job lightning|transformers OUT_DIR
"""
import json
import os
import subprocess
import sys

# Lightning: 20 batches an epoch, accumulation 2 (10 optimizer steps an
# epoch), max_steps 15: stops halfway through epoch 1.
PL_BATCHES, PL_ACCUM, PL_MAX_STEPS = 20, 2, 15
# transformers: 40 samples of 4 a batch, accumulation 2 (5 optimizer steps
# an epoch), max_steps 12: stops at epoch 2.4; an evaluation every 5 steps,
# a save every 10.
HF_SAMPLES, HF_BATCH, HF_ACCUM, HF_MAX_STEPS, HF_EVAL, HF_SAVE = 40, 4, 2, 12, 5, 10


def lightning_job(out):
    import torch
    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl
    from memrec.integrations import LightningCallback

    class Net(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1))

        def training_step(self, batch, i):
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)

        def validation_step(self, batch, i):
            x, y = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters())

    def loader(n):
        g = torch.Generator().manual_seed(n)
        ds = torch.utils.data.TensorDataset(torch.randn(n * 8, 256, generator=g), torch.randn(n * 8, 1, generator=g))
        return torch.utils.data.DataLoader(ds, batch_size=8)

    trainer = pl.Trainer(accelerator="gpu", devices=1, max_steps=PL_MAX_STEPS, accumulate_grad_batches=PL_ACCUM,
                         num_sanity_val_steps=0, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=out, callbacks=[LightningCallback()])
    trainer.fit(Net(), loader(PL_BATCHES), loader(4))


def transformers_job(out):
    import torch
    import transformers
    from memrec.integrations import TransformersCallback

    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=128, vocab_size=1000, n_positions=64)
    model = transformers.GPT2LMHeadModel(config)

    class Tokens(torch.utils.data.Dataset):
        def __init__(self, n):
            g = torch.Generator().manual_seed(n)
            self.ids = torch.randint(0, 1000, (n, 64), generator=g)

        def __len__(self):
            return len(self.ids)

        def __getitem__(self, i):
            return {"input_ids": self.ids[i], "labels": self.ids[i]}

    args = transformers.TrainingArguments(
        output_dir=out, per_device_train_batch_size=HF_BATCH, per_device_eval_batch_size=HF_BATCH,
        gradient_accumulation_steps=HF_ACCUM, max_steps=HF_MAX_STEPS, eval_strategy="steps", eval_steps=HF_EVAL,
        save_strategy="steps", save_steps=HF_SAVE, logging_strategy="no", report_to="none",
        dataloader_num_workers=0, disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens(HF_SAMPLES), eval_dataset=Tokens(8),
                                   callbacks=[TransformersCallback()])
    trainer.train()


def marks(bin_, db, run):
    out = subprocess.run([bin_, "--db", db, "export", run], capture_output=True, text=True, check=True).stdout
    return [r for r in map(json.loads, out.splitlines()) if r.get("type") == "mark"]


def check(name, ok, detail):
    print("%s %s: %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)
    return ok


def check_run(fw, ms, steps, epochs, evals_at_least, saves_at_least):
    from_probe = [m for m in ms if m["kind"] in ("epoch_start", "epoch_end", "step", "event")]
    starts = [m.get("epoch") for m in from_probe if m["kind"] == "epoch_start"]
    ends = [m.get("epoch") for m in from_probe if m["kind"] == "epoch_end"]
    got_steps = [m.get("step") for m in from_probe if m["kind"] == "step"]
    events = [m.get("text", "") for m in from_probe if m["kind"] == "event"]
    n_start, n_end = events.count("evaluation start"), events.count("evaluation end")
    saves = events.count("checkpoint saved")
    ok = [
        check(fw + " epochs pair", starts == epochs and ends == epochs,
              "epoch_start %s, epoch_end %s, want %s" % (starts, ends, epochs)),
        check(fw + " one step mark per optimizer step", got_steps == steps,
              "%d step marks %s..%s, want %d (%s..%s)" % (len(got_steps), got_steps[:1], got_steps[-1:], len(steps),
                                                        steps[0], steps[-1])),
        check(fw + " evaluation marks", n_start == n_end >= evals_at_least,
              "%d starts, %d ends, want equal and at least %d" % (n_start, n_end, evals_at_least)),
        check(fw + " checkpoint marks", saves >= saves_at_least, "%d saves, want at least %d" % (saves, saves_at_least)),
    ]
    return all(ok)


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "job":
        {"lightning": lightning_job, "transformers": transformers_job}[sys.argv[2]](sys.argv[3])
        return 0
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        print("usage: %s MEMREC_BINARY [OUT_DIR]" % sys.argv[0], file=sys.stderr)
        return 2
    bin_ = os.path.abspath(sys.argv[1])
    out = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "/tmp/memrec-integrations")
    os.makedirs(out, exist_ok=True)
    db = os.path.join(out, "integrations.db")
    if os.path.exists(db):
        os.remove(db)
    env = dict(os.environ, PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES=os.environ.get("CUDA_VISIBLE_DEVICES", "0"))
    all_ok = True
    for fw in ("lightning", "transformers"):
        log = os.path.join(out, fw + ".log")
        with open(log, "w") as f:
            code = subprocess.run([bin_, "--db", db, "record", "--name", fw, "--interval", "100ms", "--torch", "--",
                                   sys.executable, os.path.abspath(__file__), "job", fw, os.path.join(out, fw)],
                                  stdout=f, stderr=subprocess.STDOUT, env=env).returncode
        if not check(fw + " run", code == 0, "exit %d (log: %s)" % (code, log)):
            all_ok = False
            continue
        ms = marks(bin_, db, fw)
        if fw == "lightning":
            per_epoch = PL_BATCHES // PL_ACCUM
            all_ok &= check_run(fw, ms, list(range(1, PL_MAX_STEPS + 1)),
                                list(range((PL_MAX_STEPS + per_epoch - 1) // per_epoch)), 1, 1)
        else:
            per_epoch = HF_SAMPLES // HF_BATCH // HF_ACCUM
            all_ok &= check_run(fw, ms, list(range(1, HF_MAX_STEPS + 1)),
                                list(range((HF_MAX_STEPS + per_epoch - 1) // per_epoch)), HF_MAX_STEPS // HF_EVAL, 1)
    print("%s check_integrations" % ("PASS" if all_ok else "FAIL"))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
