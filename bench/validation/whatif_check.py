"""GPU checks of memrec's allocator what-ifs, OOM cause and trace-less prediction.

  python3 whatif_check.py check MEMREC OUT   the checks (whatif_check.sh runs this)
  python3 whatif_check.py job --model M --batch B [...]   one training job

Models are built from configs, nothing is downloaded: torchvision resnet50 and
vit_b_16 (weights=None), a GPT-2 small from transformers.GPT2Config (a small
torch transformer where transformers is missing), and varlm, a language model
whose sequence length changes every step (it fragments the caching allocator).

Checks, each independent (one failing or timing out does not stop the rest),
one line each: PASS/FAIL/SKIP NAME detail.
  (a) whatif-MODEL-SETTING: the job recorded with the allocator trace; analyze
      --json's alloc_trace_what_if predicts each setting's peak reserved; the same
      job run with PYTORCH_CUDA_ALLOC_CONF set to it reports
      torch.cuda.max_memory_reserved(). Tolerance TOL (default 10 %): the replay
      models one stream and the trace covers the steps up to the third, the
      real run also holds cuBLAS/cuDNN workspaces sized by free memory and its
      later steps; a setting is a PASS within TOL of the real peak reserved.
  (b) oom-avoided: varlm under set_per_process_memory_fraction, the limit
      going down from its unlimited peak reserved to its peak allocated until
      the default OOMs; analyze names the change: an allocator setting, which
      the same job run with it must survive, or none, and then the job with
      expandable_segments:True must fail too.
  (c) oom-categories: a watched job (memrec.watch) that OOMs under a fraction;
      analyze's cause parts (parameters, gradients, optimizer state) against
      the job's own count at the failing step, within 2 %; oom-change: the
      micro-batch analyze names, run under the same limit, must run.
  (d) traceless-MODEL: three small batches recorded with --alloc-trace=false,
      compare --by batch_size --headroom 0% --json predicts the limit; bisection
      from the prediction (at most 7 trials, a fresh process each, to 2 %) finds
      the real one; PASS when the prediction is not above it, the error printed.
      FRACTION runs every job under set_per_process_memory_fraction (memrec's
      prediction is still the whole GPU's: for timing only).
"""
import argparse, json, os, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
SETTINGS = ["default", "expandable_segments:True", "max_split_size_mb:512",
            "garbage_collection_threshold:0.6", "roundup_power2_divisions:4"]


# ---------------------------------------------------------------- the job
def build(model, batch, seq):
    import torch, torch.nn as nn
    if model in ("resnet50", "vit_b_16"):
        import torchvision
        m = getattr(torchvision.models, model)(weights=None)
        x = lambda s: torch.randn(batch, 3, 224, 224, device="cuda")
        y = lambda s: torch.randint(0, 1000, (batch,), device="cuda")
        return m, x, y, nn.CrossEntropyLoss(), lambda out: out
    vocab, width, layers = 50257, 768, 12
    try:
        if model != "gpt2":
            raise ImportError
        from transformers import GPT2Config, GPT2LMHeadModel
        m = GPT2LMHeadModel(GPT2Config(n_positions=1024))
        logits = lambda out: out.logits
    except ImportError:
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(vocab, width)
                layer = nn.TransformerEncoderLayer(width, 12, 4 * width, batch_first=True, norm_first=True)
                self.body = nn.TransformerEncoder(layer, layers if model == "gpt2" else 6)
                self.head = nn.Linear(width, vocab)
            def forward(self, t):
                n = t.shape[1]
                mask = torch.triu(torch.full((n, n), float("-inf"), device=t.device), 1)
                return self.head(self.body(self.emb(t), mask=mask))
        m, logits = LM(), (lambda out: out)
    # varlm: the length changes every step (a fixed sequence, so the same job
    # makes the same requests under each setting)
    lengths = [seq] if model == "gpt2" else [64 + (97 * s) % max(64, seq - 64) for s in range(64)]
    x = lambda s: torch.randint(0, vocab, (batch, lengths[s % len(lengths)]), device="cuda")
    loss_of = nn.CrossEntropyLoss()
    return m, x, None, loss_of, logits


