package growth

import (
	"math"
	"slices"
	"sync"
)

// This file holds the leak statistics: Theil–Sen slopes with Sen's
// confidence interval, the Mann–Kendall trend test with its correction for
// ties, and the removal of one-off jumps. gonum's stat package has neither
// estimator, and its Kendall correlation does not correct for ties, which
// byte counts are full of (a floor that does not change is a tie).

// maxTrendPoints bounds the points the O(n²) statistics see; longer
// series are reduced to this many block minima first.
const maxTrendPoints = 600

// trend is the result of fitting y against x.
type trend struct {
	Slope      float64 // Theil–Sen: median of pairwise slopes
	Lo, Hi     float64 // 95 % confidence interval of the slope (Sen)
	Intercept  float64 // Median of y - slope·x
	S          int64   // Mann–Kendall statistic
	Z          float64 // its normal score, tie-corrected
	P          float64 // two-sided p-value
	N          int
	JumpsTaken int // one-off jumps removed before fitting
}

// reduce returns at most max points: consecutive blocks replaced by their
// lowest point (the floor of the block, at its first x).
func reduce(x, y []float64, max int) ([]float64, []float64) {
	if len(x) <= max {
		return x, y
	}
	var rx, ry []float64
	blockMinima(len(x), max, func(a, b int) bool { return y[a] < y[b] }, func(first, lo int) {
		rx, ry = append(rx, x[first]), append(ry, y[lo])
	})
	return rx, ry
}

// reduceBlock is how many consecutive points of n reduce takes as one
// where it keeps at most max.
func reduceBlock(n, max int) int {
	if n <= max {
		return 1
	}
	return (n + max - 1) / max
}

// blockMinima calls f with the first index of each reduceBlock(n, max) of
// n points and the index of its lowest (the first of equals): the blocks
// that reduce makes, for any layout of the points.
func blockMinima(n, max int, lower func(a, b int) bool, f func(first, lo int)) {
	k := reduceBlock(n, max)
	for i := 0; i < n; i += k {
		lo := i
		for m := i + 1; m < min(i+k, n); m++ {
			if lower(m, lo) {
				lo = m
			}
		}
		f(i, lo)
	}
}

// removeJumps takes out up to three one-off level shifts: a difference
// between neighbours that is more than half of the series' whole variation
// (Σ|Δy|). A leak that grows in many small steps (even quantised ones, like
// 2 MiB pages) has no such step; a single jump followed by a plateau is
// all of its variation. Later points are shifted back by the jump.
func removeJumps(y []float64) ([]float64, int) {
	y = slices.Clone(y)
	taken := 0
	for taken < 3 && len(y) > 2 {
		var total, best float64
		at := -1
		for i := 1; i < len(y); i++ {
			d := math.Abs(y[i] - y[i-1])
			total += d
			if d > best {
				best, at = d, i
			}
		}
		if at < 0 || best <= 0.5*total {
			break
		}
		shift := y[at] - y[at-1]
		for i := at; i < len(y); i++ {
			y[i] -= shift
		}
		taken++
	}
	return y, taken
}

// fitPoints fits y against x as they are: Theil–Sen with Sen's interval,
// and the Mann–Kendall test.
func fitPoints(x, y []float64) trend {
	n := len(x)
	t := trend{N: n}
	if n < 3 {
		return t
	}
	slopes, s := pairSlopes(x, y)
	t.S = s
	if len(slopes) == 0 {
		return t
	}
	// Variance of S with the correction for tied groups of y (Kendall);
	// Sen's interval also takes out the ties of x (none where x is a step
	// or a time, but the estimator allows them).
	vs := float64(n*(n-1)*(2*n+5))/18 - tieTerm(y)/18
	// The order statistics the fit needs (the median, Sen's interval's
	// ranks) by selection: a sort of n(n−1)/2 slopes was most of the
	// analysis of a short window.
	ranks := append(medianRanks(len(slopes)), senRanks(len(slopes), vs-tieTerm(x)/18)...)
	st := orderStats(slopes, ranks)
	slopePool.Put(&slopes)
	t.Slope = (st[0] + st[1]) / 2

	if vs > 0 {
		switch {
		case s > 0:
			t.Z = float64(s-1) / math.Sqrt(vs)
		case s < 0:
			t.Z = float64(s+1) / math.Sqrt(vs)
		}
		t.P = math.Erfc(math.Abs(t.Z) / math.Sqrt2)
	} else {
		t.P = 1
	}
	t.Lo, t.Hi = st[2], st[3]
	icpt := make([]float64, n)
	for i := range x {
		icpt[i] = y[i] - t.Slope*x[i]
	}
	slices.Sort(icpt)
	t.Intercept = Median(icpt)
	return t
}

