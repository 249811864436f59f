package analysis

import (
	"slices"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/storage"
)

// epochDeltas fills the per-epoch deltas, or the deltas over time slices
// for a run without epochs.
func (a *gpuAnalysis) epochDeltas() {
	a.gr.Epochs = a.deltas(a.mi.epochs, a.used.epochs, a.alloc.epochs, false)
	if a.gr.Epochs == nil {
		a.gr.Epochs = []EpochDelta{}
	}
	if len(a.mi.epochs) == 0 {
		a.gr.Intervals = a.deltas(a.slices, a.used.slices, a.alloc.slices, false)
		a.warmIntervals()
	}
	a.gr.InferredEpochs = a.deltas(a.inferred, a.used.inferred, a.alloc.inferred, true)
}

// deltas is the change of used and allocated memory over each span, from
// its floors at both ends (epochEnds); atFloors says the spans' bounds
// were placed at floors already (inferred epochs).
func (a *gpuAnalysis) deltas(epochs []epochSpan, usedS, allocS *spans, atFloors bool) []EpochDelta {
	var out []EpochDelta
	for i, e := range epochs {
		d := EpochDelta{Epoch: e.n, StartNS: e.start, EndNS: e.end, Open: e.open,
			Warmup: a.mi.warm.ByEpoch && e.start < a.mi.warm.EndNS && e.end <= a.mi.warm.EndNS}
		is, ie := a.index(e.start), a.index(e.end)
		read := func(floors *spans, at *atTimes, allocator bool) (start, end, delta *int64) {
			start, end, basis := a.epochEnds(floors, at, e, is, ie, atFloors, allocator)
			if d.DeltaBasis == "" || basis == DeltaBounds {
				d.DeltaBasis = basis
			}
			if start != nil && end != nil {
				delta = i64(*end - *start)
			}
			return start, end, delta
		}
		if a.hasDevice {
			d.UsedStartBytes, d.UsedEndBytes, d.DeltaUsedBytes = read(a.used.floors, a.used.at, false)
			if usedS.has(i) {
				d.PeakUsedBytes = i64(usedS.max[i])
			}
		}
		if a.hasTorch {
			d.AllocatedStartBytes, d.AllocatedEndBytes, d.DeltaAllocatedBytes = read(a.alloc.floors, a.alloc.at, true)
			if allocS.has(i) {
				d.PeakAllocatedBytes = i64(allocS.max[i])
			}
		}
		out = append(out, d)
	}
	return out
}

// leak builds the floor series (of allocated where the probe reported at
// growth.MinSteadyPoints floors or more, else of device used; and of reserved and
// device used beside allocated) and the step peaks, and judges the leak.
// The probe spaces its step samples by their cost (one in several short
// steps), so allocated can have far fewer floors than device used and
// still be the series to judge.
func (a *gpuAnalysis) leak() {
	gr := a.gr
	basis, floors := "device_used", a.used.floors
	if a.hasTorch && countNonEmpty(a.alloc.floors) >= growth.MinSteadyPoints {
		basis, floors = "allocated", a.alloc.floors
	}
	// The other series are only judged: their floors are taken one at a
	// time, never held (a week of steps is 58 MB a series).
	var others []growth.Growth
	if basis == "allocated" {
		g, _ := a.growthOfSpans("reserved", a.resFloors)
		others = append(others, g)
		if a.hasDevice {
			g, _ := a.growthOfSpans("device_used", a.used.floors)
			others = append(others, g)
		}
		if beyond, high, ok := a.cacheGrowths(); ok {
			others = append(others, beyond, high)
		}
	}
	gr.Floors = a.floorPoints(floors, nil)
	if a.per == "step" {
		// Step peaks are only drawn: a long run keeps the highest of each
		// of about 4·width runs of steps.
		r := newPeakRuns(countNonEmpty(a.stepPeaks), 4*a.opts.Width)
		for i := range a.flo {
			if a.stepPeaks.has(i) {
				r.add(growth.FloorPoint{X: a.x(i), TNS: a.phi[i] - 1, Bytes: a.stepPeaks.max[i]})
			}
		}
		gr.StepPeaks = r.out
	}
	if basis == "device_used" && a.per == "time" {
		a.deviceJob()
	}
	growths := append([]growth.Growth{a.growthOf(basis, gr.Floors)}, others...)
	gr.Leak = growth.JudgeGrowths(growths, a.mi.warm, a.per, a.run, a.g, a.lastUsed)
	if steady := gr.Floors[min(gr.Leak.SkippedWarmup, len(gr.Floors)):]; len(steady) > 0 {
		gr.FitFromX = steady[0].X
		if gr.Leak.SkippedWarmup > 0 {
			a.settledNS = steady[0].TNS
		}
		v := lend[float64](a.cols, len(steady))
		for i, f := range steady {
			v[i] = float64(f.Bytes)
		}
		gr.SteadyFloorBytes = i64(int64(growth.SelectQuantile(v, 0.5)))
		giveBack(a.cols, v)
	}
	gr.Floors = decimateFloors(gr.Floors, 4*a.opts.Width)
}

