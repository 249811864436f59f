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
"""
import json
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