// pairSlopes is the slope of every pair of points whose x differ (i < j,
// x[j] > x[i]) and Mann–Kendall's S, the sum of the signs of y[j] − y[i].
// Where x strictly ascends (steps, times: every series here) each pair has
// a slope, and the loop writes them in place, without a test of dx or a
// growing slice: it is most of a short window's analysis.
func pairSlopes(x, y []float64) ([]float64, int64) {
	n := len(x)
	var s int64
	ascending := true
	for i := 1; i < n && ascending; i++ {
		ascending = x[i] > x[i-1]
	}
	if !ascending {
		slopes := make([]float64, 0, n*(n-1)/2)
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				dy := y[j] - y[i]
				s += sign(dy)
				if dx := x[j] - x[i]; dx > 0 {
					slopes = append(slopes, dy/dx)
				}
			}
		}
		return slopes, s
	}
	slopes := slopesBuf(n * (n - 1) / 2)
	k := 0
	for i := 0; i < n-1; i++ {
		xi, yi := x[i], y[i]
		xs, ys := x[i+1:], y[i+1:n]
		out := slopes[k : k+len(xs)]
		for j, xj := range xs {
			dy := ys[j] - yi
			s += sign(dy)
			out[j] = dy / (xj - xi)
		}
		k += len(xs)
	}
	return slopes, s
}

// slopePool keeps the slopes' buffers between fits: a fit of 600 points
// has 179 700 slopes, and a fresh buffer is cleared before it is written.
var slopePool sync.Pool

// slopesBuf is a buffer of n slopes, reused where one is free.
func slopesBuf(n int) []float64 {
	if b, ok := slopePool.Get().(*[]float64); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([]float64, n)
}

// sign is −1, 0 or 1.
func sign(v float64) int64 {
	var s int64
	if v > 0 {
		s = 1
	}
	if v < 0 {
		s = -1
	}
	return s
}

// z975 is the 97.5th percentile of the standard normal distribution.
const z975 = 1.959963984540054

// medianRanks are the ranks (from 0) whose mean is the median of n sorted
// values: the middle one twice, or the two middle ones.
func medianRanks(n int) []int {
	if n%2 == 1 {
		return []int{n / 2, n / 2}
	}
	return []int{n/2 - 1, n / 2}
}

// senRanks are the ranks of Sen's (1968) 95 % confidence interval of the
// Theil–Sen slope among n sorted pairwise slopes, from the variance of S:
// (N' ∓ z·σ)/2, rounded half to even as SciPy's theilslopes does; without
// a variance, the median's.
func senRanks(n int, vs float64) []int {
	if vs <= 0 {
		m := medianRanks(n)
		if m[0] != m[1] {
			return []int{-1, -1} // the median itself: orderStats reads -1 as it
		}
		return m
	}
	c := z975 * math.Sqrt(vs)
	m := float64(n)
	l := int(math.RoundToEven((m-c)/2)) - 1
	h := int(math.RoundToEven((m + c) / 2))
	last := n - 1
	return []int{max(0, min(last, l)), max(0, min(last, h))}
}

