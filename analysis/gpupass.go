package analysis

import (
	"math"
	"slices"
	"sync/atomic"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/storage"
)

// gpuAnalysis is the analysis of one GPU: what its passes share, and one
// method per pass. analyzeGPU runs them in order: the device pass and the
// allocator pass read the series once each and keep their values where the
// later passes need them (at the query times, and the extremes of each
// floor span, epoch and time slice); the passes after them only compute.
// One file a role: devicepass.go and allocpass.go read, floorpass.go
// (floors, deltas, the leak, unseen memory) and oompass.go compute.
type gpuAnalysis struct {
	db   *storage.DB
	run  storage.Run
	g    storage.GPU
	mi   *markIndex
	opts Options
	gr   *GPUReport
	cols *columns // lends the per-step arrays that live as long as the analysis

	gpuSeries
	hasTorch   bool
	procs      []*procTrack   // procPIDs', filled by the device pass
	steps      *growth.Steps  // of the rank on this GPU
	ooms       []storage.Mark // that concern this GPU
	slices     []epochSpan    // ten time slices, when there are no epochs
	start, end int64          // the timeline's span

	// q are the times at which values are wanted, sorted: epoch and slice
	// bounds, OOMs, step marks.
	q []int64
	// The floor spans: one per step (from its mark to the next) when
	// per is "step", else short time slices; fx is each one's x, nil
	// where span i is step mark i's (x reads it from the marks then).
	per      string
	fx       []float64
	xRun     struct{ first, end, n, d int } // the run of marks x read last
	flo, fhi []int64
	// floInOrder says the spans begin in time order (all but steps
	// marked out of order), and so do the floors of every series.
	floInOrder bool

	used, alloc view
	resFloors   *spans // reserved memory (summed over processes), by floor span
	// plo, phi are the spans of each step's peak, [plo, phi): the samples
	// inside the step, from after the previous step's mark to its own
	// (whose sample reports the step's peak); none after the last mark.
	plo, phi  []int64
	job       *JobSpan     // where the command's processes hold memory, when known before the passes
	stepPeaks *spans       // the probe's per-step peak, by floor span
	pattern   *stepPattern // the step sawtooth of the job's middle minute, once looked for
	inferred  []epochSpan  // epochs read from device memory, without epoch and step marks
	settledNS int64        // where the judged series' warm-up ended (leak), 0 if it had none
	stepHalf  int64        // half a step time (halfStep), -1 until known
	// resAt is the allocator's reserved (summed) at each query time, and
	// retries0 its retries at the first; allocated there is a.alloc.at's.
	resAt    []int64
	retries0 int64
	// frags is the allocator pass's array of every sample's fragmentation,
	// for its percentile.
	frags []float64
	// At the OOMs (oomT, their sorted times): the device and allocator
	// samples nearest to each.
	oomT     []int64
	oomUsed  *nearTimes[int64]
	oomAlloc *nearTimes[torchAtTime]
	lastUsed int64 // the last device sample
	// peakS is the last allocator sample with the highest step peak, and
	// peakSum the GPU's allocator sums (all processes) right after it:
	// where the budget is taken.
	peakS   storage.TorchSample
	peakSum torchAtTime
	// counterLog is the allocator's counters as the allocator pass summed
	// them (nil without allocator series).
	counterLog *counterLog
	// allocPeaks are the allocator pass's peaks, added to the report's
	// after the device pass's (passes).
	allocPeaks []Peak
	// read counts the samples both passes have read (readSamples).
	read atomic.Int64
}

// releaseSamples is how many samples the passes read between two
// releases of the file's pages: a GPU's series of a long run are larger
// than the rest of its analysis, and each chunk is read once.
const releaseSamples = 1 << 21

// readSamples counts n samples read, and releases the file's pages
// (storage.DB.ReleasePages) each time the count passes a multiple of
// releaseSamples. Safe for concurrent use by the two passes.
func (a *gpuAnalysis) readSamples(n int) {
	if t := a.read.Add(int64(n)); t/releaseSamples != (t-int64(n))/releaseSamples {
		a.db.ReleasePages()
	}
}

// view is one series' values where the passes need them.
type view struct {
	at                               *atTimes
	floors, epochs, slices, inferred *spans
}

