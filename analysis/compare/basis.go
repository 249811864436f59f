package compare

import (
	"fmt"
	"strconv"

	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/units"
)

// The basis compare --by projects on (device memory, the per-step peak with
// an allowance, or the allocator replayed: replay.go) and the interval
// between the optimistic and pessimistic readings of the runs.

// chooseBasis sets the basis and the allowance, and returns each point's
// need: the per-step allocator peak when every run has one, else peak
// device memory (used).
func (by *ByTag) chooseBasis(xs, used []float64, allProbe bool) []float64 {
	by.Basis = "device_used"
	by.BasisWords = "peak device memory (no allocator samples: it includes the allocator's cache, so the value errs low)"
	if !allProbe {
		return used
	}
	peaks := make([]float64, len(by.Points))
	for i, p := range by.Points {
		peaks[i] = float64(*p.StepPeakBytes)
		if p.UnseenBytes != nil {
			by.UnseenBytes = max(by.UnseenBytes, *p.UnseenBytes)
		}
	}
	f := replay.LeastSquares(xs, peaks)
	by.NeedFit, by.Basis = &f, "step_peak_allocated"
	allowance := replay.AllocatorAllowance
	by.AllowanceBasis = "default"
	for _, p := range by.Points {
		if o := p.NearLimitOverhead; o != nil && (by.AllowanceRun == "" || *o > allowance) {
			allowance, by.AllowanceBasis, by.AllowanceRun = *o, "measured", p.Run
		}
	}
	if by.AllowanceBasis == "default" {
		if l, ok := segmentLine(by.Points); ok {
			allowance, by.AllowanceBasis, by.SegmentLine = 0, "largest_segment", &l
			by.StrandedSegments, by.StrandedRun = strandedSegments(by.Points)
			by.RoundingBytes = segmentRounding(by.Points)
		} else if st, ok := splitLine(by.Points, f.SlopeBytesPerUnit); ok {
			allowance, by.AllowanceBasis, by.SplitLine, by.SplitRuns, by.split = 0, "inactive_split", &st.line, st.runs, &st
			by.RoundingBytes = segmentRounding(by.Points)
		}
	}
	by.AllowanceFraction = allowance
	how := "a bound on what the allocator keeps beyond the step's peak at its limit, more than most jobs keep, so the value usually errs low; no run here reached its limit, and the probe did not measure the allocator's largest segment, which bounds it closer"
	if by.AllowanceBasis == "measured" {
		how = fmt.Sprintf("measured in run %q, which reached the GPU's limit: its allocator freed its cache and retried, and kept this much beyond the step's peak", by.AllowanceRun)
	}
	by.BasisWords = fmt.Sprintf("the per-step peak allocated + %.1f %% for the allocator's rounding and splitting (%s) + %s PyTorch does not see",
		100*allowance, how, units.FormatBytes(by.UnseenBytes))
	if by.SegmentLine != nil {
		by.BasisWords = fmt.Sprintf("the per-step peak allocated + %.2f of the allocator's largest segments at the value "+
			"with %s for the rounding of its segments (2 MiB each) "+
			"(at its limit the allocator frees its cache and retries; what it cannot free is room in segments that hold live blocks: %s) "+
			"+ %s PyTorch does not see",
			by.StrandedSegments, units.FormatBytes(int64(by.RoundingBytes)), strandedWords(by.StrandedRun, by.StrandedSegments), units.FormatBytes(by.UnseenBytes))
	}
	if l := by.SplitLine; l != nil {
		by.BasisWords = fmt.Sprintf("the per-step peak allocated + the room the allocator may strand in split segments at its limit, %s "+
			"(at its limit the allocator frees its cache and retries; what it cannot free is room in segments that hold live blocks; the probe did not measure the largest segment), "+
			"with %s for the rounding of its segments (2 MiB each) + %s PyTorch does not see",
			splitWords(*by.split), units.FormatBytes(int64(by.RoundingBytes)), units.FormatBytes(by.UnseenBytes))
	}
	if by.DriverReservedBytes > 0 {
		by.BasisWords += fmt.Sprintf(", against the total less %s the driver reserves", units.FormatBytes(by.DriverReservedBytes))
	}
	return peaks
}