// selectRanks finds the values of ranks (sorted, distinct, each at least
// off and below off+len(s)) in s, whose first element has rank off: the
// middle rank first, then the lower ranks among the smaller values and the
// higher among the larger, so that each pass is over a part of s only.
func selectRanks(s []float64, off int, ranks []int, at map[int]float64) {
	if len(ranks) == 0 {
		return
	}
	m := len(ranks) / 2
	r := ranks[m] - off
	at[ranks[m]] = nthSmallest(s, r)
	selectRanks(s[:r], off, ranks[:m], at)
	selectRanks(s[r+1:], ranks[m]+1, ranks[m+1:], at)
}

// orderStats returns, for each rank, the value of that rank among s sorted
// (rank -1: the median), found by selection; s is reordered.
func orderStats(s []float64, ranks []int) []float64 {
	var order []int
	for _, r := range ranks {
		if r < 0 {
			order = append(order, medianRanks(len(s))...)
		} else {
			order = append(order, r)
		}
	}
	slices.Sort(order)
	order = slices.Compact(order)
	at := map[int]float64{}
	selectRanks(s, 0, order, at)
	out := make([]float64, len(ranks))
	for i, r := range ranks {
		if r < 0 {
			m := medianRanks(len(s))
			out[i] = (at[m[0]] + at[m[1]]) / 2
			continue
		}
		out[i] = at[r]
	}
	return out
}

// tieTerm is Σ g(g-1)(2g+5) over the groups g of equal values.
func tieTerm(v []float64) float64 {
	sorted := slices.Clone(v)
	slices.Sort(sorted)
	var sum float64
	for i := 0; i < len(sorted); {
		j := i
		for j < len(sorted) && sorted[j] == sorted[i] {
			j++
		}
		g := float64(j - i)
		sum += g * (g - 1) * (2*g + 5)
		i = j
	}
	return sum
}

