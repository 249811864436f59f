"""Checks a memrec export of examples/train.py against nvidia-smi and the job.

    python3 bench/validation/check_record.py train.jsonl smi.csv train-log.jsonl

- at rest (between the job's rest_start/rest_end marks) every nvidia-smi
  reading agrees with memrec's sample nearest in time within 1 MiB;
- the per-process series holds the job's pid with its memory.
"""
import bisect
import datetime
import json
import sys

MiB = 1 << 20


def main(export, smi, joblog):
    samples, procs, marks = [], {}, []
    for line in open(export):
        r = json.loads(line)
        if r["type"] == "sample":
            samples.append((r["t_ns"], r["used_bytes"]))
        elif r["type"] == "proc":
            procs.setdefault(r["pid"], []).append((r["t_ns"], r["used_bytes"]))
        elif r["type"] == "mark":
            marks.append(r)
    samples.sort()
    times = [t for t, _ in samples]

    readings = []
    for line in open(smi):
        ts, used = [p.strip() for p in line.split(",")]
        dt = datetime.datetime.strptime(ts, "%Y/%m/%d %H:%M:%S.%f")
        readings.append((int(dt.timestamp() * 1e9), float(used)))

    windows, start = [], None
    for m in marks:
        text = m.get("text", "")
        if text.startswith("rest_start"):
            start = m["t_ns"]
        elif text.startswith("rest_end") and start is not None:
            windows.append((start + 500_000_000, m["t_ns"] - 200_000_000))
            start = None
    worst, n = 0.0, 0
    for lo, hi in windows:
        for t, smi_mib in readings:
            if lo <= t <= hi:
                i = min(bisect.bisect_left(times, t), len(times) - 1)
                memrec_mib = samples[i][1] / MiB
                worst = max(worst, abs(memrec_mib - smi_mib))
                n += 1
    ok = n > 0 and worst <= 1.0
    print(f"at rest: {n} nvidia-smi readings in {len(windows)} windows; largest difference {worst:.3f} MiB -> {'PASS' if ok else 'FAIL'}")

    pid = None
    for line in open(joblog):
        r = json.loads(line)
        if "pid" in r:
            pid = r["pid"]
    series = procs.get(pid, [])
    peak = max((u for _, u in series), default=0)
    ok2 = len(series) > 0 and peak > 100 * MiB
    print(f"per-process: job pid {pid} has {len(series)} samples, peak {peak / MiB:.0f} MiB; pids seen {sorted(procs)} -> {'PASS' if ok2 else 'FAIL'}")
    steps = sum(1 for m in marks if m["kind"] == "step")
    print(f"marks: {len(marks)} ({steps} steps); device samples {len(samples)}")
    return 0 if ok and ok2 else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
