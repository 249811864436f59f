"""Checks a JAX run recorded by `memrec record --jax` (bench/h200/jax_check.sh).

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
deltas = {script[i]["bytes_in_use"] - script[i - 1]["bytes_in_use"] for i in range(1, len(script))}
check("the script's own readings grow by the leak each step", deltas == {leak}, "deltas %s" % sorted(deltas)[:5])
g = rep["gpus"][0]
lk = g.get("leak") or {}
check("analyze finds the leak", lk.get("verdict") == "leak", str(lk.get("verdict")))
check("with its exact slope", lk.get("slope_bytes_per_step") == leak,
      "%s B/step, 95%% [%s, %s], want %d" % (lk.get("slope_bytes_per_step"), lk.get("ci95_low_bytes_per_step"),
                                           lk.get("ci95_high_bytes_per_step"), leak))
print("FAIL" if failed else "PASS")
sys.exit(1 if failed else 0)
