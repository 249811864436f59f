"""Checks the probe's samples in a memrec export against the training job's
own log (examples/train.py --log).

    python3 bench/validation/check_probe.py export.jsonl job-log.jsonl [--leak BYTES]

- at every step end the probe's allocated equals torch.cuda.memory_allocated()
  as the script read it just before calling memrec.step();
- with --leak, step-end allocated grows by exactly BYTES per step.
"""
import bisect
import json
import statistics
import sys


def main(export, joblog, leak=None):
    pid, logged = None, {}
    for line in open(joblog):
        r = json.loads(line)
        if "pid" in r:
            pid = r["pid"]
        if "allocated" in r:
            logged[r["step"]] = r["allocated"]
    steps, torch_samples = {}, []
    for line in open(export):
        r = json.loads(line)
        if r["type"] == "mark" and r["kind"] == "step":
            steps[r["step"]] = r["t_ns"]
        elif r["type"] == "torch" and r["pid"] == pid:
            torch_samples.append((r["t_ns"], r["allocated_bytes"]))
    torch_samples.sort()
    times = [t for t, _ in torch_samples]
    equal, at_step = 0, {}
    for s, t in steps.items():
        i = bisect.bisect_left(times, t)
        if i < len(times):
            at_step[s] = torch_samples[i][1]
            equal += at_step[s] == logged.get(s)
    ok = len(steps) > 0 and equal == len(steps)
    print(f"step ends: {equal} of {len(steps)} probe samples equal torch.cuda.memory_allocated() -> {'PASS' if ok else 'FAIL'}")
    if leak is not None:
        order = sorted(at_step)
        deltas = [at_step[b] - at_step[a] for a, b in zip(order, order[1:]) if b == a + 1]
        steady = deltas[len(deltas) // 4:]  # past the warm-up
        med = statistics.median(steady)
        exact = sum(1 for d in steady if d == leak)
        ok2 = med == leak
        print(f"leak: median step-end growth {med} B (planted {leak} B); {exact} of {len(steady)} steps exactly -> {'PASS' if ok2 else 'FAIL'}")
        ok = ok and ok2
    return 0 if ok else 1


if __name__ == "__main__":
    leak = None
    if "--leak" in sys.argv:
        leak = int(sys.argv[sys.argv.index("--leak") + 1])
    sys.exit(main(sys.argv[1], sys.argv[2], leak))
