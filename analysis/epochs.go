package analysis

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/analysis/units"
)

// This file infers epochs, and the step time, from device memory alone,
// for a run without epoch and step marks (a job recorded without the
// probe). A job that gives memory back at every step shows its steps as a
// sawtooth (see period.go), whose period is the step time. Between
// epochs real jobs pause the pattern (an evaluation pass, the data loader
// starting over, a checkpoint), and the device then shows no step fall for
// a while. Breaks in the sawtooth are epoch boundaries only when they
// recur with epochs alike between them: one pause (a checkpoint, a stall)
// is not an epoch, and no epoch is ever made from a trace without a step
// pattern.

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
	m := growth.Median(head)
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
			len(runs), len(runs)-1, units.FormatDuration(slices.Min(durs)/1e9), units.FormatDuration(slices.Max(durs)/1e9),
			int(slices.Min(counts)), int(slices.Max(counts)), 100*epochSpread)
		return
	}
	a.inferred = spans
	sorted := slices.Clone(durs)
	slices.Sort(sorted)
	gr.InferredEpochBasis = fmt.Sprintf("%d breaks in the step pattern of device memory (no step fall for more than %d step times of %s) with epochs alike between them (median %s); each runs from the floor before its first step to the floor before its last",
		len(runs)-1, breakPeriods, step, units.FormatDuration(growth.Median(sorted)/1e9))
}

// sinceStart writes a time as seconds since the start of the run (or of
// its window).
func (a *gpuAnalysis) sinceStart(t int64) string {
	return units.FormatSince(float64(t-a.run.StartNS) / 1e9)
}

// An epoch's Δ compares like with like: memory between steps at both of
// its ends. The value at the epoch's first and last instant may sit on a
// step's activations (a run that stops mid-step ends on them), and the
// difference of two such instants is a step's sawtooth, not growth.

// timeFloorSlices is the fewest time slices at each end of an epoch whose
// lowest sample is its floor there without step marks; where the device
// shows a step pattern, the window spans two step times at least, so that
// it holds a moment between steps.
const timeFloorSlices = 3

// An epoch's Δ is noise below the larger of growth.SettleMin (the growth rule's
// smallest band) and epochNoiseShare of the floor at its start: device
// memory moves in the driver's pages and the cache's segments, a few MiB
// at a time, without growing.
const epochNoiseShare = 0.0025

// growthNoise is the largest change of a floor at level that is noise.
func growthNoise(level int64) int64 {
	return max(growth.SettleMin, int64(epochNoiseShare*float64(max(level, 0))))
}

// Judged says whether the epoch's Δ may be read as growth: a closed epoch
// after the warm-up, read between floors. An open epoch ends where the run
// stopped, the warm-up's Δ is the job settling in (the optimizer's state,
// the cache), and a sample at a bound may sit on a step's activations.
func (e EpochDelta) Judged() bool { return !e.Open && !e.Warmup && e.DeltaBasis != DeltaBounds }

// Grows says whether a judged epoch's memory grew by more than noise:
// its allocated memory or its device used.
func (e EpochDelta) Grows() bool {
	if !e.Judged() {
		return false
	}
	above := func(d, start *int64) bool { return d != nil && start != nil && *d > growthNoise(*start) }
	return above(e.DeltaAllocatedBytes, e.AllocatedStartBytes) || above(e.DeltaUsedBytes, e.UsedStartBytes)
}

// usable says whether floor span k of the series holds a floor of the
// job: it has a sample and lies inside the job's span where that is
// known. The span after the run's last step mark runs to the end of the
// recording: it may hold the job's teardown, and serves only where the
// job's span bounds it, or for the allocator (the probe reports while the
// process lives, and a script's cleanup is a fall, never growth).
func (a *gpuAnalysis) usable(s *spans, k int, allocator bool) bool {
	if !s.has(k) {
		return false
	}
	if a.per == "step" && k == len(a.flo)-1 && a.fhi[k] > a.mi.endNS && !allocator && a.job == nil {
		return false
	}
	return a.job == nil || a.flo[k] >= a.job.FromNS && a.fhi[k]-1 <= a.job.ToNS
}

