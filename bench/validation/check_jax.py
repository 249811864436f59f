"""Checks a JAX run recorded by `memrec record --jax` (bench/validation/jax_check.sh).

Usage: check_jax.py RUN.jsonl SCRIPT.jsonl ANALYZE.json LEAK_BYTES

RUN.jsonl is `memrec export RUN`; SCRIPT.jsonl what jax_train.py read itself
from memory_stats() after each step; ANALYZE.json `memrec analyze --json`.
Prints PASS/FAIL per check and "PASS" or "FAIL" last.
"""
import json
import sys

failed = []


def check(name, ok, detail=""):
    print("%s %s %s" % ("PASS" if ok else "FAIL", name, detail))
    if not ok:
        failed.append(name)


steps, torch = {}, []
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["type"] == "mark" and r["kind"] == "step":
        steps[r["t_ns"]] = r["step"]
    elif r["type"] == "torch":
        torch.append(r)
script = [json.loads(l) for l in open(sys.argv[2])]
rep = json.load(open(sys.argv[3]))
leak = int(sys.argv[4])

# The probe samples at the step mark's own nanosecond (one sample a step here).
at_step = {steps[s["t_ns"]]: s for s in torch if s["t_ns"] in steps}
check("one allocator sample per step", len(at_step) == len(script), "%d samples at %d steps" % (len(at_step), len(script)))
bad = [(r["step"], r["bytes_in_use"], at_step[r["step"]]["allocated_bytes"]) for r in script
       if r["step"] in at_step and at_step[r["step"]]["allocated_bytes"] != r["bytes_in_use"]]
check("every step-end sample equals memory_stats()['bytes_in_use']", not bad and at_step,
      "%d differ, first %s" % (len(bad), bad[:3]))
pool = script[-1]["pool_bytes"] or script[-1]["bytes_limit"]
check("reserved is the pool (or limit)", all(s["reserved_bytes"] == pool for s in at_step.values()), "pool %s" % pool)
# The script's own readings alternate from step to step (on the H200, jax
# 0.11.2: +14.3 MB, -12.2 MB, +13.3 MB, ... shrinking over the first epoch;
# the swing cancels over two steps), so one step's change is not the leak.
# After the first epoch (the warm-up), every two steps add exactly 2 x the
# leak, and the last two epochs exactly 200 x.
per_epoch = len(script) // 3
inuse = [r["bytes_in_use"] for r in script]
two = {inuse[i] - inuse[i - 2] for i in range(per_epoch + 2, len(inuse))}
check("after the warm-up, the script's own readings grow by 2 x the leak every two steps", two == {2 * leak},
      "two-step deltas %s" % sorted(two)[:5])
check("and by exactly the leak a step over the last two epochs", inuse[-1] - inuse[per_epoch - 1] == leak * (len(inuse) - per_epoch),
      "%d B over %d steps" % (inuse[-1] - inuse[per_epoch - 1], len(inuse) - per_epoch))
g = rep["gpus"][0]
lk = g.get("leak") or {}
check("analyze finds the leak", lk.get("verdict") == "leak", str(lk.get("verdict")))
check("with its exact slope", lk.get("slope_bytes_per_step") == leak,
      "%s B/step, 95%% [%s, %s], want %d" % (lk.get("slope_bytes_per_step"), lk.get("ci95_low_bytes_per_step"),
                                           lk.get("ci95_high_bytes_per_step"), leak))
print("FAIL" if failed else "PASS")
sys.exit(1 if failed else 0)