// torchAtTime is the allocator view (summed over the GPU's processes) at a time.
// peak is the sum of each process's latest step peak: what the GPU held at
// the step's peak when its processes' steps peak together, as the ranks of
// a data-parallel job sharing it do.
type torchAtTime struct {
	allocated, reserved, inactive, retries, peak, segments int64
}

// gpuSeries are one GPU's stored series, by kind.
type gpuSeries struct {
	hasDevice                     bool
	torchPIDs, procPIDs, sitePIDs []int
}

func seriesOf(series []storage.SeriesRef, gpu int) gpuSeries {
	var gs gpuSeries
	for _, s := range series {
		if s.GPU != gpu {
			continue
		}
		switch s.Kind {
		case storage.SeriesDevice:
			gs.hasDevice = true
		case storage.SeriesTorch:
			gs.torchPIDs = append(gs.torchPIDs, s.PID)
		case storage.SeriesProc:
			gs.procPIDs = append(gs.procPIDs, s.PID)
		case storage.SeriesSites:
			gs.sitePIDs = append(gs.sitePIDs, s.PID)
		}
	}
	return gs
}

// passCount is how many of the two passes over every sample have series
// to read: the device pass (device or process series) and the allocator
// pass (allocator series); at least one.
func (gs gpuSeries) passCount() int {
	if (gs.hasDevice || len(gs.procPIDs) > 0) && len(gs.torchPIDs) > 0 {
		return 2
	}
	return 1
}

// rank is the rank that runs on the GPU: the one its probe reported, else
// the GPU's index if step marks carry that rank, else None.
func (a *gpuAnalysis) rank() int {
	rank := storage.None
	if a.hasTorch {
		it := a.db.TorchSamples(a.run, a.g.Index, a.torchPIDs[0], storage.MinTime, storage.MaxTime)
		if it.Next() {
			rank = it.At().Rank
		}
	}
	if rank == storage.None {
		if _, ok := a.mi.steps[a.g.Index]; ok {
			rank = a.g.Index
		}
	}
	return rank
}

// queryTimes collects the times at which values are wanted.
func (a *gpuAnalysis) queryTimes() {
	var few []int64
	for _, e := range a.mi.epochs {
		few = append(few, e.start, e.end)
	}
	for _, sl := range a.slices {
		few = append(few, sl.start, sl.end)
	}
	for _, e := range a.inferred {
		few = append(few, e.start, e.end)
	}
	for _, m := range a.ooms {
		few = append(few, m.T)
	}
	slices.Sort(few)
	// The steps, hundreds of thousands in a day, come in time order: they
	// are merged with the few other times rather than sorted with them.
	q := a.cols.int64s(len(few) + a.steps.Len())[:0]
	i := 0
	for k := range a.steps.Len() {
		t := a.steps.T(k)
		for ; i < len(few) && few[i] < t; i++ {
			q = append(q, few[i])
		}
		q = append(q, t)
	}
	q = append(q, few[i:]...)
	if !slices.IsSorted(q) { // (steps out of order)
		slices.Sort(q)
	}
	a.q = slices.Compact(q)
}

// x is floor span i's x: its step, or its seconds from the run's start.
func (a *gpuAnalysis) x(i int) float64 {
	if a.fx != nil {
		return a.fx[i]
	}
	r := &a.xRun
	if i < r.first || i >= r.end {
		r.first, r.end, r.n, r.d = a.steps.Run(i)
	}
	return float64(r.n + r.d*(i-r.first))
}

// index is the position of query time t in a.q.
func (a *gpuAnalysis) index(t int64) int { i, _ := slices.BinarySearch(a.q, t); return i }

