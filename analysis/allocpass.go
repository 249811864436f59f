package analysis

import (
	"math"
	"time"

	"github.com/memrec/memrec/merge"
	"github.com/memrec/memrec/storage"
)

// The allocator pass: every allocator sample of the GPU's processes, in
// time order, summed over the processes.

// retire takes out of the sums the processes whose last sample is more
// than allocatorLife before t. A retired process keeps its counters
// (retries, OOMs, the table's counters), so that a later sample of it adds only what is new.
func (s *allocSum) retire(t int64) {
	for _, l := range s.last {
		if l.T != retired && t-l.T > allocatorLife {
			s.cur.allocated -= l.Allocated
			s.cur.reserved -= l.Reserved
			s.cur.inactive -= l.InactiveSplit
			s.cur.peak -= l.PeakAllocated
			s.cur.segments -= l.Segments
			r := storage.TorchSample{T: retired}
			for _, f := range torchCounters {
				f.Set(&r, f.Get(*l))
			}
			*l = r
		}
	}
}

// retired marks a process taken out of the sums.
const retired = math.MinInt64

// allocSum sums the allocator samples of a GPU's processes as they come in
// time order, each process counting with its latest sample, and keeps the
// peaks and the fragmentation of the sums.
type allocSum struct {
	cur  torchAtTime
	last map[int]*storage.TorchSample // by pid
	// lastPID's entry of last, looked up once for the run of samples of
	// one process (the common case: one process a GPU).
	lastPID int
	lastOf  *storage.TorchSample
	// budgetAt is the index in the block given to addOne of the sample
	// that is budgetPeak; -1 when none of the block is.
	budgetAt            int
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
	// mostLive is the most allocated + inactive split at once: what the
	// segments holding live blocks spanned, which the allocator cannot
	// give back; lastSplit the inactive split at the last sample.
	mostLive, lastSplit int64
	counters            *counterLog
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
	if x.LargestSegment != prev.LargestSegment { // rare: the probe looks once a minute
		// Each process's allocator may strand one of its own.
		var sum int64
		for _, l := range s.last {
			sum += l.LargestSegment
		}
		s.largestSeg = max(s.largestSeg, sum)
	}
	s.note(x.T, x.AllocRetries > prev.AllocRetries && x.OOMs == prev.OOMs, x.Reserved, x.PeakAllocated)
	if x.PeakAllocated > 0 && x.PeakAllocated >= s.budgetPeak.PeakAllocated {
		s.budgetPeak, s.budgetSum = *x, s.cur
	}
}

// note takes the sums s.cur after a sample at t into the run's figures:
// the most segments, split and live bytes, the peaks, the first retry and,
// where the sample's process retried without running out (retried), how
// close its reserved (res) came to its step peak (peak). add and addOne
// both end with it.
func (s *allocSum) note(t int64, retried bool, res, peak int64) {
	c := &s.cur
	s.mostSegs = max(s.mostSegs, c.segments)
	s.mostSplit = max(s.mostSplit, c.inactive)
	s.mostLive, s.lastSplit = max(s.mostLive, c.allocated+c.inactive), c.inactive
	if retried && peak > 0 && res > 0 {
		r := max(0, float64(res)/float64(peak)-1)
		if s.nearLimit == nil || r > *s.nearLimit {
			s.nearLimit = &r
		}
	}
	if s.firstRetries < 0 {
		s.firstRetries = c.retries
	} else if c.retries > s.firstRetries && s.firstRetryNS == nil {
		s.firstRetryNS = i64(t)
	}
	if c.allocated > s.peakA.Allocated || s.peakA.T == 0 {
		s.peakA = storage.TorchSample{T: t, Allocated: c.allocated}
	}
	if c.reserved > s.peakR.Reserved || s.peakR.T == 0 {
		s.peakR = storage.TorchSample{T: t, Reserved: c.reserved}
	}
	if c.peak > s.peakS.PeakAllocated {
		s.peakS = storage.TorchSample{T: t, PeakAllocated: c.peak}
	}
}

// torchCols are one block's allocator columns, for a GPU with one
// process: its samples are summed as they are read, with no struct a
// sample.
type torchCols struct {
	t, alloc, res, activeOver, split, peak, segs, retries, ooms, largest []int64
	zeros                                                                []int64
}

// of points c at block b's columns; a file written before the largest
// segment was stored reads it as 0.
func (c *torchCols) of(b *storage.Blocks) *torchCols {
	c.t = b.T()
	n := len(c.t)
	col := func(i int) []int64 { return b.Ints(i)[:n] }
	c.alloc, c.res, c.activeOver = col(storage.TorchAllocated), col(storage.TorchReserved), col(storage.TorchActiveOver)
	c.split, c.peak, c.segs = col(storage.TorchInactiveSplit), col(storage.TorchPeakAllocated), col(storage.TorchSegments)
	c.retries, c.ooms = col(storage.TorchAllocRetries), col(storage.TorchOOMs)
	if b.Has(storage.TorchLargestSegment) {
		c.largest = col(storage.TorchLargestSegment)
	} else {
		if cap(c.zeros) < n {
			c.zeros = make([]int64, n)
		}
		c.largest = c.zeros[:n]
	}
	return c
}