// growthOf is the growth rule's judgement of the floors of quantity.
func (a *gpuAnalysis) growthOf(quantity string, floors []growth.FloorPoint) growth.Growth {
	return growth.GrowthOfFloors(quantity, floors, a.mi.warm, a.per == "step", a.run.StartNS)
}

// reducer readies a growth.FloorReducer for n floors of the floor spans.
func (a *gpuAnalysis) reducer(n int) *growth.FloorReducer {
	return growth.NewFloorReducer(n, a.x, a.mi.warm, a.run.StartNS)
}

// growthOfSpans is growthOf the floors of the spans s that hold a sample
// (floorPoints), taken one at a time rather than held: the series is
// judged, not kept. False when no span holds one.
func (a *gpuAnalysis) growthOfSpans(quantity string, s *spans) (growth.Growth, bool) {
	n := countNonEmpty(s)
	if !a.floInOrder {
		// The warm-up of floors out of time order is where GrowthOfFloors
		// searches for it, in the floors held whole.
		floors := a.floorPoints(s, nil)
		defer giveBack(a.cols, floors)
		return a.growthOf(quantity, floors), n > 0
	}
	r := a.reducer(n)
	for i := range a.flo {
		if s.has(i) {
			r.Add(i, a.flo[i], s.min[i])
		}
	}
	return r.Growth(quantity, a.per == "step"), n > 0
}

// cacheGrowths is growthOf cacheFloors' two series, reserved beyond the
// largest step peak so far and that peak, their floors taken one at a
// time as growthOfSpans takes them; false without step peaks.
func (a *gpuAnalysis) cacheGrowths() (beyond, high growth.Growth, ok bool) {
	if a.per != "step" || countNonEmpty(a.stepPeaks) == 0 {
		return beyond, high, false
	}
	if !a.floInOrder {
		floors := a.cacheFloors(false, nil)
		defer giveBack(a.cols, floors)
		if len(floors) == 0 {
			return beyond, high, false
		}
		beyond = a.growthOf("reserved_beyond_peak", floors)
		return beyond, a.growthOf("step_peak_high", a.cacheFloors(true, floors)), true
	}
	// cacheFloors' floors, counted and then taken.
	n := 0
	a.eachCacheFloor(func(int, int64, int64) { n++ })
	if n == 0 {
		return beyond, high, false
	}
	rb, rh := a.reducer(n), a.reducer(n)
	a.eachCacheFloor(func(i int, beyond, high int64) {
		rb.Add(i, a.flo[i], beyond)
		rh.Add(i, a.flo[i], high)
	})
	perStep := a.per == "step"
	return rb.Growth("reserved_beyond_peak", perStep), rh.Growth("step_peak_high", perStep), true
}

// cacheFloors splits reserved memory at each step in two: the largest
// step peak so far (high, when high is true), which the allocator must
// hold, and reserved beyond it (else), the cache the job never needed at
// once, which grows only with fragmentation. Nil without step peaks; else
// in dst's array, when it is large enough.
func (a *gpuAnalysis) cacheFloors(high bool, dst []growth.FloorPoint) []growth.FloorPoint {
	if a.per != "step" || countNonEmpty(a.stepPeaks) == 0 {
		return nil
	}
	out := a.floorBuf(dst, len(a.flo))
	a.eachCacheFloor(func(i int, beyond, most int64) {
		v := most
		if !high {
			v = beyond
		}
		out = append(out, growth.FloorPoint{X: a.x(i), TNS: a.flo[i], Bytes: v})
	})
	return out
}

