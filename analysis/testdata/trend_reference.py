#!/usr/bin/env python3
"""Reference values for analysis/trend_test.go, computed independently of
the Go code: Theil-Sen with Sen's (1968) confidence interval as SciPy's
scipy.stats.theilslopes computes it (ranks round-half-even, ties in x and
in y taken out of the variance, intercept median(y - slope*x) as its
method='joint'), the Mann-Kendall test with the tie correction of Kendall
(1975) and a continuity correction (as pymannkendall's original_test), and
the jump removal as analysis/trend.go's comment defines it. Standard
library only: run `python3 analysis/testdata/trend_reference.py` and copy its output
into the test.

With --growth it writes analysis/testdata/growth_reference.json instead:
the growth rule (docs/analysis.md) applied to the shapes memory takes —
steady growth, a jump then a plateau, a warm-up ramp then flat, a ramp
only, a sawtooth with growth, growth starting mid-run, noise with no
trend — each case's points and what the rule finds, which
analysis/growth_test.go compares with the Go code.
"""
import json
import sys
import math
from collections import Counter

Z975 = 1.959963984540054  # -scipy.stats.norm.ppf(0.025)


def tie_term(values):
    return sum(k * (k - 1) * (2 * k + 5) for k in Counter(values).values() if k > 1)


def theil_sen(x, y):
    n = len(x)
    slopes = sorted((y[j] - y[i]) / (x[j] - x[i])
                    for i in range(n) for j in range(n) if x[j] > x[i])
    m = len(slopes)
    mid = m // 2
    slope = slopes[mid] if m % 2 else (slopes[mid - 1] + slopes[mid]) / 2
    sigma = math.sqrt((n * (n - 1) * (2 * n + 5) - tie_term(x) - tie_term(y)) / 18)
    hi = min(round((m + Z975 * sigma) / 2), m - 1)  # Python's round is half-even, as numpy's
    lo = max(round((m - Z975 * sigma) / 2) - 1, 0)
    icpt = sorted(yi - slope * xi for xi, yi in zip(x, y))
    k = len(icpt) // 2
    intercept = icpt[k] if len(icpt) % 2 else (icpt[k - 1] + icpt[k]) / 2
    return slope, slopes[lo], slopes[hi], intercept


def mann_kendall(y):
    n = len(y)
    s = sum((y[j] > y[i]) - (y[j] < y[i]) for i in range(n) for j in range(i + 1, n))
    var = (n * (n - 1) * (2 * n + 5) - tie_term(y)) / 18
    z = (s - 1) / math.sqrt(var) if s > 0 else (s + 1) / math.sqrt(var) if s < 0 else 0.0
    p = math.erfc(abs(z) / math.sqrt(2))
    return s, z, p


def remove_jumps(y):
    y = list(y)
    taken = 0
    while taken < 3 and len(y) > 2:
        diffs = [abs(b - a) for a, b in zip(y, y[1:])]
        total = sum(diffs)
        best = max(diffs)
        at = diffs.index(best) + 1  # the first of the largest
        if best <= 0 or best <= 0.5 * total:
            break
        shift = y[at] - y[at - 1]
        y = y[:at] + [v - shift for v in y[at:]]
        taken += 1
    return y, taken


CASES = {
    # ties in y, a clear rise
    "ties": ([float(i) for i in range(1, 13)], [5, 5, 6, 6, 6, 8, 7, 9, 9, 9, 12, 11]),
    # a slope of 3 with bounded noise
    "noisy": ([float(i) for i in range(30)], [3.0 * i + ((i * 37) % 11) - 5 for i in range(30)]),
    # no trend, mostly ties
    "flat": ([float(i) for i in range(20)], [4.0 if i % 4 else 5.0 for i in range(20)]),
    # uneven x
    "uneven": ([0.0, 0.5, 2.0, 2.5, 4.0, 7.0, 7.5, 9.0, 12.0], [1.0, 2.0, 2.0, 4.0, 3.0, 8.0, 7.0, 9.0, 13.0]),
}

JUMPS = {
    "one": [10, 10, 11, 10, 10, 110, 110, 111, 110, 110],
    "two": [0, 0, 1, 50, 50, 51, 51, 151, 151, 152],
    "steps": [float(i) for i in range(10)],
}

# The growth rule's thresholds: analysis/growth/leak.go's constants, which
# TestLeakThresholdsStatedOnce checks these against.
P_MAX = 0.01
MIN_GROWTH = 1 << 20
MIN_POINTS = 8
SETTLE_MADS, SETTLE_SHARE, SETTLE_MIN = 4, 0.01, 4 << 20