// segmentLine is the allocator's largest segment against the value where
// every point measured it: through the largest value's (the largest of
// its runs'), with the larger of its size per unit (a request of one
// tensor grows with the batch) and its growth from the value below (one
// that grows faster, as a sequence's attention does). False when a point
// lacks it or the largest value is not above 0.
func segmentLine(points []TagPoint) (replay.Fit, bool) {
	var xs, ys []float64
	for _, p := range points { // ascending by value
		if p.LargestSegmentBytes == nil || *p.LargestSegmentBytes <= 0 {
			return replay.Fit{}, false
		}
		v, seg := p.Value, float64(*p.LargestSegmentBytes)
		if n := len(xs); n > 0 && xs[n-1] == v {
			ys[n-1] = max(ys[n-1], seg)
			continue
		}
		xs, ys = append(xs, v), append(ys, seg)
	}
	n := len(xs) - 1
	if n < 0 || xs[n] <= 0 {
		return replay.Fit{}, false
	}
	slope := ys[n] / xs[n]
	if n > 0 {
		slope = max(slope, (ys[n]-ys[n-1])/(xs[n]-xs[n-1]))
	}
	return replay.Fit{SlopeBytesPerUnit: slope, InterceptBytes: ys[n] - slope*xs[n]}, true
}

// fitting is the largest value whose need at end e of the interval is at
// most avail bytes: the peak with StrandedSegments of the allocator's
// largest segments and their rounding where the runs measured them, else
// with the share AllowanceFraction of it; half of that in the middle,
// nothing at the optimistic end.
func (by *ByTag) fitting(avail float64, e replay.End) (float64, bool) {
	if r := by.replay; r != nil {
		var plus func(v float64) float64
		if e == replay.Pessimistic {
			plus = by.beyondGrowth
		}
		v, res, ok := r.FittingPlus(*by.Need, by.replayRoom(avail), plus, e, by.integer)
		if ok && e == replay.Pessimistic && avail == by.Available(0) {
			by.atLimit = &res // for the interval's words
		}
		return by.floorAtHigh(avail, v, ok)
	}
	k := map[replay.End]float64{replay.Optimistic: 0, replay.Middle: 0.5, replay.Pessimistic: 1}[e]
	if l := by.SplitLine; l != nil {
		return by.Need.Plus(k*by.RoundingBytes, k*l.SlopeBytesPerUnit).Solve(avail, e)
	}
	if l := by.SegmentLine; l != nil {
		return by.Need.Plus(k*(by.StrandedSegments*l.InterceptBytes+by.RoundingBytes), k*by.StrandedSegments*l.SlopeBytesPerUnit).Solve(avail, e)
	}
	return by.Need.Solve(avail/(1+k*by.AllowanceFraction), e)
}

