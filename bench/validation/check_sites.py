"""Checks the output of bench/validation/h200_sites.sh: reads the jobs' own truth
(their JSON), memrec's exports (the raw site snapshots) and memrec analyze
--json, and prints one PASS or FAIL line per check with its figures."""
import json
import os
import statistics
import sys

W = sys.argv[1]
results = []


def load(name):
    try:
        return json.load(open(os.path.join(W, name)))
    except (OSError, ValueError) as e:
        return {"error": str(e)}


def lines(run):
    out = []
    try:
        for l in open(os.path.join(W, run + ".jsonl")):
            out.append(json.loads(l))
    except (OSError, ValueError):
        pass
    return out


def check(name, ok, text):
    results.append(ok)
    print("%s %-6s %s" % ("PASS" if ok else "FAIL", name, text))


def site_growth(sites, pid=None):
    """Live bytes by (file, line) at the first and last epoch_end snapshot."""
    ends = [s for s in sites if s["reason"] == "epoch_end" and (pid is None or s["pid"] == pid)]
    if len(ends) < 2:
        return {}, ends

    def by(s):
        return {(x["file"], x["line"]): x["live_bytes"] for x in s.get("sites", [])}
    a, b = by(ends[0]), by(ends[-1])
    return {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b)}, ends


def allocated_at(ls, t, gpu):
    best = None
    for l in ls:
        if l["type"] == "torch" and l["gpu"] == gpu and l["t_ns"] <= t:
            best = l["allocated_bytes"]
    return best


def gpu_report(an, gpu=0):
    for g in an.get("gpus", []):
        if g["gpu"] == gpu:
            return g
    return {}


# leak: the verdict names the helper, which explains >= 90 % of the growth
truth = load("leak.json")
ls = lines("leak")
sites = [l for l in ls if l["type"] == "sites"]
growth, ends = site_growth(sites)
g = gpu_report(load("leak.analyze.json"))
leak = g.get("leak", {})
held = leak.get("held_by") or {}
want = (truth.get("file"), truth.get("leak_line"))
alloc_growth = None
if len(ends) >= 2:
    a0, a1 = allocated_at(ls, ends[0]["t_ns"], 0), allocated_at(ls, ends[-1]["t_ns"], 0)
    if a0 is not None and a1 is not None:
        alloc_growth = a1 - a0
every = max([l.get("sampled_every", 1) for l in ends] or [1])  # stacks kept on one step in this many
share_raw = every * growth.get(want, 0) / alloc_growth if alloc_growth else 0
check("leak", leak.get("verdict") == "leak" and held.get("line") == want[1] and held.get("file") == want[0]
      and held.get("share", 0) >= 0.9 and share_raw >= 0.9,
      "verdict %s, held_by %s:%s `%s` share %.3f of the slope; from the raw snapshots: the helper's site grew %s B "
      "against %s B of allocated growth (%.3f; stacks on one step in %d); %d epoch-end snapshots; helper at line %s"
      % (leak.get("verdict"), os.path.basename(str(held.get("file"))), held.get("line"), held.get("func"),
         held.get("share", 0), growth.get(want), alloc_growth, share_raw, every, len(ends), want[1]))

# mlpleak: the same on a CPU-bound job, where the probe samples the stacks
truth = load("mlpleak.json")
g = gpu_report(load("mlpleak.analyze.json"))
leak = g.get("leak", {})
held = leak.get("held_by") or {}
grow = ((g.get("where") or {}).get("growing") or [{}])[0]
per_step = grow.get("bytes_per_step") or 0
want_b = truth.get("leak_bytes_per_step", 0)
check("mlpleak", leak.get("verdict") == "leak" and held.get("line") == truth.get("leak_line") and held.get("share", 0) >= 0.9
      and abs(per_step - want_b) <= 0.1 * want_b,
      "tiny MLP (CPU-bound), %s steps an epoch; the stacks cost %s of a step, so kept on one step in %s; verdict %s, "
      "held_by line %s `%s` share %.3f (sampled_every %s); the site's growth %.0f B/step against %d planted"
      % (truth.get("steps_per_epoch"), "%.1f %%" % (100 * truth["cost"]) if truth.get("cost") is not None else "n/a",
         truth.get("every"), leak.get("verdict"), held.get("line"), held.get("func"), held.get("share", 0),
         held.get("sampled_every"), per_step, want_b))

# clean: no growing site above 1 MiB per epoch
ls = lines("clean")
growth, ends = site_growth([l for l in ls if l["type"] == "sites"])
epochs = max(len(ends) - 1, 1)
worst = max(growth.values(), default=0) / epochs
gc = gpu_report(load("clean.analyze.json"))
big = [x for x in ((gc.get("where") or {}).get("growing") or []) if (x.get("bytes_per_epoch") or 0) > 1 << 20]
check("clean", len(ends) >= 2 and worst <= 1 << 20 and not big,
      "%d epoch-end snapshots; largest site growth %.0f B/epoch; analyze lists %d growing sites above 1 MiB/epoch; verdict %s"
      % (len(ends), worst, len(big), gc.get("leak", {}).get("verdict")))

# oom: the largest holders at the OOM
truth = load("oom.json")
go = gpu_report(load("oom.analyze.json"))
holders = []
for o in go.get("ooms", []):
    holders = holders or o.get("holders") or []
