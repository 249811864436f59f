package analysis

import (
	"fmt"
	"slices"
	"sort"
)

// This file infers epochs from device memory alone, for a run without
// epoch and step marks (a job recorded without the probe). A job that
// gives memory back at every step shows its steps as a sawtooth (see
// period.go); between epochs real jobs pause the pattern (an evaluation
// pass, the data loader starting over, a checkpoint), and the device then
// shows no step fall for a while. Breaks in the sawtooth are epoch
// boundaries only when they recur with epochs alike between them: one
// pause (a checkpoint, a stall) is not an epoch, and no epoch is ever
// made from a trace without a step pattern.

const (
	// breakPeriods is how long a stretch without a step fall must last to
	// break the pattern, in step times: a missed fall or two (a sample
	// lost, a step a little slow) is not a break.
	breakPeriods = 4
	// epochSpread is how far the epochs between breaks may differ from
	// their median, in duration or in step falls.
	epochSpread = 0.25
	// minEpochFalls is the fewest step falls an inferred epoch holds.
	minEpochFalls = 3
)

// stepFalls reads device memory in [from, to) and returns its falls by
// more than thr (fallFinder); it keeps nothing else, so a day-long run
// costs one fall per step.
func (a *gpuAnalysis) stepFalls(from, to, thr int64) ([]stepFall, error) {
	f := fallFinder{thr: thr}
	it := a.db.DeviceSamples(a.run, a.g.Index, from, to)
	for it.Next() {
		s := it.At()
		f.add(s.T, s.Used)
	}
	return f.done(), it.Err()
}

// splitAtBreaks cuts the falls where more than breakPeriods step times
// pass without one, and returns each stretch between breaks as the index
// range [lo, hi) of its falls.
func splitAtBreaks(falls []stepFall, period int64) [][2]int {
	if len(falls) == 0 {
		return nil
	}
	var out [][2]int
	lo := 0
	for i := 1; i < len(falls); i++ {
		if falls[i].at-falls[i-1].at > breakPeriods*period {
			out = append(out, [2]int{lo, i})
			lo = i
		}
	}
	return append(out, [2]int{lo, len(falls)})
}

// alike reports whether the values agree within epochSpread of the median
// of all but the last, the last allowed to be shorter (the job or the
// recording ended within it).
func alike(v []float64) bool {
	if len(v) < 2 {
		return false
	}
	head := slices.Clone(v[:len(v)-1])
	slices.Sort(head)
	m := median(head)
	if m <= 0 {
		return false
	}
	for _, x := range head {
		if x < (1-epochSpread)*m || x > (1+epochSpread)*m {
			return false
		}
	}
	return v[len(v)-1] <= (1+epochSpread)*m
}

// floorIn is the time of the lowest device sample in [from, to), the
// latest of equals, and false if there is none.
func (a *gpuAnalysis) floorIn(from, to int64) (int64, bool, error) {
	var best, bestT int64
	found := false
	it := a.db.DeviceSamples(a.run, a.g.Index, from, to)
	for it.Next() {
		s := it.At()
		if !found || s.Used <= best {
			best, bestT, found = s.Used, s.T, true
		}
	}
	return bestT, found, it.Err()
}