// one readies s for addOne with process pid's samples, the GPU's only
// process: the sums are then that process's last sample.
func (s *allocSum) one(pid int) {
	if s.lastOf == nil || s.lastPID != pid {
		l := s.last[pid]
		if l == nil {
			l = new(storage.TorchSample)
			s.last[pid] = l
		}
		s.lastPID, s.lastOf = pid, l
	}
}

// addOne is add for sample i of c, of the GPU's only process (one). The
// sample that becomes budgetPeak is only marked (budgetAt), and made whole
// by blockDone: the peak of the steps is reached again and again.
func (s *allocSum) addOne(c *torchCols, i int) {
	var prevLargest, prevRetries, prevOOMs int64
	if i > 0 {
		prevLargest, prevRetries, prevOOMs = c.largest[i-1], c.retries[i-1], c.ooms[i-1]
	} else {
		l := s.lastOf
		prevLargest, prevRetries, prevOOMs = l.LargestSegment, l.AllocRetries, l.OOMs
	}
	t, res, peak, retries := c.t[i], c.res[i], c.peak[i], c.retries[i]
	// Field by field, and never copied whole in this loop: a struct built
	// on the stack and copied in, or copied out right after its fields
	// were stored, stalls the store or the load.
	cur := &s.cur
	cur.allocated, cur.reserved, cur.inactive = c.alloc[i], res, c.split[i]
	cur.retries, cur.peak, cur.segments = retries, peak, c.segs[i]
	if c.largest[i] != prevLargest {
		s.largestSeg = max(s.largestSeg, c.largest[i])
	}
	s.note(t, retries > prevRetries && c.ooms[i] == prevOOMs, res, peak)
	if peak > 0 && peak >= s.budgetPeak.PeakAllocated {
		s.budgetAt, s.budgetPeak.PeakAllocated = i, peak // the sums too, in blockDone
	}
}