// interval sets the optimistic and middle values without headroom, how
// far the projection reaches beyond the values measured, and says so.
func (by *ByTag) interval() {
	c, p := by.Need, by.MaxFittingValueNoHeadroom
	if p == nil {
		return
	}
	if v, ok := by.fitting(by.Available(0), replay.Middle); ok {
		by.MaxFittingValueMiddle = by.belowFailed(by.round(v))
	}
	if v, ok := by.fitting(by.Available(0), replay.Optimistic); ok {
		by.MaxFittingValueOptimistic = by.belowFailed(by.round(v))
	}
	from := c.Largest()
	by.Extrapolation = *p / from
	num := func(v *float64) string {
		if v == nil {
			return "?"
		}
		return strconv.FormatFloat(*v, 'f', -1, 64)
	}
	reach := fmt.Sprintf("projected from %s to %s, %.1f×", num(&from), num(p), by.Extrapolation)
	if by.Extrapolation <= 1 {
		reach = fmt.Sprintf("within the values measured (up to %s)", num(&from))
	}
	allowance := "no allowance"
	if by.replay != nil {
		if r := by.atLimit; r != nil {
			by.Replay.StrandedBytes, by.Replay.Retries = r.StrandedAtPeak, r.Retries
			allowance = fmt.Sprintf("the allocator replayed: at %s it strands %s at the peak and frees its cache %s", num(p), units.FormatBytes(r.StrandedAtPeak), timesWords(r.Retries))
			if ch := by.replay.Chosen; ch > 0 {
				allowance += fmt.Sprintf("; + %s for a request sized for the shape (%s at %s, %s)",
					units.FormatBytes(int64(float64(ch)*by.replay.Grown(*p))), units.FormatBytes(ch), num(&by.replay.HighValue), by.replay.GrownWords())
			}
		}
	} else if l := by.SegmentLine; l != nil {
		segs := by.StrandedSegments*(l.InterceptBytes+l.SlopeBytesPerUnit**p) + by.RoundingBytes
		_, _, peak := c.At(*p)
		allowance = fmt.Sprintf("+ %s at %s, %.2f largest segments with their rounding (%.0f %% of the peak); in the middle half of it",
			units.FormatBytes(int64(segs)), num(p), by.StrandedSegments, 100*segs/peak)
	} else if l := by.SplitLine; l != nil {
		split := l.SlopeBytesPerUnit**p + by.RoundingBytes
		_, _, peak := c.At(*p)
		allowance = fmt.Sprintf("+ %s at %s stranded in split segments with their rounding (%.0f %% of the peak); in the middle half of it, at the optimistic end none: the limit is expected in this range, or above it where a library takes a smaller workspace when memory is short (cuDNN)",
			units.FormatBytes(int64(split)), num(p), 100*split/peak)
		if st := by.split; st != nil && !st.fell {
			allowance += " unless a split no run showed appears nearer the limit, which would put it below (none is reserved, since the room stranded never fell as the value rose)"
		}
	} else if by.AllowanceFraction > 0 {
		allowance = fmt.Sprintf("+ %.1f %%; in the middle half of it", 100*by.AllowanceFraction)
	}
	curvature := "the steepest reading of the runs"
	switch {
	case c.Quadratic != nil:
		curvature = "the marginal cost rose, carried on"
	case c.Power > 1:
		curvature = fmt.Sprintf("the need grew with the value to the power %.2f, carried on", c.Power)
	case len(c.Values) == 2:
		curvature = "two values show no curvature"
	}
	optimistic := "the flattest reading, no allowance"
	if by.replay != nil {
		optimistic += replayNotABound
	}
	by.IntervalWords = fmt.Sprintf("without headroom %s up to %s (%s, %s), %s in the middle, up to %s at the optimistic end (%s); %s",
		by.Tag, num(p), curvature, allowance, num(by.MaxFittingValueMiddle), num(by.MaxFittingValueOptimistic), optimistic, reach)
}

// replayNotABound says why the replay's optimistic end is not a bound:
// the replay sizes a library's workspace as the runs did, and near the
// limit cuDNN takes a smaller one where memory is short (how far, on real
// models: bench/README.md, TestReplayLargestBatchOnTheH200).
const replayNotABound = "; not a bound: where a library such as cuDNN takes a smaller workspace when memory is short (convolutions), the limit can lie a few per cent above it"

// segmentRounding is what the rounding of segments to 2 MiB may hold: 2 MiB
// for each of the most segments a run held.
func segmentRounding(points []TagPoint) float64 {
	var r float64
	for _, p := range points {
		if p.MostSegments != nil {
			r = max(r, float64(*p.MostSegments)*replay.SegmentRounding)
		}
	}
	return r
}