// floorSpans cuts the run into the spans whose minima are the floors: one
// per step (from its mark to the next), or 300 time slices.
func (a *gpuAnalysis) floorSpans() {
	defer func() { a.floInOrder = slices.IsSorted(a.flo) }()
	steps, run := a.steps, a.run
	if n := steps.Len(); n >= 2 {
		a.per = "step"
		if ascending(steps) && steps.T(n-1) <= a.mi.endNS {
			// Each step's span ends where the next begins: one array of
			// bounds serves both ends (a week of steps is 19 MB), and each
			// span's x is its mark's step.
			b := a.cols.int64s(n + 1)
			for i := range n {
				b[i] = steps.T(i)
			}
			b[n] = a.mi.endNS + 1
			a.flo, a.fhi = b[:n], b[1:]
		} else {
			a.stepSpans()
		}
		// The peak spans follow each other, so they share one array of
		// bounds: step i's is from just after step i−1's mark to just after
		// its own; the first step's is its own sample only.
		if n := len(a.flo); n > 0 {
			b := a.cols.int64s(n + 1)
			b[0] = a.flo[0]
			for i, t := range a.flo {
				b[i+1] = t + 1
			}
			a.plo, a.phi = b[:n], b[1:]
		}
		return
	}
	a.per = "time"
	// At most n+1 slices, counted in unsigned steps from the start, so
	// that no time near either end of int64 overflows the loop.
	const n = 300
	if run.EndNS <= run.StartNS {
		return
	}
	span := uint64(run.EndNS) - uint64(run.StartNS)
	w := max(span/n, uint64(max(run.IntervalNS, 1)))
	count := span / w
	if span%w != 0 {
		count++
	}
	for i := uint64(0); i < count; i++ {
		off := i * w // < span: neither this nor the time below wraps
		t := int64(uint64(run.StartNS) + off)
		hi := int64(math.MaxInt64)
		if t <= math.MaxInt64-int64(w) {
			hi = t + int64(w)
		}
		a.fx = append(a.fx, float64(off)/1e9)
		a.flo = append(a.flo, t)
		a.fhi = append(a.fhi, hi)
	}
}

// stepSpans cuts the run at the step marks where they are not in time
// order (or one lies past the run's end): a step whose span would be
// empty is left out.
func (a *gpuAnalysis) stepSpans() {
	steps, n := a.steps, a.steps.Len()
	a.flo, a.fhi, a.fx = make([]int64, 0, n), make([]int64, 0, n), make([]float64, 0, n)
	for i := range n {
		end := a.mi.endNS + 1
		if i+1 < n {
			end = steps.T(i + 1)
		}
		if end <= steps.T(i) {
			continue
		}
		a.fx = append(a.fx, float64(steps.Step(i)))
		a.flo = append(a.flo, steps.T(i))
		a.fhi = append(a.fhi, end)
	}
}

// ascending says whether each step mark is after the one before it.
func ascending(steps *growth.Steps) bool {
	for i := 1; i < steps.Len(); i++ {
		if steps.T(i) <= steps.T(i-1) {
			return false
		}
	}
	return true
}

// newView makes the empty trackers of one series.
func (a *gpuAnalysis) newView() view {
	epochLo, epochHi := make([]int64, len(a.mi.epochs)), make([]int64, len(a.mi.epochs))
	for i, e := range a.mi.epochs {
		epochLo[i], epochHi[i] = e.start, e.end+1
	}
	sliceLo, sliceHi := make([]int64, len(a.slices)), make([]int64, len(a.slices))
	for i, sl := range a.slices {
		sliceLo[i], sliceHi[i] = sl.start, sl.end+1
	}
	inferLo, inferHi := make([]int64, len(a.inferred)), make([]int64, len(a.inferred))
	for i, e := range a.inferred {
		inferLo[i], inferHi[i] = e.start, e.end+1
	}
	return view{at: newAtTimes(a.q, a.cols), floors: newSpans(a.flo, a.fhi, keepMin, a.cols),
		epochs: newSpans(epochLo, epochHi, keepBoth, nil), slices: newSpans(sliceLo, sliceHi, keepBoth, nil), inferred: newSpans(inferLo, inferHi, keepBoth, nil)}
}

func makePeak(what string, v, t int64, mi *markIndex, steps *growth.Steps) Peak {
	return Peak{What: what, Bytes: v, TNS: t, Epoch: mi.epochAt(t), Step: stepAt(steps, t), NearMark: mi.nearestMark(t)}
}

// procTrack is one process's figures as the device pass reads its samples.
type procTrack struct {
	p      Process
	ser    *Series
	tl     *m4
	floors *spans
}

// add takes a block of the process's samples.
func (t *procTrack) add(ts, used []int64) {
	lo, hi := t.floors.addAll(ts, used)
	t.took(ts, used, lo, hi)
}

// took is add for a block already in the floors, its extremes lo and hi.
func (t *procTrack) took(ts, used []int64, lo, hi int64) {
	t.p.Samples += int64(len(used))
	t.p.PeakBytes = max(t.p.PeakBytes, hi)
	t.tl.addBlock(ts, used, lo, hi)
}