// blockDone ends a block c of b given to addOne: the process's last
// sample and the budget's peak sample and sums, if the block had it, are
// made whole.
func (s *allocSum) blockDone(b *storage.Blocks, c *torchCols) {
	if i := s.budgetAt; i >= 0 {
		s.budgetPeak = b.TorchRow(i)
		s.budgetSum = torchAtTime{allocated: c.alloc[i], reserved: c.res[i], inactive: c.split[i],
			retries: c.retries[i], peak: c.peak[i], segments: c.segs[i]}
	}
	if n := len(c.t); n > 0 {
		*s.lastOf = b.TorchRow(n - 1)
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
	tq := 0
	sum := &allocSum{last: map[int]*storage.TorchSample{}, firstRetries: -1, counters: newCounterLog(torchCounters)}
	a.counterLog = sum.counters
	sum.frags = a.frags
	if err := a.carryIn(sum); err != nil {
		return err
	}
	sum.counters.inRun = true
	tla := newM4(a.start, a.end, a.opts.Width, &gr.Timeline.Allocated)
	tlr := newM4(a.start, a.end, a.opts.Width, &gr.Timeline.Reserved)
	// The sums go to the trackers in blocks, which take them as runs.
	var bt, ba, br, bp []int64
	var bs []torchAtTime
	// feed gives the trackers the sums at times ts: allocated, reserved
	// and the step peak, and all of them where OOMs need them.
	feed := func(ts, alloc, res, peak []int64, sums []torchAtTime) {
		if len(sums) > 0 {
			a.oomAlloc.addAll(ts, sums)
		}
		a.alloc.at.addAll(ts, alloc)
		lo, hi, rlo, rhi := a.alloc.addAllWith(a.resFloors, ts, alloc, res)
		a.stepPeaks.addAll(ts, peak)
		tla.addBlock(ts, alloc, lo, hi)
		tlr.addBlock(ts, res, rlo, rhi)
	}
	flush := func() {
		if len(bt) == 0 {
			return
		}
		feed(bt, ba, br, bp, bs)
		bt, ba, br, bp, bs = bt[:0], ba[:0], br[:0], bp[:0], bs[:0]
	}
	var n int64 // samples merged so far
	// next brings the query times before t up to the sums, before a
	// sample at t moves them.
	next := func(t int64) {
		n++
		for tq < len(a.q) && a.q[tq] < t {
			a.atQuery(tq, sum.cur)
			tq++
		}
	}
	// took keeps the figures of the sums after the sample at t, whose
	// process's own step peak and reserved are peak and res.
	// A process's step peak and reserved hold from sample to sample for
	// most of a step: its waste is worked out again only when they move.
	wastePeak, wasteRes, waste := int64(0), int64(0), 0.0
	took := func(t, peak, res int64) {
		sumA, sumR := sum.cur.allocated, sum.cur.reserved
		if peak > 0 && res > 0 {
			if peak != wastePeak || res != wasteRes {
				// The allocator may give memory back after its peak (near
				// the limit it frees its cache and retries): never below 0.
				wastePeak, wasteRes, waste = peak, res, max(0, 1-float64(peak)/float64(res))
			}
			sum.waste.add(waste)
		}
		if sumR > 0 {
			f := float64(sumR-sumA) / float64(sumR)
			st := float64(sum.cur.inactive) / float64(sumR)
			sum.frags = append(sum.frags, f)
			sum.frag.add(f, st)
			gr.FragSeries = append(gr.FragSeries, FragPoint{TNS: t, Frag: f, Stuck: st, I: n - 1})
			if len(gr.FragSeries) >= 8*a.opts.Width { // a long run: keep the chart's points bounded
				gr.FragSeries = halveFrag(gr.FragSeries)
			}
		}
	}
	var cols torchCols
	err := a.eachTorch(sum.counters, func(s *storage.TorchSample) {
		next(s.T)
		sum.add(s)
		if s.Allocated > s.Reserved || s.Active < s.Allocated {
			gr.InconsistentSamples++
		}
		bt, ba, br, bp = append(bt, s.T), append(ba, sum.cur.allocated), append(br, sum.cur.reserved), append(bp, sum.cur.peak)
		if len(a.oomT) > 0 { // the sums are kept only for the times of OOMs
			bs = append(bs, sum.cur)
		}
		if len(bt) == 4096 {
			flush()
		}
		took(s.T, s.PeakAllocated, s.Reserved)
	}, func(pid int, b *storage.Blocks) {
		c := cols.of(b)
		sum.one(pid)
		sum.budgetAt = -1
		for i, t := range c.t {
			next(t)
			sum.addOne(c, i)
			if c.alloc[i] > c.res[i] || c.activeOver[i]+c.alloc[i] < c.alloc[i] {
				gr.InconsistentSamples++
			}
			took(t, c.peak[i], c.res[i])
		}
		// One process: the sums are its columns.
		bs = bs[:0]
		if len(a.oomT) > 0 {
			for i := range c.t {
				bs = append(bs, torchAtTime{allocated: c.alloc[i], reserved: c.res[i], inactive: c.split[i],
					retries: c.retries[i], peak: c.peak[i], segments: c.segs[i]})
			}
		}
		feed(c.t, c.alloc, c.res, c.peak, bs)
		sum.blockDone(b, c)
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

// lendAllocatorColumns takes from a.cols the arrays the allocator pass
// fills, before the device pass runs beside it (the shelf is not safe for
// concurrent use).
func (a *gpuAnalysis) lendAllocatorColumns() {
	if !a.hasTorch {
		return
	}
	a.resAt = lend[int64](a.cols, len(a.q))
	// Sized for this GPU's share of the run's samples: a day-long run has
	// millions, and growing by copying would double the peak.
	a.frags = lend[float64](a.cols, int(perGPUShare(a.run, a.run.Counts.TorchSamples)))[:0]
}

// atQuery keeps the allocator sums c at query time i.
func (a *gpuAnalysis) atQuery(i int, c torchAtTime) {
	a.resAt[i] = c.reserved
	if i == 0 {
		a.retries0 = c.retries
	}
}

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
		sum.counters.takeSample(&x)
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
		gr.MostLiveSegmentBytes, gr.LastInactiveSplitBytes = i64(sum.mostLive), i64(sum.lastSplit)
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
	a.frags = sum.frags
	decimateFrag(gr, a.opts.Width)
}

// eachTorch gives every allocator sample of the GPU's processes in time
// order: one process's to block, a chunk at a time as columns; several
// processes' merged, to f one sample at a time. Each sample's counters go
// to counters first: one process's as columns, a chunk at a time.
func (a *gpuAnalysis) eachTorch(counters *counterLog, f func(*storage.TorchSample), block func(pid int, b *storage.Blocks)) error {
	lines := a.opts.Lines
	if len(a.torchPIDs) == 1 {
		pid := a.torchPIDs[0]
		b := a.db.TorchBlocks(a.run, a.g.Index, pid, storage.MinTime, storage.MaxTime)
		for b.Next() {
			counters.takeBlock(pid, b.T(), b)
			a.readSamples(len(b.T()))
			block(pid, b)
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
		a.readSamples(1)
		counters.takeSample(&s)
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
