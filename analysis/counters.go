package analysis

import (
	"slices"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// allocatorCounters totals each counter of fs over the GPU's allocator
// series. A counter counts from its process's start, so the total is what
// it rose by from the GPU's first sample in the span, each process's rise
// added (the processes' last samples before a window carried in), as
// gpupass sums alloc_retries. It reads the series once more: a hook in
// allocSum.take (the only place the allocator samples pass in order)
// would spare that.
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
