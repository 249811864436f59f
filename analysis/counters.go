package analysis

import (
	"slices"
	"sort"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// allocatorCounters totals each counter of fs over the GPU's allocator
// series. A counter counts from its process's start, so the total is what
// it rose by from the GPU's first sample in the span, each process's rise
// added (the processes' last samples before a window carried in), as
// gpupass sums alloc_retries. The sum over the processes at a time is the
// sum of each one's last sample by then, so each series is read on its
// own, a chunk at a time, and only the few samples that end a stretch
// (the first, the last at or before each bound of the rate, the last) are
// converted: merging the series by time and converting every sample cost
// more than the rest of the allocator's analysis. The allocator pass
// keeps the same sums as it reads (counterLog); this read serves only
// where their changes were too many to keep.
func allocatorCounters(db *storage.DB, run storage.Run, gpu int, pids []int, gr *GPUReport, warm growth.Warmup,
	fs []wire.Field[storage.TorchSample]) ([]Counter, error) {
	if len(pids) == 0 || len(fs) == 0 {
		return nil, nil
	}
	from, to, steps := rateSpan(gr, warm)
	ends := make([]counterEnds, len(pids))
	before, windowed := run.Before(windowLookBack)
	for i, pid := range pids {
		e := &ends[i]
		if windowed {
			if err := e.readCarried(db.TorchSamples(before, gpu, pid, storage.MinTime, storage.MaxTime)); err != nil {
				return nil, err
			}
		}
		if err := e.read(db.TorchSamples(run, gpu, pid, storage.MinTime, storage.MaxTime), from, to); err != nil {
			return nil, err
		}
	}
	// The GPU's first sample: the earliest, the first process's on a tie
	// (the order a merge by time gives).
	first := -1
	for i := range ends {
		if ends[i].first != nil && (first < 0 || ends[i].first.T < ends[first].first.T) {
			first = i
		}
	}
	if first < 0 { // no sample in the span
		return nil, nil
	}
	var zero storage.TorchSample
	// sumOf sums, over the processes, pick's sample less the zero sample
	// (a process not seen yet adds nothing).
	sumOf := func(pick func(e *counterEnds, i int) *storage.TorchSample) []int64 {
		sum := make([]int64, len(fs))
		for i := range ends {
			x := pick(&ends[i], i)
			if x == nil {
				continue
			}
			for j, f := range fs {
				sum[j] += f.Get(*x) - f.Get(zero)
			}
		}
		return sum
	}
	orCarried := func(x *storage.TorchSample, e *counterEnds) *storage.TorchSample {
		if x != nil {
			return x
		}
		return e.carried
	}
	base := sumOf(func(e *counterEnds, i int) *storage.TorchSample {
		if i == first {
			return e.first
		}
		return e.carried
	})
	sum := sumOf(func(e *counterEnds, _ int) *storage.TorchSample { return orCarried(e.last, e) })
	// atFrom and atTo are the sums after the samples at or before each
	// bound of the rate, and never before base.
	atFrom, atTo := base, base
	if t0 := ends[first].first.T; t0 <= from {
		atFrom = sumOf(func(e *counterEnds, _ int) *storage.TorchSample { return orCarried(e.atFrom, e) })
	}
	if t0 := ends[first].first.T; t0 <= to {
		atTo = sumOf(func(e *counterEnds, _ int) *storage.TorchSample { return orCarried(e.atTo, e) })
	}
	out := make([]Counter, len(fs))
	for i, f := range fs {
		out[i] = Counter{Name: f.ColumnName(), Total: sum[i] - base[i], Help: f.Help}
		if steps > 0 {
			r := float64(atTo[i]-atFrom[i]) / float64(steps)
			out[i].PerStep, out[i].Steps = &r, steps
		}
	}
	return out, nil
}

// counterEnds are the samples of one process's allocator series that
// allocatorCounters needs; nil where there is none.
type counterEnds struct {
	carried      *storage.TorchSample // the last before the window
	first, last  *storage.TorchSample
	atFrom, atTo *storage.TorchSample // the last at or before each bound
}

// readCarried keeps the last sample of it.
func (e *counterEnds) readCarried(it *storage.Iter[storage.TorchSample]) error {
	for ts := it.NextBlock(); len(ts) > 0; ts = it.NextBlock() {
		x := it.BlockAt(len(ts) - 1)
		e.carried = &x
	}
	return it.Err()
}

// read keeps the samples of it that e holds; from and to are ns, the
// block's times µs, as stored.
func (e *counterEnds) read(it *storage.Iter[storage.TorchSample], from, to int64) error {
	at := func(i int) *storage.TorchSample {
		x := it.BlockAt(i)
		return &x
	}
	for ts := it.NextBlock(); len(ts) > 0; ts = it.NextBlock() {
		if e.first == nil {
			e.first = at(0)
		}
		e.last = at(len(ts) - 1)
		if n := countUpTo(ts, from); n > 0 {
			e.atFrom = at(n - 1)
		}
		if n := countUpTo(ts, to); n > 0 {
			e.atTo = at(n - 1)
		}
	}
	return it.Err()
}

// countUpTo is how many of the ascending µs times ts are at or before ns.
func countUpTo(ts []int64, ns int64) int {
	lo, hi := 0, len(ts)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ts[m]*1000 <= ns {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// rateSpan is where a counter's rate a step is taken: from the end of the
// warm-up (the run's first epoch of two or more, else where the leak rule
// found the judged series settled, else the first step mark: the first
// step fills the cache) to the last step mark, over the step marks after
// the first time and up to the second. steps is 0 where there are none.
func rateSpan(gr *GPUReport, warm growth.Warmup) (from, to int64, steps int) {
	s := gr.Steps
	n := s.Len()
	if n == 0 {
		return 0, 0, 0
	}
	from = s.T(0)
	switch {
	case warm.ByEpoch:
		from = warm.EndNS
	case gr.Leak.SkippedWarmup > 0:
		for _, f := range gr.Floors {
			if f.X >= gr.FitFromX {
				from = f.TNS
				break
			}
		}
	}
	to = s.T(n - 1)
	return from, to, n - s.Search(from+1)
}

// torchCounters are the allocator's event counters of the field table.
var torchCounters = wire.Counters(wire.TorchFields)

// counterLog keeps the sums of the allocator's counters (fs) as the
// allocator pass takes its samples in time order, the way
// allocatorCounters sums them, so that the counters need no second read
// of the series: the sums after the first sample of the span, and after
// each time at which they changed. Counters change seldom (a retry, an
// OOM, a cudaMalloc when the cache grows); a cache that thrashes changes
// them every step, and past maxCounterChanges the log gives up (over) and
// the counters are read again. It keeps each process's last counters
// itself, so that a block of one process's samples is taken as columns
// (takeBlock) and only the samples at which a counter moved cost more
// than a comparison.
type counterLog struct {
	fs    []wire.Field[storage.TorchSample]
	sum   []int64
	inRun bool    // past the samples carried in before a window
	base  []int64 // the sums after the span's first sample
	t     []int64 // the times of the entries; t[0] is the first sample's
	vals  []int64 // len(fs) a time: the sums after the samples at or before it
	over  bool
	// last are each process's counters at its last sample (a process not
	// seen yet counts from 0), and lastPID's those looked up last.
	last    map[int][]int64
	lastPID int
	lastOf  []int64
	row     []int64 // one sample's counters
	// cols are the storage columns of fs; zeros stand for one a block
	// lacks.
	cols  []int
	zeros []int64
}

// maxCounterChanges bounds the log: 40 bytes a change with the table's
// four counters.
var maxCounterChanges = 1 << 16 // a variable for its test

func newCounterLog(fs []wire.Field[storage.TorchSample]) *counterLog {
	c := &counterLog{fs: fs, sum: make([]int64, len(fs)), last: map[int][]int64{}, row: make([]int64, len(fs))}
	for _, f := range fs {
		col, ok := storage.TorchColumn(f.Name)
		if !ok {
			panic("analysis: counter " + f.Name + " is not stored as a column of its own")
		}
		c.cols = append(c.cols, col)
	}
	return c
}

// lastFor is process pid's last counters.
func (c *counterLog) lastFor(pid int) []int64 {
	if c.lastOf == nil || c.lastPID != pid {
		l := c.last[pid]
		if l == nil {
			l = make([]int64, len(c.fs))
			c.last[pid] = l
		}
		c.lastPID, c.lastOf = pid, l
	}
	return c.lastOf
}

// takeSample adds sample x; a nil log keeps nothing.
func (c *counterLog) takeSample(x *storage.TorchSample) {
	if c == nil {
		return
	}
	for i, f := range c.fs {
		c.row[i] = f.Get(*x)
	}
	c.take(x.PID, x.T, c.row)
}

// takeBlock adds the samples of one process at times ts (ns), whose
// columns b holds; a nil log keeps nothing. A column the block lacks (a
// file written before its field) reads as 0, as a sample's field does.
func (c *counterLog) takeBlock(pid int, ts []int64, b *storage.Blocks) {
	if c == nil {
		return
	}
	if len(c.zeros) < len(ts) {
		c.zeros = make([]int64, len(ts))
	}
	cols := make([][]int64, len(c.fs))
	for j, col := range c.cols {
		if b.Has(col) {
			cols[j] = b.Ints(col)[:len(ts)]
		} else {
			cols[j] = c.zeros[:len(ts)]
		}
	}
	last := c.lastFor(pid)
	for i := 0; i < len(ts); {
		// The next sample with something to add or log: the first whose
		// counters are not the process's last, found one column at a time
		// over the samples where none moved (most of them).
		k := i
		if c.base != nil || !c.inRun {
			k = len(ts)
			for j, col := range cols {
				m, v := i, last[j]
				for m < k && col[m] == v {
					m++
				}
				k = m
			}
		}
		if k == len(ts) {
			return
		}
		for j, col := range cols {
			c.row[j] = col[k]
		}
		c.take(pid, ts[k], c.row)
		i = k + 1
	}
}

// take adds the counters v of a sample of process pid at time t.
func (c *counterLog) take(pid int, t int64, v []int64) {
	last := c.lastFor(pid)
	changed := false
	for i, x := range v {
		if d := x - last[i]; d != 0 {
			c.sum[i] += d
			last[i] = x
			changed = true
		}
	}
	switch {
	case !c.inRun || c.over:
	case c.base == nil:
		c.base = slices.Clone(c.sum)
		c.t, c.vals = append(c.t, t), append(c.vals, c.sum...)
	case changed && c.t[len(c.t)-1] != t:
		if len(c.t) == maxCounterChanges {
			c.over, c.t, c.vals = true, nil, nil
			return
		}
		c.t, c.vals = append(c.t, t), append(c.vals, c.sum...)
	case changed: // another sample at the entry's time
		copy(c.vals[len(c.vals)-len(c.fs):], c.sum)
	}
}

// at is the sums after the samples at or before t (t at or after the
// first sample's time).
func (c *counterLog) at(t int64) []int64 {
	i := sort.Search(len(c.t), func(i int) bool { return c.t[i] > t }) - 1
	return c.vals[i*len(c.fs) : (i+1)*len(c.fs)]
}

// counters are the GPU's counters from the sums the allocator pass kept,
// as allocatorCounters makes them; ok is false where the log gave up.
func (c *counterLog) counters(gr *GPUReport, warm growth.Warmup) (out []Counter, ok bool) {
	if c.over {
		return nil, false
	}
	if c.base == nil || len(c.fs) == 0 { // no sample in the span
		return nil, true
	}
	from, to, steps := rateSpan(gr, warm)
	base, end := c.base, c.sum
	atFrom, atTo := base, base
	if c.t[0] <= from {
		atFrom = c.at(from)
	}
	if c.t[0] <= to {
		atTo = c.at(to)
	}
	out = make([]Counter, len(c.fs))
	for i, f := range c.fs {
		out[i] = Counter{Name: f.ColumnName(), Total: end[i] - base[i], Help: f.Help}
		if steps > 0 {
			r := float64(atTo[i]-atFrom[i]) / float64(steps)
			out[i].PerStep, out[i].Steps = &r, steps
		}
	}
	return out, true
}
