"""The overhead table from bench/perf/overhead.sh's runs.

    python3 overhead_table.py overhead.jsonl [--rounds]

Per job and mode: the step time after warm-up (the median of each round's
figure; a run's figure is its median step, or for the loader-bound job its
mean step, for there most steps find a batch waiting and a few wait for the
workers, so the median is the fast steps' time and the mean the job's pace), its ratio to the same job without memrec in the same round
(the mean of the round's two runs without memrec, at its start and its end),
the spread of that ratio over the rounds, and the one-off costs against the
rounds without memrec: start-up (launch to the first timed step), the third
step (where the allocator trace is taken and turned off) and exit (the job's
last step to the command's return). For the runs without memrec: how far a
round's two differ (the median over the rounds: what a round resolves) and
how far the rounds' means differ (the GPU's drift over the whole run).

--rounds adds, per job and mode, the ratio of each round (in round order),
and for the runs without memrec how far the two halves of one run's timed
steps differ (the median over the runs, and the largest): the GPU's drift
within a run, which no number of runs takes away.
"""
import json
import statistics
import sys
from collections import defaultdict


# Jobs whose pace is the mean step, not the median (see the top).
MEAN = {"loader"}


def read(path):
    rows = [json.loads(l) for l in open(path)]
    for r in rows:
        steps, r["ready_ns"], r["end_ns"] = [], None, None
        try:
            for l in open(r["log"]):
                d = json.loads(l)
                if "ready_ns" in d:
                    r["ready_ns"] = d["ready_ns"]
                elif "end_ns" in d:
                    r["end_ns"] = d["end_ns"]
                elif "s" in d:
                    steps.append(d)
        except FileNotFoundError:
            pass
        r["steps"] = steps
        timed = [s["s"] for s in steps if not s["warm"]]
        pace = statistics.fmean if r["job"] in MEAN else statistics.median
        r["median"] = pace(timed) if timed else None
        r["third"] = steps[2]["s"] if len(steps) > 2 else None
    return [r for r in rows if r["round"] > 0]


def halves(r):
    """How far the first and second half of a run's timed steps differ,
    each half's pace against the other's."""
    timed = [s["s"] for s in r["steps"] if not s["warm"]]
    if len(timed) < 20:
        return None
    pace = statistics.fmean if r["job"] in MEAN else statistics.median
    h = len(timed) // 2
    a, b = pace(timed[:h]), pace(timed[h:])
    return abs(a / b - 1)


def main():
    rows = read(sys.argv[1])
    by = defaultdict(list)
    for r in rows:
        by[(r["job"], r["mode"])].append(r)
    jobs = sorted({r["job"] for r in rows}, key=["transformer", "short", "launch", "loader"].index)
    modes = []
    for r in rows:
        if r["mode"] not in modes:
            modes.append(r["mode"])
    modes.sort(key=lambda m: (m != "off", m))
    per = {}
    print("| job | mode | step (median; loader: mean) | ratio to off (spread over rounds) | rounds | start-up | 3rd step | exit |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for job in jobs:
        # A round's baseline: the mean of its runs without memrec (two where
        # the round closed with one too).
        base = defaultdict(list)
        for r in by[(job, "off")] + by[(job, "off_end")]:
            if r["median"]:
                base[r["round"]].append(r["median"])
        off = {k: {"median": statistics.fmean(v)} for k, v in base.items()}
        if not off:
            print(f"| {job} | (no complete round without memrec: nothing to compare) | | | | | | |")
            continue
        offmed = statistics.median([r["median"] for r in off.values()])
        spread = (max(r["median"] for r in off.values()) - min(r["median"] for r in off.values())) / offmed
        pairs = [abs(v[0] - v[1]) / statistics.fmean(v) for v in base.values() if len(v) == 2]
        for mode in modes:
            if mode == "off_end":
                continue
            runs = by[(job, mode)] + (by[(job, "off_end")] if mode == "off" else [])
            rs = [r for r in runs if r["median"] and r["rc"] == 0]
            bad = len(runs) - len(rs)
            if not rs:
                print(f"| {job} | {mode} | failed | | {len(runs)} | | | |")
                continue
            med = statistics.median([r["median"] for r in rs])
            start = statistics.median([(r["ready_ns"] - r["launch_ns"]) / 1e9 for r in rs if r["ready_ns"]])
            exit_ = statistics.median([(r["done_ns"] - r["end_ns"]) / 1e9 for r in rs if r["end_ns"]])
            third = statistics.median([r["third"] for r in rs if r["third"]])
            if mode == "off":
                within = f"a round's two {100 * statistics.median(pairs):.2f} % apart (median), " if pairs else ""
                rat = f"1 ({within}rounds {100 * spread:.2f} % apart)"
            else:
                ratios = [r["median"] / off[r["round"]]["median"] for r in rs if r["round"] in off]
                rat = f"{statistics.median(ratios):.4f} ({min(ratios):.4f}–{max(ratios):.4f})"
            note = f" ({bad} failed)" if bad else ""
            print(f"| {job} | {mode} | {1e3 * med:.3f} ms | {rat} | {len(rs)}{note} | {start:.2f} s | {1e3 * third:.1f} ms | {exit_:.2f} s |")
            if "--rounds" in sys.argv and mode != "off":
                per[(job, mode)] = [f"{r['median'] / off[r['round']]['median']:.4f}" for r in sorted(rs, key=lambda r: r["round"]) if r["round"] in off]
            elif "--rounds" in sys.argv:
                gaps = [g for g in map(halves, rs) if g is not None]
                if gaps:
                    per[(job, mode)] = [f"halves of a run {100 * statistics.median(gaps):.2f} % apart (median of {len(gaps)}, largest {100 * max(gaps):.2f} %)"]
    for (job, mode), xs in per.items():
        print(f"{job} {mode}: {', '.join(xs)}")


if __name__ == "__main__":
    main()
