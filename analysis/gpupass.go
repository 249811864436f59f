package analysis

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/internal/merge"
	"github.com/memrec/memrec/storage"
)

// gpuAnalysis is the analysis of one GPU: what its passes share, and one
// method per pass. analyzeGPU runs them in order: the device pass and the
// allocator pass read the series once each and keep their values where the
// later passes need them (at the query times, and the extremes of each
// floor span, epoch and time slice); the passes after them only compute.
type gpuAnalysis struct {
	db   *storage.DB
	run  storage.Run
	g    storage.GPU
	mi   *markIndex
	opts Options
	gr   *GPUReport

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
	// per is "step", else short time slices; fx is each one's x.
	per      string
	fx       []float64
	flo, fhi []int64

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
	// allocPeaks are the allocator pass's peaks, added to the report's
	// after the device pass's (passes).
	allocPeaks []Peak
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

// analyzeGPU analyses one GPU of a run.
func analyzeGPU(db *storage.DB, run storage.Run, g storage.GPU, series []storage.SeriesRef, mi *markIndex, opts Options) (*GPUReport, error) {
	a := newGPUAnalysis(db, run, g, series, mi, opts)
	if err := a.passes(); err != nil {
		return nil, err
	}
	a.unseen() // first: the sample times it pairs are dropped after it
	a.leak()
	a.epochDeltas() // after leak: it reads the job's span and the warm-up
	if err := a.inferStepTime(); err != nil {
		return nil, err
	}
	a.oomPostMortems()
	if err := a.budgetPass(); err != nil {
		return nil, err
	}
	if err := a.where(); err != nil {
		return nil, err
	}
	a.processes()
	a.allocTrace()
	a.oomCauses() // after the trace: its what-ifs
	return a.gr, nil
}

// allocTrace attaches the allocator trace of the GPU's one traced process.
func (a *gpuAnalysis) allocTrace() {
	var on []storage.AllocTrace
	for _, t := range a.mi.traces {
		if t.GPU == a.gr.GPU {
			on = append(on, t)
		}
	}
	if len(on) != 1 {
		return
	}
	a.gr.AllocTrace = &on[0]
	for _, op := range on[0].Ops {
		if !op.Free {
			a.gr.AllocTraceRequests++
		}
	}
}

// passes runs the device pass and the allocator pass at once: they read
// different series into different trackers, so one GPU's analysis keeps
// two cores busy and GPUs can be analysed fewer at a time (a week of
// steps holds about 200 bytes a step a GPU while it is analysed). The
// allocator's peaks follow the device's in the report, as when the passes
// ran one after the other.
func (a *gpuAnalysis) passes() error {
	var devErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		devErr = a.devicePass()
	}()
	allocErr := a.allocatorPass()
	<-done
	if err := errors.Join(devErr, allocErr); err != nil {
		return err
	}
	a.gr.Peaks = append(a.gr.Peaks, a.allocPeaks...)
	return nil
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

// newGPUAnalysis finds the GPU's series, its rank and steps, and sets up
// the query times and spans the passes fill.
func newGPUAnalysis(db *storage.DB, run storage.Run, g storage.GPU, series []storage.SeriesRef, mi *markIndex, opts Options) *gpuAnalysis {
	a := &gpuAnalysis{db: db, run: run, g: g, mi: mi, opts: opts, stepHalf: -1,
		gr: &GPUReport{GPU: g.Index, Host: g.Host, HostGPU: g.HostGPU, UUID: g.UUID, Name: g.Name, TotalBytes: g.TotalBytes}}
	a.gpuSeries = seriesOf(series, g.Index)
	a.hasTorch = len(a.torchPIDs) > 0
	if len(a.torchPIDs) > 1 {
		a.gr.SharedBy = len(a.torchPIDs)
	}
	rank := a.rank()
	a.steps = mi.stepsFor(rank)
	a.gr.Steps = a.steps // shared: neither changes them
	a.procJobSpan()
	a.deviceJobSpan()
	a.inferEpochs()
	sliced := run
	if a.job != nil {
		sliced.StartNS, sliced.EndNS = a.job.FromNS, a.job.ToNS
	}
	a.slices = timeSlices(sliced, len(mi.epochs) == 0)
	a.ooms = oomsFor(mi, g.Index, rank, len(run.GPUs))
	for _, m := range a.ooms {
		a.oomT = append(a.oomT, m.T)
	}
	slices.Sort(a.oomT)
	a.oomT = slices.Compact(a.oomT)
	a.oomUsed, a.oomAlloc = newNearTimes[int64](a.oomT), newNearTimes[torchAtTime](a.oomT)
	a.queryTimes()
	a.floorSpans()
	a.start, a.end = run.StartNS, max(run.EndNS, run.StartNS+1)
	a.gr.Timeline = Timeline{StartNS: a.start, EndNS: a.end, Used: Series{Name: "device used"}, DriverReserved: Series{Name: "driver reserved"},
		Allocated: Series{Name: "allocated"}, Reserved: Series{Name: "reserved"}}
	a.used, a.alloc = a.newView(), a.newView()
	a.alloc.at.life = allocatorLife
	a.resFloors = newSpans(a.flo, a.fhi, keepMin)
	a.stepPeaks = newSpans(a.plo, a.phi, keepMax)
	return a
}

// procJobSpan sets the job's span from the GPU's process series, if it
// has them; a run without them gets its span from the device floors, in
// leak.
func (a *gpuAnalysis) procJobSpan() {
	if len(a.procPIDs) == 0 {
		return
	}
	from, to, ok, err := procSpan(a.db, a.run, a.g.Index, a.procPIDs)
	if err != nil || !ok || to <= from {
		return // the processes pass reports a read error
	}
	a.job = &JobSpan{FromNS: from, ToNS: to, Basis: "processes"}
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
	q := make([]int64, 0, len(few)+a.steps.Len())
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

// index is the position of query time t in a.q.
func (a *gpuAnalysis) index(t int64) int { i, _ := slices.BinarySearch(a.q, t); return i }

// floorSpans cuts the run into the spans whose minima are the floors: one
// per step (from its mark to the next), or 300 time slices.
func (a *gpuAnalysis) floorSpans() {
	steps, run := a.steps, a.run
	if n := steps.Len(); n >= 2 {
		a.per = "step"
		// Sized once: a day-long run has hundreds of thousands of steps.
		a.fx = make([]float64, 0, n)
		if ascending(steps) && steps.T(n-1) <= a.mi.endNS {
			// Each step's span ends where the next begins: one array of
			// bounds serves both ends (a week of steps is 19 MB).
			b := make([]int64, n+1)
			for i := range n {
				a.fx, b[i] = append(a.fx, float64(steps.Step(i))), steps.T(i)
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
			b := make([]int64, n+1)
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
	a.flo, a.fhi = make([]int64, 0, n), make([]int64, 0, n)
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
	return view{at: newAtTimes(a.q), floors: newSpans(a.flo, a.fhi, keepMin),
		epochs: newSpans(epochLo, epochHi, keepBoth), slices: newSpans(sliceLo, sliceHi, keepBoth), inferred: newSpans(inferLo, inferHi, keepBoth)}
}

// addAll places samples in every tracker but the query times, and returns
// their lowest and highest value (xs must not be empty).
func (v view) addAll(ts, xs []int64) (lo, hi int64) {
	v.floors.addAll(ts, xs)
	// Epochs, slices and inferred epochs are long: a block of samples is
	// mostly inside one of each, which then takes the block's extremes.
	lo, hi = xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	v.epochs.addBlock(ts, xs, lo, hi)
	v.slices.addBlock(ts, xs, lo, hi)
	v.inferred.addBlock(ts, xs, lo, hi)
	return lo, hi
}

// devicePass reads the device samples: the used and driver-reserved
// timelines, the peak, and the used memory where later passes need it.
// The GPU's process samples share the device series' chunks, and are read
// in the same walk for the processes pass (procTrack).
func (a *gpuAnalysis) devicePass() error {
	if !a.hasDevice && len(a.procPIDs) == 0 {
		return nil
	}
	for _, pid := range a.procPIDs {
		a.procs = append(a.procs, a.newProcTrack(pid))
	}
	gr := a.gr
	tl := newM4(a.start, a.end, a.opts.Width, &gr.Timeline.Used)
	tld := newM4(a.start, a.end, a.opts.Width, &gr.Timeline.DriverReserved)
	driverReserved := false
	// A window's first marks (its first epoch's start) take the last
	// sample before it, as marks inside a run do.
	if before, ok := a.run.Before(windowLookBack); ok && a.hasDevice {
		it := a.db.DeviceSamples(before, a.g.Index, storage.MinTime, storage.MaxTime)
		for it.Next() {
			a.used.at.add(it.At().T, it.At().Used)
		}
		if err := it.Err(); err != nil {
			return err
		}
	}
	b := a.db.DeviceGroupBlocks(a.run, a.g.Index, a.procPIDs, storage.MinTime, storage.MaxTime)
	var peak storage.DeviceSample
	first := true
	for b.Next() {
		for i, p := range a.procs {
			if ts := b.T(i + 1); len(ts) > 0 {
				p.add(ts, b.Ints(i+1, storage.ProcUsed))
			}
		}
		ts := b.T(0)
		if len(ts) == 0 {
			continue
		}
		used, res := b.Ints(0, storage.DeviceUsed), b.Ints(0, storage.DeviceReserved)
		tld.addAll(ts, res)
		for _, r := range res {
			driverReserved = driverReserved || r != 0
			if r > 0 && (gr.DriverReservedBytes == nil || r > *gr.DriverReservedBytes) {
				gr.DriverReservedBytes = i64(r)
			}
		}
		a.used.at.addAll(ts, used)
		if _, hi := a.used.addAll(ts, used); first || hi > peak.Used {
			i := slices.Index(used, hi) // the first sample of the highest
			peak, first = storage.DeviceSample{T: ts[i], GPU: a.g.Index, Used: hi, Reserved: res[i]}, false
		}
		a.oomUsed.addAll(ts, used)
		if l := a.opts.Lines; l != nil {
			l.AddDeviceColumns(a.g.Index, ts, used, res)
		}
		tl.addAll(ts, used)
		a.lastUsed = used[len(used)-1]
	}
	if err := b.Err(); err != nil {
		return err
	}
	if !a.hasDevice {
		return nil
	}
	tl.flush()
	tld.flush()
	if !driverReserved {
		gr.Timeline.DriverReserved = Series{Name: gr.Timeline.DriverReserved.Name}
	}
	a.used.at.done()
	a.oomUsed.done()
	if !first {
		gr.PeakUsedBytes = i64(peak.Used)
		gr.Peaks = append(gr.Peaks, makePeak("device_used", peak.Used, peak.T, a.mi, a.steps))
	}
	return nil
}

// allocSum sums the allocator samples of a GPU's processes as they come in
// time order, each process counting with its latest sample, and keeps the
// peaks and the fragmentation of the sums.
// retire takes out of the sums the processes whose last sample is more
// than allocatorLife before t. A retired process keeps its counters
// (retries, OOMs), so that a later sample of it adds only what is new.
func (s *allocSum) retire(t int64) {
	for _, l := range s.last {
		if l.T != retired && t-l.T > allocatorLife {
			s.cur.allocated -= l.Allocated
			s.cur.reserved -= l.Reserved
			s.cur.inactive -= l.InactiveSplit
			s.cur.peak -= l.PeakAllocated
			s.cur.segments -= l.Segments
			*l = storage.TorchSample{T: retired, AllocRetries: l.AllocRetries, OOMs: l.OOMs}
		}
	}
}

// retired marks a process taken out of the sums.
const retired = math.MinInt64

type allocSum struct {
	cur  torchAtTime
	last map[int]*storage.TorchSample // by pid
	// lastPID's entry of last, looked up once for the run of samples of
	// one process (the common case: one process a GPU).
	lastPID             int
	lastOf              *storage.TorchSample
	firstRetries        int64  // the retries at the first sample; -1 before it
	firstRetryNS        *int64 // when the retries first rose
	peakA, peakR, peakS storage.TorchSample
	// budgetPeak is the last sample with the highest step peak (the first
	// one may be of the first step, before the optimizer made its state),
	// and budgetSum the sums right after it.
	budgetPeak storage.TorchSample
	budgetSum  torchAtTime
	frags      []float64 // for the 95th percentile
	frag       Frag      // the rest of the summary, kept as samples come
	waste      peakWaste // 1 − peak allocated / reserved, per process sample
	// nearLimit is the most reserved exceeded the step's peak allocated, as
	// a share of it, in a sample whose step made the allocator free its
	// cache and retry without an OOM: what the job needed beyond its peak.
	nearLimit *float64
	// largestSeg is the most the processes' largest segments added up to
	// at once; mostSegs the most segments they held at once.
	largestSeg, mostSegs int64
	mostSplit            int64 // the most inactive split bytes at once
}

// allocatorLife is how long after a process's last allocator sample its
// view lasts: the probe samples at least every 250 ms while the process
// lives (its timer thread), so 2 s without a sample (eight of them) is the
// process gone. Past it the process no longer counts in the GPU's sums,
// and a time with no process's view has no allocator figure: an OOM's
// last allocated value is not carried over the epochs after it.
const allocatorLife = int64(2 * time.Second)

// take makes x its process's last sample and moves the sums by what
// changed since that process's sample before, which it returns.
func (s *allocSum) take(x *storage.TorchSample) (prev storage.TorchSample) {
	l := s.lastOf
	if l == nil || s.lastPID != x.PID {
		if l = s.last[x.PID]; l == nil {
			l = new(storage.TorchSample)
			s.last[x.PID] = l
		}
		s.lastPID, s.lastOf = x.PID, l
	}
	prev, *l = *l, *x
	c := &s.cur
	c.allocated += x.Allocated - prev.Allocated
	c.reserved += x.Reserved - prev.Reserved
	c.inactive += x.InactiveSplit - prev.InactiveSplit
	c.retries += x.AllocRetries - prev.AllocRetries
	c.peak += x.PeakAllocated - prev.PeakAllocated
	c.segments += x.Segments - prev.Segments
	return prev
}

func (s *allocSum) add(x *storage.TorchSample) {
	if len(s.last) > 1 || len(s.last) == 1 && s.lastPID != x.PID { // (one process: lastPID's)
		s.retire(x.T)
	}
	prev := s.take(x)
	c := &s.cur
	if x.LargestSegment != prev.LargestSegment { // rare: the probe looks once a minute
		// Each process's allocator may strand one of its own.
		var sum int64
		for _, l := range s.last {
			sum += l.LargestSegment
		}
		s.largestSeg = max(s.largestSeg, sum)
	}
	s.mostSegs = max(s.mostSegs, c.segments)
	s.mostSplit = max(s.mostSplit, c.inactive)
	if x.AllocRetries > prev.AllocRetries && x.OOMs == prev.OOMs && x.PeakAllocated > 0 && x.Reserved > 0 {
		r := max(0, float64(x.Reserved)/float64(x.PeakAllocated)-1)
		if s.nearLimit == nil || r > *s.nearLimit {
			s.nearLimit = &r
		}
	}
	if s.firstRetries < 0 {
		s.firstRetries = c.retries
	} else if c.retries > s.firstRetries && s.firstRetryNS == nil {
		s.firstRetryNS = i64(x.T)
	}
	if c.allocated > s.peakA.Allocated || s.peakA.T == 0 {
		s.peakA = storage.TorchSample{T: x.T, Allocated: c.allocated}
	}
	if c.reserved > s.peakR.Reserved || s.peakR.T == 0 {
		s.peakR = storage.TorchSample{T: x.T, Reserved: c.reserved}
	}
	if c.peak > s.peakS.PeakAllocated {
		s.peakS = storage.TorchSample{T: x.T, PeakAllocated: c.peak}
	}
	if x.PeakAllocated > 0 && x.PeakAllocated >= s.budgetPeak.PeakAllocated {
		s.budgetPeak, s.budgetSum = *x, s.cur
	}
}

// allocatorPass reads the allocator samples of every process of the GPU,
// merged in time order and summed: the allocated and reserved timelines,
// the peaks, fragmentation, retries, and the sums where later passes need
// them.
func (a *gpuAnalysis) allocatorPass() error {
	if !a.hasTorch {
		return nil
	}
	gr := a.gr
	a.resAt = make([]int64, len(a.q))
	tq := 0
	sum := &allocSum{last: map[int]*storage.TorchSample{}, firstRetries: -1}
	// Sized for this GPU's share of the run's samples: a day-long run has
	// millions, and growing by copying would double the peak.
	sum.frags = make([]float64, 0, perGPUShare(a.run, a.run.Counts.TorchSamples))
	if err := a.carryIn(sum); err != nil {
		return err
	}
	tla := newM4(a.start, a.end, a.opts.Width, &gr.Timeline.Allocated)
	tlr := newM4(a.start, a.end, a.opts.Width, &gr.Timeline.Reserved)
	// The sums go to the trackers in blocks, which take them as runs.
	var bt, ba, br, bp []int64
	var bs []torchAtTime
	flush := func() {
		if len(bt) == 0 {
			return
		}
		if len(bs) > 0 {
			a.oomAlloc.addAll(bt, bs)
		}
		a.alloc.at.addAll(bt, ba)
		a.alloc.addAll(bt, ba)
		a.resFloors.addAll(bt, br)
		a.stepPeaks.addAll(bt, bp)
		tla.addAll(bt, ba)
		tlr.addAll(bt, br)
		bt, ba, br, bp, bs = bt[:0], ba[:0], br[:0], bp[:0], bs[:0]
	}
	var n int64 // samples merged so far
	err := a.eachTorch(func(s *storage.TorchSample) {
		n++
		for tq < len(a.q) && a.q[tq] < s.T {
			a.atQuery(tq, sum.cur)
			tq++
		}
		sum.add(s)
		if s.Allocated > s.Reserved || s.Active < s.Allocated {
			gr.InconsistentSamples++
		}
		sumA, sumR := sum.cur.allocated, sum.cur.reserved
		bt, ba, br, bp = append(bt, s.T), append(ba, sumA), append(br, sumR), append(bp, sum.cur.peak)
		if len(a.oomT) > 0 { // the sums are kept only for the times of OOMs
			bs = append(bs, sum.cur)
		}
		if len(bt) == 4096 {
			flush()
		}
		if s.PeakAllocated > 0 && s.Reserved > 0 {
			// The allocator may give memory back after its peak (near the
			// limit it frees its cache and retries): never below 0.
			sum.waste.add(max(0, 1-float64(s.PeakAllocated)/float64(s.Reserved)))
		}
		if sumR > 0 {
			f := float64(sumR-sumA) / float64(sumR)
			st := float64(sum.cur.inactive) / float64(sumR)
			sum.frags = append(sum.frags, f)
			sum.frag.add(f, st)
			gr.FragSeries = append(gr.FragSeries, FragPoint{TNS: s.T, Frag: f, Stuck: st, I: n - 1})
			if len(gr.FragSeries) >= 8*a.opts.Width { // a long run: keep the chart's points bounded
				gr.FragSeries = halveFrag(gr.FragSeries)
			}
		}
	})
	if err != nil {
		return err
	}
	flush()
	for ; tq < len(a.q); tq++ {
		a.atQuery(tq, sum.cur)
	}
	a.alloc.at.done()
	a.oomAlloc.done()
	tla.flush()
	tlr.flush()
	a.allocatorFigures(sum)
	return nil
}

// atQuery keeps the allocator sums c at query time i.
func (a *gpuAnalysis) atQuery(i int, c torchAtTime) {
	a.resAt[i] = c.reserved
	if i == 0 {
		a.retries0 = c.retries
	}
}

// windowLookBack is how far before a window its last samples are looked
// for: a value at the window's start older than this is not known.
const windowLookBack = 60e9

// carryIn starts a window's allocator sum from each process's last sample
// before the window, so a mark at its start has the allocator's value as
// inside a run; the sample counts for nothing else (no peak, no floor).
func (a *gpuAnalysis) carryIn(sum *allocSum) error {
	before, ok := a.run.Before(windowLookBack)
	if !ok {
		return nil
	}
	merged := mergeTorch(a.db, before, a.g.Index, a.torchPIDs)
	var last int64
	for merged.Next() {
		x := merged.At()
		sum.take(&x)
		last = x.T
	}
	if err := merged.Err(); err != nil {
		return err
	}
	if len(sum.last) > 0 {
		a.alloc.at.add(last, sum.cur.allocated)
	}
	return nil
}

// allocatorFigures writes the allocator pass's totals into the report.
func (a *gpuAnalysis) allocatorFigures(sum *allocSum) {
	gr, mi, steps := a.gr, a.mi, a.steps
	gr.FirstRetryNS = sum.firstRetryNS
	gr.NearLimitOverhead = sum.nearLimit
	if sum.largestSeg > 0 {
		gr.LargestSegmentBytes = i64(sum.largestSeg)
	}
	if sum.mostSegs > 0 {
		gr.MostSegments = i64(sum.mostSegs)
	}
	if sum.mostSplit > 0 {
		gr.MostInactiveSplitBytes = i64(sum.mostSplit)
	}
	gr.PeakAllocatedBytes = i64(sum.peakA.Allocated)
	gr.PeakReservedBytes = i64(sum.peakR.Reserved)
	a.peakS, a.peakSum = sum.budgetPeak, sum.budgetSum
	a.allocPeaks = append(a.allocPeaks, makePeak("allocated", sum.peakA.Allocated, sum.peakA.T, mi, steps),
		makePeak("reserved", sum.peakR.Reserved, sum.peakR.T, mi, steps))
	// Samples without a peak (a probe that does not send one) leave it
	// unknown, not 0 B at no time.
	if sum.peakS.PeakAllocated > 0 {
		gr.PeakStepBytes = i64(sum.peakS.PeakAllocated)
		a.allocPeaks = append(a.allocPeaks, makePeak("step_peak", sum.peakS.PeakAllocated, sum.peakS.T, mi, steps))
	}
	if sum.firstRetries >= 0 {
		gr.AllocRetries = i64(sum.cur.retries - sum.firstRetries)
	}
	if len(sum.frags) > 0 {
		gr.Fragmentation = summarizeFrag(&sum.frag, sum.frags)
		sum.waste.into(gr.Fragmentation)
	}
	decimateFrag(gr, a.opts.Width)
}

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
	gr.Floors = a.floorPoints(floors, nil)
	if a.per == "step" {
		gr.StepPeaks = make([]growth.FloorPoint, 0, countNonEmpty(a.stepPeaks))
		for i := range a.fx {
			if a.stepPeaks.has(i) {
				gr.StepPeaks = append(gr.StepPeaks, growth.FloorPoint{X: a.fx[i], TNS: a.phi[i] - 1, Bytes: a.stepPeaks.max[i]})
			}
		}
	}
	// Step peaks are only drawn: a long run keeps the highest of each of
	// about 4·width runs of steps.
	gr.StepPeaks = decimatePeaks(gr.StepPeaks, 4*a.opts.Width)
	if basis == "device_used" && a.per == "time" {
		a.deviceJob()
	}
	growthOf := func(quantity string, floors []growth.FloorPoint) growth.Growth {
		return growth.GrowthOfFloors(quantity, floors, a.mi.warm, a.per == "step", a.run.StartNS)
	}
	growths := []growth.Growth{growthOf(basis, gr.Floors)}
	// The other series are only judged, one at a time, in one array: a
	// week of steps is 58 MB a series.
	var scratch []growth.FloorPoint
	judge := func(quantity string, floors []growth.FloorPoint) {
		growths, scratch = append(growths, growthOf(quantity, floors)), floors
	}
	if basis == "allocated" {
		judge("reserved", a.floorPoints(a.resFloors, scratch))
		if a.hasDevice {
			judge("device_used", a.floorPoints(a.used.floors, scratch))
		}
		if c := a.cacheFloors(false, scratch); len(c) > 0 {
			judge("reserved_beyond_peak", c)
			judge("step_peak_high", a.cacheFloors(true, scratch))
		}
	}
	gr.Leak = growth.JudgeGrowths(growths, a.mi.warm, a.per, a.run, a.g, a.lastUsed)
	if steady := gr.Floors[min(gr.Leak.SkippedWarmup, len(gr.Floors)):]; len(steady) > 0 {
		gr.FitFromX = steady[0].X
		if gr.Leak.SkippedWarmup > 0 {
			a.settledNS = steady[0].TNS
		}
		v := make([]float64, len(steady))
		for i, f := range steady {
			v[i] = float64(f.Bytes)
		}
		gr.SteadyFloorBytes = i64(int64(growth.SelectQuantile(v, 0.5)))
	}
	gr.Floors = decimateFloors(gr.Floors, 4*a.opts.Width)
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
	var most int64 = -1
	out := slices.Grow(dst[:0], len(a.fx))
	for i := range a.fx {
		if a.stepPeaks.has(i) {
			most = max(most, a.stepPeaks.max[i])
		}
		if most < 0 || !a.resFloors.has(i) {
			continue
		}
		v := most
		if !high {
			v = a.resFloors.min[i] - most
		}
		out = append(out, growth.FloorPoint{X: a.fx[i], TNS: a.flo[i], Bytes: v})
	}
	return out
}

// floorPoints are the floors of the spans that hold a sample, in dst's
// array when it is large enough (nil: one of their own).
func (a *gpuAnalysis) floorPoints(s *spans, dst []growth.FloorPoint) []growth.FloorPoint {
	out := slices.Grow(dst[:0], countNonEmpty(s))
	for i := range a.fx {
		if s.has(i) {
			out = append(out, growth.FloorPoint{X: a.fx[i], TNS: a.flo[i], Bytes: s.min[i]})
		}
	}
	return out
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
	defer func() { a.used.at.ts, a.alloc.at.ts, a.resAt = nil, nil, nil }()
	if !a.hasDevice || !a.hasTorch {
		return
	}
	u := Unseen{ToleranceNS: pairTolerance(a.run)}
	var sum int64
	vals := make([]float64, 0, len(a.q)) // sized once: a week of steps is millions
	for i := range a.q {
		if !a.used.at.ok[i] || !a.alloc.at.ok[i] {
			continue
		}
		v := a.used.at.vals[i] - a.resAt[i]
		if abs64(a.used.at.ts[i]-a.alloc.at.ts[i]) > u.ToleranceNS || v < 0 {
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
		slices.Sort(vals)
		u.MedianBytes = int64(growth.Median(vals))
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

// oomPostMortems describes the memory at each OOM of the GPU.
func (a *gpuAnalysis) oomPostMortems() {
	gr := a.gr
	gr.OOMs = []OOM{}
	for _, m := range a.ooms {
		msg, summary, _ := strings.Cut(m.Text, "\n\n")
		o := OOM{TNS: m.T, Message: msg, Summary: summary, Epoch: a.mi.epochAt(m.T), Step: stepAt(a.steps, m.T),
			PairToleranceNS: pairTolerance(a.run)}
		a.oomViews(&o)
		a.largestGrowthBefore(&o)
		if req, free := parseOOMSizes(m.Text); req >= 0 {
			o.RequestedBytes = i64(req)
			if free >= 0 {
				o.FreeBytes = i64(free)
			}
		}
		gr.OOMs = append(gr.OOMs, o)
	}
	a.oomOutcomes()
}

// oomViews sets the device and allocator figures at an OOM, each from its
// view's sample nearest to the OOM, and the memory PyTorch does not see
// where the two samples describe the same moment. A sample farther than
// the tolerance from the OOM describes another moment (before the job's
// last allocations, or after its memory went back): its figures, and what
// is made of them, are left out with the reason.
func (a *gpuAnalysis) oomViews(o *OOM) {
	k, _ := slices.BinarySearch(a.oomT, o.TNS)
	tol := o.PairToleranceNS
	var dev timed[int64]
	var alc timed[torchAtTime]
	var gap int64
	if a.hasDevice {
		if dev, gap = a.oomUsed.within(k, tol); gap > 0 {
			o.LeftOut = append(o.LeftOut, fmt.Sprintf("device used: the nearest device sample is %s from the OOM, more than the %s tolerance",
				msText(gap), msText(tol)))
		}
		if dev.ok {
			o.UsedBytes, o.UsedTNS = i64(dev.v), i64(dev.t)
		}
	}
	if a.hasTorch {
		if alc, gap = a.oomAlloc.within(k, tol); gap > 0 {
			o.LeftOut = append(o.LeftOut, fmt.Sprintf("allocated and reserved, and the advice made of them: the nearest allocator sample is %s from the OOM, more than the %s tolerance",
				msText(gap), msText(tol)))
		}
		if alc.ok {
			c := alc.v
			o.AllocatedBytes, o.ReservedBytes, o.AllocatorTNS = i64(c.allocated), i64(c.reserved), i64(alc.t)
			if c.reserved > 0 && c.reserved >= c.allocated {
				o.Fragmentation = f64(float64(c.reserved-c.allocated) / float64(c.reserved))
			}
			if a.gr.AllocRetries != nil {
				o.AllocRetriesRise = i64(c.retries - a.retries0)
			}
		}
	}
	if !dev.ok || !alc.ok {
		return
	}
	switch unseen := dev.v - alc.v.reserved; {
	case abs64(dev.t-alc.t) > tol:
		o.LeftOut = append(o.LeftOut, fmt.Sprintf("memory PyTorch does not see: the device and allocator samples are %s apart, more than the %s tolerance",
			msText(abs64(dev.t-alc.t)), msText(tol)))
	case unseen < 0:
		o.LeftOut = append(o.LeftOut, fmt.Sprintf("memory PyTorch does not see: device used is %s below reserved, so the two samples do not describe the same moment",
			units.FormatBytes(-unseen)))
	default:
		o.UnseenBytes = i64(unseen)
	}
}

// msText writes a time difference in milliseconds, without its sign.
func msText(ns int64) string {
	return strconv.FormatFloat(float64(abs64(ns))/1e6, 'f', 1, 64) + " ms"
}

// oomOutcomes tells survived OOMs from the fatal one and, for the fatal
// one, says what would have fitted.
func (a *gpuAnalysis) oomOutcomes() {
	gr := a.gr
	outcome, why := classifyOOMs(a.ooms, a.steps, a.mi.exit)
	batch, _ := strconv.ParseFloat(a.run.Tags["batch_size"], 64)
	for i := range gr.OOMs {
		o := &gr.OOMs[i]
		o.Outcome, o.OutcomeReason = outcome[i], why[i]
		if o.Outcome != OOMFatal {
			continue
		}
		// The run's own per-step peak: the highest of the steps completed
		// before the OOM.
		var peak *int64
		for _, p := range gr.StepPeaks {
			if p.TNS < o.TNS && (peak == nil || p.Bytes > *peak) {
				peak = i64(p.Bytes)
			}
		}
		seg, rounding := gr.strandable()
		oomAdvice(o, batch, peak, seg, rounding)
		gr.oomWhatIfs(o)
	}
}

// largestGrowthBefore sets the largest growth between consecutive floors
// among the ten before the OOM.
func (a *gpuAnalysis) largestGrowthBefore(o *OOM) {
	var prev []growth.FloorPoint
	for _, f := range a.gr.Floors {
		if f.TNS <= o.TNS {
			prev = append(prev, f)
		}
	}
	if len(prev) > 11 {
		prev = prev[len(prev)-11:]
	}
	for k := 1; k < len(prev); k++ {
		if d := prev[k].Bytes - prev[k-1].Bytes; o.LargestGrowth == nil || d > *o.LargestGrowth {
			o.LargestGrowth = i64(d)
			if a.per == "step" {
				o.LargestGrowthAt = intp(int(prev[k].X))
			}
		}
	}
}

// processes sets each process's figures from its NVML samples, which the
// device pass read: its peak, timeline and the growth of its floors.
func (a *gpuAnalysis) processes() {
	gr := a.gr
	var scratch []growth.FloorPoint // each process's floors are judged in turn
	for _, t := range a.procs {
		t.tl.flush()
		if scratch = a.floorPoints(t.floors, scratch); len(scratch) > 0 {
			g := growth.GrowthOfFloors("used", scratch, a.mi.warm, a.per == "step", a.run.StartNS)
			t.p.Growth = &g
		}
		gr.Processes = append(gr.Processes, t.p)
		gr.Timeline.Procs = append(gr.Timeline.Procs, *t.ser)
	}
}

// procTrack is one process's figures as the device pass reads its samples.
type procTrack struct {
	p      Process
	ser    *Series
	tl     *m4
	floors *spans
}

func (a *gpuAnalysis) newProcTrack(pid int) *procTrack {
	t := &procTrack{p: Process{PID: pid, Source: "nvml"}, ser: &Series{Name: "pid " + strconv.Itoa(pid)}, floors: newSpans(a.flo, a.fhi, keepMin)}
	if pid == storage.OtherPID {
		t.ser.Name = "other processes" // past storage.MaxPIDsPerGPU
	}
	t.tl = newM4(a.start, a.end, a.opts.Width, t.ser)
	return t
}

// add takes a block of the process's samples.
func (t *procTrack) add(ts, used []int64) {
	t.p.Samples += int64(len(used))
	t.p.PeakBytes = max(t.p.PeakBytes, slices.Max(used))
	t.tl.addAll(ts, used)
	t.floors.addAll(ts, used)
}

// eachTorch calls f with every allocator sample of the GPU's processes in
// time order: one process's a chunk at a time, several merged.
func (a *gpuAnalysis) eachTorch(f func(*storage.TorchSample)) error {
	lines := a.opts.Lines
	if len(a.torchPIDs) == 1 {
		pid := a.torchPIDs[0]
		b := a.db.TorchBlocks(a.run, a.g.Index, pid, storage.MinTime, storage.MaxTime)
		var rows []storage.TorchSample
		for b.Next() {
			rows = b.TorchRows(rows[:0])
			for i := range rows {
				f(&rows[i])
			}
			if lines != nil {
				lines.AddTorchColumns(a.g.Index, pid, b.T(), b.Ints(storage.TorchAllocated), b.Ints(storage.TorchReserved))
			}
		}
		return b.Err()
	}
	// Several processes, merged by time: each one's samples go to lines in
	// batches of its own.
	type batch struct{ t, alloc, res []int64 }
	batches := map[int]*batch{}
	flush := func(pid int, b *batch) {
		if lines != nil && len(b.t) > 0 {
			lines.AddTorchColumns(a.g.Index, pid, b.t, b.alloc, b.res)
		}
		b.t, b.alloc, b.res = b.t[:0], b.alloc[:0], b.res[:0]
	}
	merged := mergeTorch(a.db, a.run, a.g.Index, a.torchPIDs)
	for merged.Next() {
		s := merged.At()
		f(&s)
		if lines == nil {
			continue
		}
		b := batches[s.PID]
		if b == nil {
			b = &batch{}
			batches[s.PID] = b
		}
		b.t, b.alloc, b.res = append(b.t, s.T), append(b.alloc, s.Allocated), append(b.res, s.Reserved)
		if len(b.t) == 4096 {
			flush(s.PID, b)
		}
	}
	for pid, b := range batches {
		flush(pid, b)
	}
	return merged.Err()
}

// mergeTorch merges the allocator series of several processes by time.
func mergeTorch(db *storage.DB, run storage.Run, gpu int, pids []int) *merge.ByTime[storage.TorchSample] {
	its := make([]merge.Iterator[storage.TorchSample], len(pids))
	for i, pid := range pids {
		its[i] = db.TorchSamples(run, gpu, pid, storage.MinTime, storage.MaxTime)
	}
	return merge.New(func(s storage.TorchSample) int64 { return s.T }, its...)
}

func makePeak(what string, v, t int64, mi *markIndex, steps *growth.Steps) Peak {
	return Peak{What: what, Bytes: v, TNS: t, Epoch: mi.epochAt(t), Step: stepAt(steps, t), NearMark: mi.nearestMark(t)}
}
