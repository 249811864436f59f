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
// gpupass sums alloc_retries. It reads the series once more: the
// allocator pass keeps the same sums as it reads them (counterLog), and
// this second read serves only where their changes were too many to keep.
func allocatorCounters(db *storage.DB, run storage.Run, gpu int, pids []int, gr *GPUReport, warm growth.Warmup,
	fs []wire.Field[storage.TorchSample]) ([]Counter, error) {
	if len(pids) == 0 || len(fs) == 0 {
		return nil, nil
	}
	last := map[int]storage.TorchSample{}
	sum := make([]int64, len(fs))
	take := func(x storage.TorchSample) {
		prev := last[x.PID]
		last[x.PID] = x
		for i, f := range fs {
			sum[i] += f.Get(x) - f.Get(prev)
		}
	}
	if before, ok := run.Before(windowLookBack); ok {
		carried := mergeTorch(db, before, gpu, pids)
		for carried.Next() {
			take(carried.At())
		}
		if err := carried.Err(); err != nil {
			return nil, err
		}
	}
	from, to, steps := rateSpan(gr, warm)
	// base is the sums at the first sample of the span, atFrom and atTo
	// at the rate's bounds (after the samples at or before each, and never
	// before base).
	var base, atFrom, atTo []int64
	it := mergeTorch(db, run, gpu, pids)
	for it.Next() {
		x := it.At()
		if base != nil && atFrom == nil && x.T > from {
			atFrom = slices.Clone(sum)
		}
		if base != nil && atTo == nil && x.T > to {
			atTo = slices.Clone(sum)
		}
		take(x)
		if base == nil {
			base = slices.Clone(sum)
			if x.T > from {
				atFrom = base
			}
			if x.T > to {
				atTo = base
			}
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	if base == nil { // no sample in the span
		return nil, nil
	}
	if atFrom == nil {
		atFrom = sum
	}
	if atTo == nil {
		atTo = sum
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
// allocator pass takes its samples in time order (allocSum.take), the way
// allocatorCounters sums them, so that the counters need no second read
// of the series: the sums after the first sample of the span, and after
// each time at which they changed. Counters change seldom (a retry, an
// OOM, a cudaMalloc when the cache grows); a cache that thrashes changes
// them every step, and past maxCounterChanges the log gives up (over) and
// the counters are read again.
type counterLog struct {
	fs    []wire.Field[storage.TorchSample]
	sum   []int64
	inRun bool    // past the samples carried in before a window
	base  []int64 // the sums after the span's first sample
	t     []int64 // the times of the entries; t[0] is the first sample's
	vals  []int64 // len(fs) a time: the sums after the samples at or before it
	over  bool
}

// maxCounterChanges bounds the log: 40 bytes a change with the table's
// four counters.
var maxCounterChanges = 1 << 16 // a variable for its test

func newCounterLog(fs []wire.Field[storage.TorchSample]) *counterLog {
	return &counterLog{fs: fs, sum: make([]int64, len(fs))}
}

// take adds sample x of a process whose sample before was prev; a nil
// log keeps nothing.
func (c *counterLog) take(x, prev *storage.TorchSample) {
	if c == nil {
		return
	}
	changed := false
	for i, f := range c.fs {
		if d := f.Get(*x) - f.Get(*prev); d != 0 {
			c.sum[i] += d
			changed = true
		}
	}
	switch {
	case !c.inRun || c.over:
	case c.base == nil:
		c.base = slices.Clone(c.sum)
		c.t, c.vals = append(c.t, x.T), append(c.vals, c.sum...)
	case changed && c.t[len(c.t)-1] != x.T:
		if len(c.t) == maxCounterChanges {
			c.over, c.t, c.vals = true, nil, nil
			return
		}
		c.t, c.vals = append(c.t, x.T), append(c.vals, c.sum...)
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