def median(v):
    v = sorted(v)
    k = len(v) // 2
    return v[k] if len(v) % 2 else (v[k - 1] + v[k]) / 2


def settle(x, y):
    """Warm-up points: those of the first half more than a band below the
    Theil-Sen line of the second half, up to the last of them."""
    n = len(x)
    if n < MIN_POINTS:
        return 0
    h = n // 2
    slopes = sorted((y[j] - y[i]) / (x[j] - x[i]) for i in range(h, n) for j in range(i + 1, n) if x[j] > x[i])
    slope = median(slopes)
    icpt = median([y[i] - slope * x[i] for i in range(h, n)])
    dev = [abs(y[i] - (icpt + slope * x[i])) for i in range(h, n)]
    band = max(SETTLE_MADS * median(dev), SETTLE_MIN, SETTLE_SHARE * median(y[h:]))
    skip = 0
    for i in range(h):
        if y[i] < icpt + slope * x[i] - band:
            skip = i + 1
    return skip


def growth_rule(x, y, skip=None):
    """The rule of docs/analysis.md on a series of under 600 points: warm-up
    dropped (given, or by settle), jumps of the rest set aside, the fit."""
    n = len(x)
    if n < MIN_POINTS:
        return dict(kind="too_few_points", skip=0)
    late = False
    if skip is None:
        skip = settle(x, y)
        late = skip >= n // 2  # not settled by the middle
    sx = x[skip:]
    sy, jumps = remove_jumps(y[skip:])
    if len(sx) < MIN_POINTS:
        return dict(kind="startup", skip=skip, jumps=jumps)
    slope, lo, hi, _ = theil_sen(sx, sy)
    _, _, p = mann_kendall(sy)
    grows = p < P_MAX and slope > 0 and lo > 0 and slope * (sx[-1] - sx[0]) >= MIN_GROWTH
    kind = ("startup" if late else "grows") if grows else "flat"
    return dict(kind=kind, skip=skip, jumps=jumps, points=len(sx), slope=slope, lo=lo, hi=hi, p=p)


M = float(1 << 20)


def noise(i):
    return ((i * 37) % 11 - 5) / 5.0  # in [-1, 1], no trend


GROWTH = {
    "steady": [1024 * M + 0.5 * M * i + M * noise(i) for i in range(120)],
    "jump_then_plateau": [1024 * M + 2 * M * noise(i) + (300 * M if i >= 70 else 0) for i in range(120)],
    "warmup_then_flat": [200 * M + 824 * M * i / 20 if i < 20 else 1024 * M + 2 * M * noise(i) for i in range(120)],
    "warmup_then_leak": [200 * M + 824 * M * i / 20 if i < 20 else 1024 * M + 0.5 * M * (i - 20) + M * noise(i) for i in range(120)],
    "ramp_only": [64 * M + 1024 * M * (1 - math.exp(-i / 40)) for i in range(60)],
    "sawtooth_with_growth": [1024 * M + M * i + 8 * M * (i % 7) for i in range(120)],
    "growth_from_mid_run": [1024 * M + M * noise(i) + M * max(0, i - 60) for i in range(120)],
    "noise": [1024 * M + 4 * M * noise(i) for i in range(120)],
    "too_few": [1024 * M + M * i for i in range(6)],
    # start-up in steps (context, weights, first step) then the cache still
    # filling when the run ends: a ramp with no settled part
    "staircase_startup": [3 * M if i < 5 else 515 * M if i < 12 else 1539 * M if i < 20 else 7683 * M + 27 * M * (i - 20) for i in range(40)],
    # a site's live bytes: a leak from nothing, and a one-off holder of the first step
    "site_leak": [512000.0 * i for i in range(60)],
    "site_one_off": [0.0] + [32 * M] * 59,
}

if "--growth" in sys.argv:
    cases = {}
    for name, y in GROWTH.items():
        x = [float(i) for i in range(len(y))]
        cases[name] = dict(x=x, y=y, want=growth_rule(x, y))
    with open(__file__.replace("trend_reference.py", "growth_reference.json"), "w") as f:
        json.dump(cases, f, indent=1)
        f.write("\n")
    sys.exit(0)

out = {"fits": {}, "jumps": {}}
for name, (x, y) in CASES.items():
    y = [float(v) for v in y]
    slope, lo, hi, icpt = theil_sen(x, y)
    s, z, p = mann_kendall(y)
    out["fits"][name] = dict(slope=slope, lo=lo, hi=hi, intercept=icpt, s=s, z=z, p=p)
for name, y in JUMPS.items():
    ry, taken = remove_jumps([float(v) for v in y])
    out["jumps"][name] = dict(y=ry, taken=taken)
print(json.dumps(out, indent=1))