// eachCacheFloor calls f, in span order, for each floor span with reserved
// memory after the first step peak: reserved beyond the largest step peak
// so far, and that peak.
func (a *gpuAnalysis) eachCacheFloor(f func(i int, beyond, high int64)) {
	var most int64 = -1
	for i := range a.flo {
		if a.stepPeaks.has(i) {
			most = max(most, a.stepPeaks.max[i])
		}
		if most >= 0 && a.resFloors.has(i) {
			f(i, a.resFloors.min[i]-most, most)
		}
	}
}

// floorPoints are the floors of the spans that hold a sample, in dst's
// array when it is large enough (else one lent by a.cols).
func (a *gpuAnalysis) floorPoints(s *spans, dst []growth.FloorPoint) []growth.FloorPoint {
	out := a.floorBuf(dst, countNonEmpty(s))
	for i := range a.flo {
		if s.has(i) {
			out = append(out, growth.FloorPoint{X: a.x(i), TNS: a.flo[i], Bytes: s.min[i]})
		}
	}
	return out
}

// floorBuf is dst emptied, or an array lent by a.cols when dst cannot
// hold n floors. Not slices.Grow: it clears the whole new array, a week
// of steps at a time, and every floor is written before it is read.
func (a *gpuAnalysis) floorBuf(dst []growth.FloorPoint, n int) []growth.FloorPoint {
	if cap(dst) >= n {
		return dst[:0]
	}
	return lend[growth.FloorPoint](a.cols, n)[:0]
}

// deviceJob keeps, of device floors over time, those of the job: inside
// the span its processes hold memory, or between the first sustained rise
// and the final fall. The growth rule finds their warm-up.
func (a *gpuAnalysis) deviceJob() {
	gr := a.gr
	width := int64(1)
	if len(a.flo) > 0 {
		width = a.fhi[0] - a.flo[0]
	}
	var job []growth.FloorPoint
	if a.job != nil {
		for _, f := range gr.Floors {
			if f.TNS >= a.job.FromNS && f.TNS+width <= a.job.ToNS {
				job = append(job, f)
			}
		}
	} else if lo, hi, ok := riseAndFall(gr.Floors); ok {
		job = gr.Floors[lo : hi+1]
		a.job = &JobSpan{FromNS: job[0].TNS, ToNS: job[len(job)-1].TNS + width, Basis: "device_rise_fall"}
	}
	if a.job == nil {
		return
	}
	gr.JobSpan = a.job
	gr.Floors = slices.Clone(job)
}

// unseen is the memory PyTorch does not see: device used minus the
// allocator's reserved, at each query time where both are known from
// samples of the same moment (pairTolerance apart at most).
func (a *gpuAnalysis) unseen() {
	// Nothing else reads the times of the samples behind the values at the
	// query times, nor reserved there: a week of steps is 19 MB each.
	defer func() {
		giveBack(a.cols, a.used.at.ages)
		giveBack(a.cols, a.alloc.at.ages)
		giveBack(a.cols, a.resAt)
		a.used.at.ages, a.used.at.far, a.alloc.at.ages, a.alloc.at.far, a.resAt = nil, nil, nil, nil, nil
	}()
	if !a.hasDevice || !a.hasTorch {
		return
	}
	u := Unseen{ToleranceNS: pairTolerance(a.run)}
	var sum int64
	vals := lend[float64](a.cols, len(a.q))[:0] // sized once: a week of steps is millions
	defer func() { giveBack(a.cols, vals) }()
	for i := range a.q {
		if !a.used.at.ok[i] || !a.alloc.at.ok[i] {
			continue
		}
		v := a.used.at.vals[i] - a.resAt[i]
		if abs64(a.used.at.tAt(i)-a.alloc.at.tAt(i)) > u.ToleranceNS || v < 0 {
			u.Unpaired++
			continue
		}
		sum += v
		vals = append(vals, float64(v))
		u.Samples++
		u.MaxBytes = max(u.MaxBytes, v)
		u.FinalBytes = v
	}
	if u.Samples > 0 {
		u.MeanBytes = sum / int64(u.Samples)
		u.MedianBytes = int64(growth.SelectQuantile(vals, 0.5)) // the median of vals sorted
		a.gr.Unseen = &u
	}
}

// pairTolerance is how far apart a device sample and an allocator sample
// may be to describe the same moment: two device intervals (the device
// sample at or before a time is at most one interval old), at least 5 ms;
// 20 ms when the interval is unknown.
func pairTolerance(run storage.Run) int64 {
	if run.IntervalNS <= 0 {
		return 20e6
	}
	return max(2*run.IntervalNS, 5e6)
}
