"""Checks a merged multi-node run against each rank's own PyTorch readings.

    python3 bench/validation/check_multinode.py MERGED.jsonl ANALYSIS.json RANK0.jsonl RANK1.jsonl ...

MERGED.jsonl is `memrec export` of the merged run, ANALYSIS.json `memrec analyze
--json` of it, RANKi.jsonl the log bench/validation/ddp_probe.py wrote on rank i. For every
step a rank logged, the allocator sample memrec stored with that rank's step mark
(same rank, same time) must hold exactly the allocated, reserved and peak bytes
the rank read from PyTorch; the merged run must have one GPU per rank, on its own
host; analyze's per-GPU step peak must be the largest peak the rank logged.
Prints PASS or FAIL per rank and overall.
"""
import json
import sys


def main(merged, analysis, logs):
    gpus, steps, torch = [], {}, {}
    for line in open(merged):
        r = json.loads(line)
        if r["type"] == "gpu":
            gpus.append(r)
        elif r["type"] == "mark" and r.get("kind") == "step" and "rank" in r:
            steps[(r["rank"], r["step"])] = r["t_ns"]
        elif r["type"] == "torch" and "rank" in r:
            torch[(r["rank"], r["t_ns"])] = r
    rep = json.load(open(analysis))
    ok = True
    hosts = {g.get("host") for g in gpus}
    print(f"merged run: {len(gpus)} GPUs on hosts {sorted(h for h in hosts if h)}; offsets "
          + ", ".join(f"{h['host']} {h['clock_offset_ns'] / 1e6:+.3f} ms" for h in rep.get("hosts", [])))
    if len(gpus) != len(logs) or len(hosts) != len(logs):
        print(f"FAIL: want {len(logs)} GPUs on {len(logs)} hosts")
        ok = False
    for log in logs:
        lines = [json.loads(l) for l in open(log)]
        head, recs = lines[0], lines[1:]
        rank = head["rank"]
        matched, mismatched, missing = 0, [], 0
        gpu_of_rank = None
        for rec in recs:
            t = steps.get((rank, rec["step"]))
            s = torch.get((rank, t)) if t is not None else None
            if s is None:
                missing += 1
                continue
            gpu_of_rank = s["gpu"]
            got = (s["allocated_bytes"], s["reserved_bytes"], s.get("peak_allocated_bytes"))
            want = (rec["allocated"], rec["reserved"], rec["peak"])
            if got == want:
                matched += 1
            else:
                mismatched.append((rec["step"], got, want))
        g = next((x for x in rep["gpus"] if x["gpu"] == gpu_of_rank), None)
        peak_logged = max(r["peak"] for r in recs)
        peak_ok = g is not None and g.get("peak_step_allocated_bytes") == peak_logged
        good = matched >= 0.95 * len(recs) and not mismatched and peak_ok
        ok &= good
        where = f"{g.get('host')}/gpu{g.get('host_gpu', 0)}" if g else "no GPU"
        print(f"rank {rank} on {where}: {matched}/{len(recs)} steps match torch exactly, {len(mismatched)} differ, {missing} without a memrec sample; "
              f"step peak memrec {g.get('peak_step_allocated_bytes') if g else None} vs torch {peak_logged}; "
              f"leak: {g['leak']['verdict'] if g else '-'} -> {'PASS' if good else 'FAIL'}")
        for m in mismatched[:3]:
            print("   step %d: memrec %s, torch %s" % m)
    if rep.get("worst_gpu"):
        print(f"worst GPU: {rep['worst_gpu']['label']}: {rep['worst_gpu']['reason']}")
    if rep.get("imbalance"):
        im = rep["imbalance"]
        print(f"imbalance ({im['basis']}): {im['ratio']:.2f} (max {im['max_gpu']}, min {im['min_gpu']})")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