// inferEpochs looks for epochs in the device memory of a run without epoch
// and step marks, before the passes, so that the passes read the values at
// their bounds as they do at marks. It sets a.inferred and the report's
// basis, or says why none were inferred. A read error is left for the
// device pass to report.
func (a *gpuAnalysis) inferEpochs() {
	if !a.hasDevice || len(a.mi.epochs) > 0 || a.steps.Len() >= 2 || a.run.EndNS <= a.run.StartNS {
		return
	}
	gr := a.gr
	p, err := a.stepPattern()
	if err != nil {
		return
	}
	if !p.ok {
		gr.EpochsNotInferred = "no step pattern on the device (device memory does not fall regularly, as with a job that keeps its cache): epochs cannot be inferred"
		return
	}
	from, to := a.run.StartNS, a.run.EndNS+1
	if a.job != nil {
		from, to = a.job.FromNS, a.job.ToNS+1
	}
	falls, err := a.stepFalls(from, to, max(16<<20, p.depth/2))
	if err != nil {
		return
	}
	runs := splitAtBreaks(falls, p.period)
	step := fmt.Sprintf("%.3f s", float64(p.period)/1e9)
	switch len(runs) {
	case 0, 1:
		gr.EpochsNotInferred = fmt.Sprintf("no break in the step pattern (%d step falls, none more than %d step times of %s after the one before): epochs cannot be told apart",
			len(falls), breakPeriods, step)
		return
	case 2:
		gr.EpochsNotInferred = fmt.Sprintf("one break in the step pattern, at %s: a break that does not recur is not taken for epochs",
			a.sinceStart(falls[runs[1][0]].at))
		return
	}
	spans, durs, counts := make([]epochSpan, 0, len(runs)), make([]float64, 0, len(runs)), make([]float64, 0, len(runs))
	for n, r := range runs {
		first, last := falls[r[0]], falls[r[1]-1]
		// Each epoch runs from the floor before its first step to the
		// floor before its last: both values are then device memory
		// between steps, where the epoch's own end holds the last step's
		// activations, or already the pause's memory.
		win := p.period * 5 / 4
		start, ok1, err1 := a.floorIn(first.at-win, first.at)
		end, ok2, err2 := a.floorIn(last.at-win, last.at)
		if err1 != nil || err2 != nil {
			return
		}
		if !ok1 || !ok2 || end <= start || r[1]-r[0] < minEpochFalls {
			gr.EpochsNotInferred = fmt.Sprintf("no recurring break in the step pattern: a stretch of %d step falls between breaks at %s is too short for an epoch",
				r[1]-r[0], a.sinceStart(first.at))
			return
		}
		spans = append(spans, epochSpan{n: n, start: start, end: end})
		durs = append(durs, float64(end-start))
		counts = append(counts, float64(r[1]-r[0]))
	}
	if !alike(durs) && !alike(counts) {
		gr.EpochsNotInferred = fmt.Sprintf("no recurring break in the step pattern: the %d stretches between its %d breaks last %s to %s, with %d to %d step falls, more than %.0f %% apart",
			len(runs), len(runs)-1, FormatDuration(slices.Min(durs)/1e9), FormatDuration(slices.Max(durs)/1e9),
			int(slices.Min(counts)), int(slices.Max(counts)), 100*epochSpread)
		return
	}
	a.inferred = spans
	sorted := slices.Clone(durs)
	slices.Sort(sorted)
	gr.InferredEpochBasis = fmt.Sprintf("%d breaks in the step pattern of device memory (no step fall for more than %d step times of %s) with epochs alike between them (median %s); each runs from the floor before its first step to the floor before its last",
		len(runs)-1, breakPeriods, step, FormatDuration(median(sorted)/1e9))
}

// sinceStart writes a time as seconds since the start of the run (or of
// its window).
func (a *gpuAnalysis) sinceStart(t int64) string {
	return fmt.Sprintf("%+.2f s", float64(t-a.run.StartNS)/1e9)
}

// An epoch's Δ compares like with like: memory between steps at both of
// its ends. The value at the epoch's first and last instant may sit on a
// step's activations (a run that stops mid-step ends on them), and the
// difference of two such instants is a step's sawtooth, not growth.

// DeltaBasis is what an epoch's start, end and Δ were read from.
type DeltaBasis string