// epochEnds is a series' level at the start and end of epoch e (the
// query-time indexes of its bounds is and ie, whose samples at looks up)
// and the basis it was read on (DeltaBasis).
func (a *gpuAnalysis) epochEnds(s *spans, at *atTimes, e epochSpan, is, ie int, atFloors, allocator bool) (start, end *int64, basis DeltaBasis) {
	if atFloors {
		return at.at(is), at.at(ie), DeltaFloorBounds
	}
	n := len(a.flo)
	switch a.per {
	case "step":
		// The spans of the epoch's own steps: a rank's marks lag the epoch
		// marks (rank 0's) a little, so a step that ends within half a step
		// time after a bound is the epoch's before it.
		tol := a.halfStep()
		i := sort.Search(n, func(k int) bool { return a.flo[k] > e.start+tol })
		j := sort.Search(n, func(k int) bool { return a.flo[k] > e.end+tol }) - 1
		for i < j && !a.usable(s, i, allocator) {
			i++
		}
		for j > i && !a.usable(s, j, allocator) {
			j--
		}
		if i < j {
			return i64(s.min[i]), i64(s.min[j]), DeltaStepFloors
		}
	case "time":
		i := sort.Search(n, func(k int) bool { return a.flo[k] >= e.start })
		j := sort.Search(n, func(k int) bool { return a.fhi[k]-1 > e.end })
		var have []int
		for k := i; k < j; k++ {
			if a.usable(s, k, allocator) {
				have = append(have, k)
			}
		}
		w := a.floorWindow()
		if len(have) >= 2*w {
			lo, hi := int64(math.MaxInt64), int64(math.MaxInt64)
			for _, k := range have[:w] {
				lo = min(lo, s.min[k])
			}
			for _, k := range have[len(have)-w:] {
				hi = min(hi, s.min[k])
			}
			return i64(lo), i64(hi), DeltaTimeFloors
		}
	}
	return at.at(is), at.at(ie), DeltaBounds
}

// halfStep is half the median time between this GPU's step marks (of at
// most a thousand, evenly spread), 0 without steps.
func (a *gpuAnalysis) halfStep() int64 {
	if a.stepHalf >= 0 {
		return a.stepHalf
	}
	a.stepHalf = 0
	n := len(a.flo)
	if a.per != "step" || n < 2 {
		return 0
	}
	var d []int64
	for k := 0; k < n-1; k += max(1, n/1000) {
		d = append(d, a.fhi[k]-a.flo[k])
	}
	slices.Sort(d)
	a.stepHalf = d[len(d)/2] / 2
	return a.stepHalf
}

// floorWindow is how many time slices make a floor at an epoch's end
// (timeFloorSlices, or two step times of the device's step pattern where
// one was found).
func (a *gpuAnalysis) floorWindow() int {
	w := timeFloorSlices
	if p := a.pattern; p != nil && p.ok && len(a.flo) > 0 {
		if width := a.fhi[0] - a.flo[0]; width > 0 {
			w = max(w, int((2*p.period+width-1)/width))
		}
	}
	return w
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

// stepPattern looks for regular falls in the middle minute of the job's
// device memory (of the run, when the job is not known), once per span.
func (a *gpuAnalysis) stepPattern() (stepPattern, error) {
	from, to := a.run.StartNS, a.run.EndNS
	if a.job != nil {
		from, to = a.job.FromNS, a.job.ToNS
	}
	if mid := from + (to-from)/2; to-from > periodWindow {
		from, to = mid-periodWindow/2, mid+periodWindow/2
	}
	if p := a.pattern; p != nil && p.from == from && p.to == to {
		return *p, nil
	}
	var ts, vs []int64
	it := a.db.DeviceSamples(a.run, a.g.Index, from, to)
	for it.Next() {
		s := it.At()
		ts, vs = append(ts, s.T), append(vs, s.Used)
	}
	if err := it.Err(); err != nil {
		return stepPattern{}, err
	}
	p := fallPeriod(ts, vs)
	p.from, p.to = from, to
	a.pattern = &p
	return p, nil
}

// inferStepTime looks for a step period in the job's device memory when
// the run has no step marks.
func (a *gpuAnalysis) inferStepTime() error {
	if !a.hasDevice || a.steps.Len() >= 2 {
		return nil
	}
	p, err := a.stepPattern()
	if err != nil || !p.ok {
		return err
	}
	a.gr.InferredStepTimeS = f64(float64(p.period) / 1e9)
	a.gr.InferredStepBasis = fmt.Sprintf("device memory falls every %.3f s (%d falls in the %s read): the job gives memory back once a step, or once every few steps",
		float64(p.period)/1e9, p.falls, units.FormatDuration(float64(p.to-p.from)/1e9))
	return nil
}