def job(a):
    import torch
    memrec = None
    if a.probe:
        try:
            import memrec
        except Exception:
            memrec = None
    if a.fraction > 0:
        torch.cuda.set_per_process_memory_fraction(a.fraction)
    m, xs, ys, loss_fn, logits = build(a.model, a.batch, a.seq)
    m = m.cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    if memrec and a.watch:
        memrec.watch(m, opt)
    out = {"model": a.model, "batch": a.batch, "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default")}
    def count():
        ps = {p.data_ptr(): p.numel() * p.element_size() for p in m.parameters()}
        gs = {p.grad.data_ptr(): p.grad.numel() * p.grad.element_size() for p in m.parameters() if p.grad is not None}
        os_ = {}
        for st in opt.state.values():
            for v in st.values():
                if torch.is_tensor(v) and v.is_cuda:
                    os_[v.data_ptr()] = v.numel() * v.element_size()
        return {"params": sum(ps.values()), "grads": sum(gs.values()), "optimizer_state": sum(os_.values())}
    s = 0
    try:
        for s in range(a.steps):
            x = xs(s)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.model != "resnet50"):
                o = m(x)
                if ys is not None:
                    loss = loss_fn(logits(o), ys(s))
                else:
                    lg = logits(o)
                    loss = loss_fn(lg[:, :-1].reshape(-1, lg.shape[-1]).float(), x[:, 1:].reshape(-1))
            loss.backward()
            out["count_before_step"] = count()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if memrec:
                memrec.step(s)
        torch.cuda.synchronize()
        out.update(ok=True, steps=a.steps)
    except torch.cuda.OutOfMemoryError as e:
        out.update(ok=False, oom=True, steps=s, count_at_oom=count())
        if memrec:
            memrec.report_oom(e)
    out["max_reserved"] = torch.cuda.max_memory_reserved()
    out["max_allocated"] = torch.cuda.max_memory_allocated()
    out["total"] = torch.cuda.get_device_properties(0).total_memory
    if a.result:
        with open(a.result, "w") as f:
            json.dump(out, f)
    if memrec:
        memrec.flush()
    sys.exit(0 if out.get("ok") else 3)


