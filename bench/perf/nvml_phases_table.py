"""The table of bench/perf/nvml_phases.sh: per recording mode, its phases'
median step against the phases without a recorder just before and after
it, in the same process.

    python3 nvml_phases_table.py steps.jsonl phases.jsonl [EDGE_SECONDS]

A phase's steps are those that began at least EDGE seconds (0.5) after it
began and ended at least EDGE before it ended. The ratio of a recording
phase is its median step over the mean of its two neighbours' medians;
the modes' rows give the median ratio over the cycles and its range. The
row without a recorder says how far two phases without one, a recording
phase apart, differ (the median of |a/b - 1|): what a phase resolves.
"""
import json
import statistics
import sys


def main():
    steps = [json.loads(l) for l in open(sys.argv[1])]
    steps = [s for s in steps if "t_ns" in s and not s.get("warm")]
    phases = [json.loads(l) for l in open(sys.argv[2])]
    edge = float(sys.argv[3]) if len(sys.argv) > 3 else 0.5
    ends = [s["t_ns"] for s in steps]

    def median_in(p):
        lo, hi = p["start_ns"] + edge * 1e9, p["end_ns"] - edge * 1e9
        xs = [s["s"] for s, e in zip(steps, ends) if e - s["s"] * 1e9 >= lo and e <= hi]
        return (statistics.median(xs), len(xs)) if xs else (None, 0)

    for p in phases:
        p["median"], p["n"] = median_in(p)
    ratios, gaps, counts = {}, [], {}
    for i, p in enumerate(phases):
        if p["mode"] == "off" or i == 0 or i + 1 >= len(phases):
            continue
        before, after = phases[i - 1], phases[i + 1]
        if before["mode"] != "off" or after["mode"] != "off" or None in (p["median"], before["median"], after["median"]):
            continue
        if p.get("rc", 0) != 0:
            continue  # the recorder failed: not a recording phase
        base = (before["median"] + after["median"]) / 2
        ratios.setdefault(p["mode"], []).append(p["median"] / base)
        counts.setdefault(p["mode"], []).append(p["n"])
        gaps.append(abs(after["median"] / before["median"] - 1))
    offs = [p["median"] for p in phases if p["mode"] == "off" and p["median"] is not None]
    if not offs or not ratios:
        print("no complete phase: nothing to compare")
        return
    print("| mode | median step | ratio to the phases beside it (spread over cycles) | phases | steps a phase |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| off | {1000 * statistics.median(offs):.3f} ms | 1 (two a phase apart: {100 * statistics.median(gaps):.2f} %, median) | {len(offs)} | {statistics.median([p['n'] for p in phases if p['mode'] == 'off']):.0f} |")
    for mode, rs in ratios.items():
        meds = [p["median"] for p in phases if p["mode"] == mode and p["median"] is not None]
        print(f"| {mode} | {1000 * statistics.median(meds):.3f} ms | {statistics.median(rs):.4f} ({min(rs):.4f}–{max(rs):.4f}) | {len(rs)} | {statistics.median(counts[mode]):.0f} |")


if __name__ == "__main__":
    main()