// The bases of an epoch's Δ.
const (
	// DeltaStepFloors: the floor of the epoch's first step and of its
	// last (the lowest sample from a step's mark to the next mark).
	DeltaStepFloors DeltaBasis = "step_floors"
	// DeltaTimeFloors: without step marks, the median of the floors of
	// the first and of the last timeFloorWindow time slices inside the
	// epoch (each the lowest sample of its slice).
	DeltaTimeFloors DeltaBasis = "time_floors"
	// DeltaBounds: the samples at the epoch's start and end, where it
	// holds fewer than two whole floor spans (an epoch of one or two
	// steps, or shorter than two time slices).
	DeltaBounds DeltaBasis = "bounds"
)

// String is the basis as the JSON report spells it.
func (b DeltaBasis) String() string { return string(b) }

// timeFloorWindow is how many time slices at each end of an epoch make
// its floor without step marks: one slice's minimum can sit in a dip (a
// pause that frees the cache), the median of three does not.
const timeFloorWindow = 3

// An epoch's Δ is noise below the larger of settleMin (the growth rule's
// smallest band) and epochNoiseShare of the floor at its start: device
// memory moves in the driver's pages and the cache's segments, a few MiB
// at a time, without growing.
const epochNoiseShare = 0.0025

// growthNoise is the largest change of a floor at level that is noise.
func growthNoise(level int64) int64 {
	return max(settleMin, int64(epochNoiseShare*float64(max(level, 0))))
}

// Judged says whether the epoch's Δ may be read as growth: a closed epoch
// after the warm-up. An open epoch ends where the run stopped, and the
// warm-up's Δ is the job settling in (the optimizer's state, the cache).
func (e EpochDelta) Judged() bool { return !e.Open && !e.Warmup }

// Grows says whether a judged epoch's memory grew by more than noise:
// its allocated memory or its device used.
func (e EpochDelta) Grows() bool {
	if !e.Judged() {
		return false
	}
	above := func(d, start *int64) bool { return d != nil && start != nil && *d > growthNoise(*start) }
	return above(e.DeltaAllocatedBytes, e.AllocatedStartBytes) || above(e.DeltaUsedBytes, e.UsedStartBytes)
}

// floorRange is the index range [i, j) of the floor spans that lie
// wholly inside [start, end] and inside the job's span where it is known
// (the spans are sorted): the span after an epoch's last step mark runs
// into the next epoch, or into the job's teardown.
func (a *gpuAnalysis) floorRange(start, end int64) (int, int) {
	if a.job != nil {
		start, end = max(start, a.job.FromNS), min(end, a.job.ToNS)
	}
	i := sort.Search(len(a.flo), func(k int) bool { return a.flo[k] >= start })
	j := sort.Search(len(a.fhi), func(k int) bool { return a.fhi[k]-1 > end })
	return i, max(i, j)
}

// epochFloors is a series' floors at the start and end of the floor spans
// [i, j) and the basis they were read on, or false where fewer than two of
// the spans hold a sample.
func (a *gpuAnalysis) epochFloors(s *spans, i, j int) (lo, hi int64, basis DeltaBasis, ok bool) {
	var have []int64
	for k := i; k < j; k++ {
		if s.has(k) {
			have = append(have, s.min[k])
		}
	}
	if len(have) < 2 {
		return 0, 0, DeltaBounds, false
	}
	if a.per == "step" {
		return have[0], have[len(have)-1], DeltaStepFloors, true
	}
	w := min(timeFloorWindow, len(have)/2)
	return medianInt(have[:w]), medianInt(have[len(have)-w:]), DeltaTimeFloors, true
}

// medianInt is the median of v (not empty), which it leaves as it is.
func medianInt(v []int64) int64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// warmIntervals marks the time slices of a run without epochs that begin
// before its series settled (the growth rule's warm-up, leak): their Δ is
// the job starting, not growth.
func (a *gpuAnalysis) warmIntervals() {
	if a.settledNS == 0 {
		return
	}
	for i := range a.gr.Intervals {
		a.gr.Intervals[i].Warmup = a.gr.Intervals[i].StartNS < a.settledNS
	}
}