raw = [l for l in lines("oom") if l["type"] == "sites" and l["reason"] == "oom"]
top = holders[0] if holders else {}
check("oom", truth.get("oom") is True and bool(raw) and top.get("line") == truth.get("hold_line"),
      "OOM raised %s; %d OOM snapshots; holders: %s"
      % (truth.get("oom"), len(raw), "; ".join("%s `%s` %.2f GiB in %d blocks" % (h["site"], h["func"], h["live_bytes"] / 2**30,
                                                                                    h["live_blocks"]) for h in holders[:4])))

# ddp: per-rank sites on the right GPU
ls = lines("ddp")
sites = [l for l in ls if l["type"] == "sites"]
pairs = sorted({(l.get("rank"), l["gpu"]) for l in sites})
an = load("ddp.analyze.json")
named = {}
for g in an.get("gpus", []):
    h = (g.get("leak") or {}).get("held_by") or {}
    gr = ((g.get("where") or {}).get("growing") or [{}])
    named[g["gpu"]] = (h.get("line"), gr[0].get("line"))
t0 = load("ddp-rank0.json")
check("ddp", pairs == [(0, 0), (1, 1)] and all(gr == t0.get("leak_line") for _, gr in named.values()) and len(named) == 2,
      "(rank, gpu) of the site snapshots: %s; top growing line per GPU (held_by, growing): %s; helper at line %s"
      % (pairs, named, t0.get("leak_line")))

# speed: --sites at defaults over whole epochs, GPU-bound and CPU-bound
s = load("speed.json")
if "mlp" in s and "resnet18" in s:
    ok, parts = True, []
    for name in ("resnet18", "mlp"):
        j = s[name]
        off, on = statistics.median(j["epoch_s_off"]), statistics.median(j["epoch_s_on"])
        paired = statistics.median(b / a - 1 for a, b in zip(j["epoch_s_off"], j["epoch_s_on"]))
        ok = ok and paired <= 0.03
        parts.append("%s %d steps an epoch: %.4f s without sites, %.4f with (%+.2f %%; median of the pairs' ratios %+.2f %%); "
                     "stacks cost %s of a step, kept on one step in %s; trace windows took %.3f s"
                     % (name, j["steps_per_epoch"], off, on, 100 * (on / off - 1), 100 * paired,
                        "%.1f %%" % (100 * j["cost"]) if j.get("cost") is not None else "n/a", j.get("every"), j.get("windows_cost_s", 0)))
    check("speed", ok, "%d pairs of whole epochs (off/on, on/off, ...), a synchronize after each step: " % len(s["mlp"]["epoch_s_off"])
          + "; ".join(parts))
else:
    check("speed", False, str(s))

# r50: one snapshot and its summary on the training thread; message size
r = load("r50.json")
sizes = []
for run in ("leak", "clean", "oom", "ddp", "r50", "speed"):
    sizes += [len(json.dumps(l, separators=(",", ":"))) for l in lines(run) if l["type"] == "sites"]
dropped = []
for run in ("leak", "clean", "oom", "ddp", "r50", "speed"):
    try:
        for l in open(os.path.join(W, run + ".record.txt")):
            if "socket messages dropped" in l:
                dropped.append(l.split("),")[-1].strip())
    except OSError:
        pass
if "snapshot_summary_s_state" in r:
    st = statistics.median(r["snapshot_summary_s_state"])
    wn = r.get("window_summary_s")
    check("r50", 0 < st <= 0.2 and (wn is None or wn <= 0.2) and max(sizes, default=0) <= 64 << 10,
          "ResNet-50 bs64: snapshot + summary %.1f ms (state, median of 5), %s ms at a window's end, %s ms at the epoch end; "
          "largest site line %d B of %d; recorder: %s"
          % (st * 1e3, "%.1f" % (wn * 1e3) if wn is not None else "n/a", "%.1f" % (r.get("epoch_end_summary_s", 0) * 1e3),
             max(sizes, default=0), len(sizes), "; ".join(sorted(set(dropped)))))
else:
    check("r50", False, str(r))

# mlp: the probe's cost per step, CPU-bound and GPU-bound
m = load("mlp.json")
if "mlp" in m and "resnet18" in m:
    a, b = m["mlp"], m["resnet18"]
    check("mlp", a["added_us"] <= 25,
          "memrec.step() adds %.1f us/step (wall; middle half of the pairs %.1f..%.1f; %.1f us of the training thread's CPU, "
          "%.1f us of all threads'; the call itself %.2f us) to a tiny MLP (%.3f ms/step, CPU-bound) and %.1f us/step "
          "(%.1f us thread CPU, call %.2f us) to ResNet-18 bs64 (%.2f ms/step, GPU-bound); medians of %d pairs of %d-step "
          "blocks (MLP) and %d pairs of %d-step blocks (ResNet), order alternating; probe %s"
          % (a["added_us"], a["added_us_p25_p75"][0], a["added_us_p25_p75"][1], a["added_thread_us"], a["added_cpu_us"],
             a["call_us"], a["step_ms"], b["added_us"], b["added_thread_us"], b["call_us"], b["step_ms"],
             a["pairs"], a["block_steps"], b["pairs"], b["block_steps"], m.get("probe")))
else:
    check("mlp", False, str(m))

print("%d passed, %d failed" % (sum(results), len(results) - sum(results)))