# ---------------------------------------------------------------- the checks
class Checker:
    def __init__(self, memrec, out):
        self.bin, self.out = memrec, out
        self.db = os.path.join(out, "whatif.db")
        self.tol = float(os.environ.get("TOL", "0.10"))
        self.lines = []
        self.n = 0

    def say(self, verdict, name, detail):
        line = "%s %s %s" % (verdict, name, detail)
        print(line, flush=True)
        self.lines.append(line)

    def sh(self, args, timeout, env=None, check=True):
        e = dict(os.environ, **(env or {}))
        r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=e)
        with open(os.path.join(self.out, "log.txt"), "a") as f:
            f.write("$ %s\n%s%s\n" % (" ".join(args), r.stdout[-4000:], r.stderr[-4000:]))
        if check and r.returncode != 0:
            raise RuntimeError("%s exited %d: %s" % (args[:3], r.returncode, r.stderr.strip()[-300:]))
        return r

    def jobargs(self, model, batch, extra=()):
        self.n += 1
        res = os.path.join(self.out, "res-%d.json" % self.n)
        return [sys.executable, os.path.abspath(__file__), "job", "--model", model, "--batch", str(batch), "--result", res] + list(extra), res

    def run_job(self, model, batch, conf="default", extra=(), timeout=90):
        args, res = self.jobargs(model, batch, extra)
        env = {} if conf == "default" else {"PYTORCH_CUDA_ALLOC_CONF": conf}
        try:
            self.sh(args, timeout, env, check=False)
        except subprocess.TimeoutExpired:
            return None
        return json.load(open(res)) if os.path.exists(res) else None

    def record(self, name, tags, model, batch, extra=(), trace=True, timeout=120, env=None):
        args, res = self.jobargs(model, batch, ["--probe"] + list(extra))
        rec = [self.bin, "--db", self.db, "record", "--name", name]
        for k, v in tags.items():
            rec += ["--tag", "%s=%s" % (k, v)]
        if not trace:
            rec.append("--alloc-trace=false")
        self.sh(rec + ["--"] + args, timeout, env, check=False)
        return json.load(open(res)) if os.path.exists(res) else None

    def analyze(self, name, timeout=120):
        return json.loads(self.sh([self.bin, "--db", self.db, "analyze", name, "--json"], timeout).stdout)

    def guarded(self, name, fn):
        t0 = time.time()
        try:
            fn()
        except subprocess.TimeoutExpired as e:
            self.say("FAIL", name, "timed out: %s" % (e.cmd[:3],))
        except Exception as e:  # one check's failure never stops the rest
            self.say("FAIL", name, "error: %s" % e)
        with open(os.path.join(self.out, "times.txt"), "a") as f:
            f.write("%s %.1f s\n" % (name, time.time() - t0))

    # (a)
    def whatif(self, model, batch, extra=()):
        name = "%s-b%d" % (model, batch)
        if self.record(name, {"batch_size": batch}, model, batch, ["--steps", "4"] + list(extra)) is None:
            raise RuntimeError("the recorded job wrote no result")
        g = self.analyze(name)["gpus"][0]
        pred = {w["setting"]: w["peak_reserved_bytes"] for w in g.get("alloc_trace_what_if") or []}
        if not pred:
            self.say("FAIL", "whatif-" + model, "no alloc_trace_what_if (no trace: probe notes %s)" % g.get("notes"))
            return
        missed = g.get("alloc_trace_missed_bytes", 0)
        if model == "varlm":
            # Its fourth step is its longest and comes after the trace: analyze
            # must say the what-ifs missed it.
            self.say("PASS" if missed > 0 else "FAIL", "whatif-varlm-missed",
                     "analyze says the trace missed %.3f GiB of the run's reserved" % (missed / 2**30))
        for conf in SETTINGS:
            # The same steps the trace covers (the probe stops it after the
            # third): the replay's model against the allocator, like for like.
            r = self.run_job(model, batch, conf, ["--steps", "3"] + list(extra))
            if r is None or not r.get("ok"):
                self.say("FAIL", "whatif-%s-%s" % (model, conf), "the job with the setting did not run: %s" % r)
                continue
            p, real = pred.get(conf), r["max_reserved"]
            err = (p - real) / real
            self.say("PASS" if abs(err) <= self.tol else "FAIL", "whatif-%s-%s" % (model, conf),
                     "predicted %.3f GiB, real %.3f GiB, %+.1f %% (tolerance %.0f %%)" % (p / 2**30, real / 2**30, 100 * err, 100 * self.tol))

    # (b)
    def oom_avoided(self):
        base = self.run_job("varlm", 16, extra=["--steps", "6", "--seq", "1024"])
        if not base or not base.get("ok"):
            raise RuntimeError("varlm does not run by default: %s" % base)
        # Under a limit the default allocator frees its cache and retries
        # before it fails, so it needs less than its unlimited peak reserved
        # and more than the peak allocated; the limits tried go down from the
        # one to the other, and the first that the default fails under is
        # the check's OOM: memrec's change for it (a setting, or none) is run.
        A, R, T = base["max_allocated"], base["max_reserved"], base["total"]
        for i, lim in enumerate([0.97 * R, A + 0.6 * (R - A), A + 0.35 * (R - A), A + 0.15 * (R - A), 1.03 * A]):
            extra = ["--steps", "6", "--seq", "1024", "--fraction", "%.5f" % (lim / T)]
            name = "varlm-oom-%d" % i
            r = self.record(name, {"batch_size": 16}, "varlm", 16, extra)
            if r and r.get("ok"):
                continue
            ooms = [o for o in self.analyze(name)["gpus"][0].get("ooms") or [] if o.get("outcome") == "fatal"]
            ch = (ooms[-1].get("cause") or {}).get("change") if ooms else None
            if not ch:
                self.say("FAIL", "oom-avoided", "no change named for the OOM at %.2f GiB" % (lim / 2**30))
                return
            limit = "limit %.2f GiB (peak allocated %.2f, reserved %.2f without one)" % (lim / 2**30, A / 2**30, R / 2**30)
            if ch.get("kind") == "allocator_setting":
                r2 = self.run_job("varlm", 16, ch["setting"], extra)
                ok = bool(r2 and r2.get("ok"))
                self.say("PASS" if ok else "FAIL", "oom-avoided", "%s: memrec names %s; with it the job %s" % (
                    limit, ch["setting"], "ran its steps" if ok else "failed: %s" % r2))
                return
            # memrec says no setting would have served it: expandable
            # segments, the one that strands least, must fail too.
            r2 = self.run_job("varlm", 16, "expandable_segments:True", extra)
            failed = not (r2 and r2.get("ok"))
            self.say("PASS" if failed else "FAIL", "oom-avoided", "%s: memrec names no setting (%s); with expandable_segments:True the job %s" % (
                limit, ch.get("words"), "fails too" if failed else "ran its steps"))
            return
        self.say("SKIP", "oom-avoided", "the default ran under every limit down to 1.03 x its peak allocated (%.2f GiB)" % (1.03 * A / 2**30))

    # (c)
    def oom_categories(self):
        model, batch = "gpt2", 8
        base = self.run_job(model, batch, extra=["--steps", "2", "--seq", "1024"])
        if not base or not base.get("ok"):
            raise RuntimeError("gpt2 does not run by default: %s" % base)
        frac = 0.9 * base["max_allocated"] / base["total"]
        extra = ["--steps", "3", "--seq", "1024", "--fraction", "%.5f" % frac]
        r = self.record("gpt2-oom", {"batch_size": batch}, model, batch, extra + ["--watch"])
        if not r or r.get("ok"):
            self.say("SKIP", "oom-categories", "did not run out of memory at fraction %.4f" % frac)
            return
        ooms = [o for o in self.analyze("gpt2-oom")["gpus"][0].get("ooms") or [] if o.get("outcome") == "fatal"]
        c = ooms[-1].get("cause") if ooms else None
        if not c or c.get("basis") != "watched_budget":
            self.say("FAIL", "oom-categories", "no watched cause: %s" % c)
            return
        parts = {p["part"]: p["bytes"] for p in c["parts"]}
        own = r["count_at_oom"]
        bad = []
        for k in ("params", "optimizer_state"):
            want, got = own[k], parts.get({"params": "parameters"}.get(k, k), 0)
            if abs(got - want) > 0.02 * max(want, 1):
                bad.append("%s memrec %d, job %d" % (k, got, want))
        ch = c["change"]
        self.say("FAIL" if bad else "PASS", "oom-categories",
                 "; ".join(bad) or "parameters %.2f GiB, optimizer state %.2f GiB as the job counts; gradients memrec %.2f GiB, job %.2f GiB; change: %s"
                 % (own["params"] / 2**30, own["optimizer_state"] / 2**30, parts.get("gradients", 0) / 2**30, own["grads"] / 2**30, ch["words"]))
        # The change named, run: a micro-batch of N under the same limit.
        n = int(ch.get("micro_batch") or 0)
        if ch.get("kind") == "micro_batch" and n >= 1:
            r2 = self.run_job(model, n, extra=extra)
            ok = bool(r2 and r2.get("ok"))
            self.say("PASS" if ok else "FAIL", "oom-change", "the micro-batch of %d memrec names %s under the same limit" % (
                n, "runs its steps" if ok else "fails too: %s" % r2))
        else:
            self.say("SKIP", "oom-change", "memrec names no micro-batch to run: %s" % ch.get("kind"))

    # (d)
    def traceless(self, model, batches, frac):
        # Without a fraction (FRACTION=0, the default) the limit is the GPU's,
        # which memrec sees; under one, memrec's prediction is for the whole
        # GPU and the comparison says how far the fraction moved it.
        extra = ["--steps", "3"] + (["--fraction", "%.3f" % frac] if frac > 0 else [])
        names = []
        for b in batches:
            n = "tl-%s-b%d" % (model, b)
            self.record(n, {"batch_size": b, "check": "traceless-" + model}, model, b, extra, trace=False)
            names.append(n)
        c = json.loads(self.sh([self.bin, "--db", self.db, "compare", "--by", "batch_size", "--headroom", "0%", "--json"] + names, 120).stdout)
        by = c.get("by_tag") or {}
        pred = by.get("max_fitting_value_no_headroom")
        if pred is None:
            self.say("FAIL", "traceless-" + model, "no prediction: %s" % by.get("statement"))
            return
        runs = lambda b: bool((self.run_job(model, b, extra=extra, timeout=120) or {}).get("ok"))
        lo, hi, trials = batches[-1], None, 0
        b = max(lo + 1, int(pred))
        while trials < 7 and (hi is None or hi - lo > max(1, lo // 50)):
            trials += 1
            if runs(b):
                lo = b
            else:
                hi = b
            b = (lo + hi) // 2 if hi is not None else int(lo * 1.25) + 1
        err = (pred - lo) / lo
        self.say("PASS" if pred <= (hi or float("inf")) - 1 else "FAIL", "traceless-" + model,
                 "predicted %d, largest that ran %d (smallest that failed %s, %d trials): %+.1f %% (basis %s)" % (pred, lo, hi, trials, 100 * err, by.get("allowance_basis")))


def check(a):
    os.makedirs(a.out, exist_ok=True)
    c = Checker(os.path.abspath(a.memrec), a.out)
    deadline = time.time() + float(os.environ.get("BUDGET_S", "340"))
    plan = [
        ("whatif-resnet50", lambda: c.whatif("resnet50", 64)),
        ("whatif-gpt2", lambda: c.whatif("gpt2", 8, ["--seq", "1024"])),
        ("whatif-vit_b_16", lambda: c.whatif("vit_b_16", 64)),
        ("whatif-varlm", lambda: c.whatif("varlm", 16, ["--seq", "1024"])),
        ("oom-avoided", c.oom_avoided),
        ("oom-categories", c.oom_categories),
        ("traceless-resnet50", lambda: c.traceless("resnet50", [16, 32, 64], float(os.environ.get("FRACTION", "0")))),
    ]
    only = os.environ.get("ONLY", "")
    for name, fn in plan:
        if only and not any(name.startswith(o) for o in only.split(",")):
            continue
        if time.time() > deadline:
            c.say("SKIP", name, "out of time")
            continue
        c.guarded(name, fn)
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write("\n".join(c.lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    j = sub.add_parser("job")
    j.add_argument("--model", default="resnet50")
    j.add_argument("--batch", type=int, default=64)
    j.add_argument("--steps", type=int, default=4)
    j.add_argument("--seq", type=int, default=1024)
    j.add_argument("--fraction", type=float, default=0)
    j.add_argument("--probe", action="store_true")
    j.add_argument("--watch", action="store_true")
    j.add_argument("--result", default="")
    k = sub.add_parser("check")
    k.add_argument("memrec")
    k.add_argument("out")
    a = ap.parse_args()
    job(a) if a.cmd == "job" else check(a)


if __name__ == "__main__":
    main()