// Median of sorted values.
func Median(s []float64) float64 {
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// The growth rule: one judgement for any series of bytes (allocated,
// reserved, device used, a process's used memory, a site's live bytes, a
// host's total), against steps or seconds. Its thresholds are named in
// leak.go; docs/analysis.md states it.
//
//  1. The series is reduced to maxTrendPoints (block minima).
//  2. Warm-up: the points the caller names (the run's first epoch), else
//     those before the series settles (settle); then the one-off jumps
//     followed by a plateau of what is left are set aside (removeJumps).
//  3. Theil–Sen slope with Sen's interval and the Mann–Kendall test with
//     ties, on what is left.
//  4. The series grows when p < leakP, the slope and its interval's low end
//     are above 0, and the growth over the fitted span is at least
//     minLeakGrowth. It is a start-up ramp, not judged, when the warm-up
//     leaves fewer than MinSteadyPoints, or when it has not settled by the
//     middle of the series (settle's warm-up reaches the last point of its
//     first half) and what follows still rises: a ramp with no settled
//     part. What follows a late warm-up and does not rise is judged flat.

// growthKind is what the growth rule finds in a series.
type growthKind int

const (
	growthTooFew  growthKind = iota // fewer than MinSteadyPoints points in all
	growthStartup                   // a ramp with no settled part
	growthFlat                      // no growth told apart from noise
	growthRises                     // sustained growth
)

// String names the finding as the JSON report spells it.
func (k growthKind) String() string {
	switch k {
	case growthStartup:
		return "startup"
	case growthFlat:
		return "flat"
	case growthRises:
		return "grows"
	}
	return "too_few_points"
}

// growthFit is the growth rule's finding on one series.
type growthFit struct {
	kind  growthKind
	fit   trend // of the points after the warm-up
	jumps int   // one-off jumps set aside
	skip  int   // warm-up points dropped (of the reduced series)
	n     int   // points of the reduced series
	// y is the reduced series, its jumps after the warm-up set aside;
	// the fit is of y[skip:].
	y      []float64
	span   float64 // x of the last point − x of the first after the warm-up
	growth float64 // fit.Slope · span
}

// growthOfPart applies the growth rule to y against x (ascending). skip
// is the number of warm-up points when the caller knows them (the run's
// first epoch, counted before reduction), or -1 to find them by settle.
// least is the least growth that counts: minLeakGrowth for a GPU's
// memory, minSiteGrowth for a site's live bytes (a part of it).
func growthOfPart(x, y []float64, skip int, least float64) growthFit {
	n0 := len(x)
	x, y = reduce(x, y, maxTrendPoints)
	return growthOfReduced(x, y, n0, skip, least)
}

// growthOfReduced is growthOfPart of points already reduced from n0.
func growthOfReduced(x, y []float64, n0, skip int, least float64) growthFit {
	g := growthFit{n: len(x)}
	if len(x) < MinSteadyPoints {
		return g
	}
	late := false // settled only in the second half
	switch {
	case skip < 0:
		g.skip = settle(x, y)
		late = g.skip >= len(x)/2
	case len(x) < n0: // reduced: skip the blocks that start in the warm-up
		k := reduceBlock(n0, maxTrendPoints)
		g.skip = min(len(x), (skip+k-1)/k)
	default:
		g.skip = min(skip, len(x))
	}
	steady, jumps := removeJumps(y[g.skip:])
	g.y, g.jumps = append(slices.Clone(y[:g.skip]), steady...), jumps
	sx, sy := x[g.skip:], g.y[g.skip:]
	if len(sx) < MinSteadyPoints {
		g.kind = growthStartup
		return g
	}
	g.fit = fitPoints(sx, sy)
	g.fit.JumpsTaken = g.jumps
	g.span = sx[len(sx)-1] - sx[0]
	g.growth = g.fit.Slope * g.span
	g.kind = growthFlat
	if g.fit.P < leakP && g.fit.Slope > 0 && g.fit.Lo > 0 && g.growth >= least {
		g.kind = growthRises
		if late {
			g.kind = growthStartup // no settled part: the rise is the ramp
		}
	}
	return g
}

// settle is the number of warm-up points of a series that has no epochs to
// say: the points of its first half that lie more than a band below the
// Theil–Sen line of its second half, up to the last of them. The band is
// the larger of settleMADs times the second half's median distance from
// that line (its noise), settleShare of its median level, and SettleMin
// (memory comes in 2 MiB pages). A warm-up rises to the steady state from
// below; growth that goes on (a leak) lies on the line and is kept.
func settle(x, y []float64) int {
	n := len(x)
	if n < MinSteadyPoints {
		return 0
	}
	h := n / 2
	slope, icpt := theilSen(x[h:], y[h:])
	dev := make([]float64, 0, n-h)
	for i := h; i < n; i++ {
		dev = append(dev, math.Abs(y[i]-(icpt+slope*x[i])))
	}
	slices.Sort(dev)
	level := slices.Clone(y[h:])
	slices.Sort(level)
	band := max(settleMADs*Median(dev), SettleMin, settleShare*Median(level))
	skip := 0
	for i := 0; i < h; i++ {
		if y[i] < icpt+slope*x[i]-band {
			skip = i + 1
		}
	}
	return skip
}

// theilSen is the Theil–Sen line of y against x alone: the median of the
// pairwise slopes and the median of y − slope·x.
func theilSen(x, y []float64) (slope, intercept float64) {
	var slopes []float64
	for i := range x {
		for j := i + 1; j < len(x); j++ {
			if dx := x[j] - x[i]; dx > 0 {
				slopes = append(slopes, (y[j]-y[i])/dx)
			}
		}
	}
	if len(slopes) == 0 {
		return 0, Median(slices.Sorted(slices.Values(y)))
	}
	slices.Sort(slopes)
	slope = Median(slopes)
	icpt := make([]float64, len(x))
	for i := range x {
		icpt[i] = y[i] - slope*x[i]
	}
	slices.Sort(icpt)
	return slope, Median(icpt)
}
