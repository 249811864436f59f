"""Checks a recording of one training job per GPU (memrec record --procs).

    python3 bench/validation/check_multi.py RUN.jsonl LOG0.jsonl LOG1.jsonl ...

LOGi is the --log of the job on GPU i (started with CUDA_VISIBLE_DEVICES=i, so
CUDA calls its GPU 0). Each GPU must have device samples that rise while its job
trains; its per-process series must hold its own job's pid and no other job's;
the job's allocator samples (from the probe) must carry the GPU's NVML index.
"""
import json
import sys

MiB = 1 << 20


def main(run, logs):
    dev, procs, torch = {}, {}, {}
    for line in open(run):
        r = json.loads(line)
        if r["type"] == "sample":
            dev.setdefault(r["gpu"], []).append(r["used_bytes"])
        elif r["type"] == "proc":
            procs.setdefault(r["gpu"], {}).setdefault(r["pid"], []).append(r["used_bytes"])
        elif r["type"] == "torch":
            torch.setdefault(r["pid"], set()).add(r["gpu"])
    pids = []
    for log in logs:
        pids.append(next(json.loads(l)["pid"] for l in open(log) if '"pid"' in l))
    ok = True
    for gpu, pid in enumerate(pids):
        used = dev.get(gpu, [])
        mine = procs.get(gpu, {}).get(pid, [])
        others = [p for p in procs.get(gpu, {}) if p in pids and p != pid]
        good = len(used) > 0 and max(used) - min(used) > 256 * MiB and len(mine) > 0 and not others and torch.get(pid) == {gpu}
        ok &= good
        print(f"GPU {gpu}: {len(used)} device samples, {min(used, default=0) / MiB:.0f}..{max(used, default=0) / MiB:.0f} MiB; "
              f"job pid {pid}: {len(mine)} process samples, peak {max(mine, default=0) / MiB:.0f} MiB; "
              f"other jobs' pids here: {others}; its allocator samples on GPUs {sorted(torch.get(pid, []))} -> {'PASS' if good else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
