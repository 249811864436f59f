package analysis

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
)

// This file is the budget pass: it reads what package budget needs of one
// GPU from the store and the passes before it (the peak, device used near
// it, the budget samples) and keeps the budget, with its advice, in the
// GPU's report.

// budgetPass reads what the budget needs beyond the allocator pass: the
// budget sample of the peak's process at or before the peak, and device
// used near it; then the advice, and the budget at each fatal OOM.
func (a *gpuAnalysis) budgetPass() error {
	if !a.hasTorch || a.peakS.PeakAllocated <= 0 {
		return nil
	}
	p := a.peakS
	bs, err := a.budgetBefore(p.PID, p.T)
	if err != nil {
		return err
	}
	in := budget.Input{Peak: p, OthersReserved: max(0, a.peakSum.reserved-p.Reserved), Budget: bs,
		Epoch: a.mi.epochAt(p.T), Step: stepAt(a.steps, p.T), Ranks: a.ranks()}
	if err := a.budgetUsed(&in); err != nil {
		return err
	}
	if bs != nil {
		if in.Held, err = a.heldAtStepEnd(p); err != nil {
			return err
		}
	}
	b := budget.New(in)
	if a.gr.AllocRetries != nil && *a.gr.AllocRetries > 0 {
		b.Notes = append(b.Notes, "the allocator retried allocations (it freed its cache to make room): reserved at the end of a step may be below what it was at the peak")
	}
	batch, _ := strconv.ParseFloat(a.run.Tags["batch_size"], 64)
	seg, rounding := a.gr.strandable()
	budget.Advise(b, budget.AdviceInput{Batch: batch, Total: a.g.TotalBytes, DriverReserved: orZero(a.gr.DriverReservedBytes),
		SampleAllocated: p.Allocated, Segment: seg, Rounding: rounding})
	a.gr.Budget = b
	for i := range a.gr.OOMs {
		o := &a.gr.OOMs[i]
		if o.Outcome != OOMFatal || o.AllocatedBytes == nil {
			continue
		}
		ob, err := a.budgetBefore(p.PID, o.TNS+1)
		if err != nil {
			return err
		}
		newOOM := func() *budget.OOM {
			return budget.NewOOM(budget.OOMInput{Allocated: o.AllocatedBytes, Requested: o.RequestedBytes, Free: o.FreeBytes,
				FittingBatch: o.FittingBatch, UpperBound: o.FitKind == FitUpperBound}, ob, batch)
		}
		o.Budget = newOOM()
		// An optimizer with no state yet had its first step to come: the
		// batch that fits must leave room for what that step creates too,
		// as the OOM's cause counts it (explainOOM).
		if first := stateToCome(o.Budget, budget.FirstStepState(b)); first > 0 && o.FittingBatch != nil {
			oomBatch(o, batch, a.gr.stepPeakBefore(o.TNS), seg, rounding, first)
			o.Budget = newOOM()
		}
	}
	return nil
}

// strandable is what the segment bound of compare --by's rule counts for
// the GPU's allocator at the limit: its largest segment and 2 MiB for
// each of the most segments it held; 0, 0 where the probe did not measure
// them.
func (g *GPUReport) strandable() (segment, rounding int64) {
	return orZero(g.LargestSegmentBytes), orZero(g.MostSegments) * replay.SegmentRounding
}

func orZero(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// ranks is how many ranks the run has: its GPUs, when the probe reports
// ranks (a distributed job), else 1.
func (a *gpuAnalysis) ranks() int {
	if a.peakS.Rank >= 0 && len(a.run.GPUs) > 1 {
		return len(a.run.GPUs)
	}
	return 1
}

// heldAtStepEnd is what the peak's process had allocated at the end of
// the peak's step beyond the watched model's tensors then (the gradients
// as they are then): the sample at the step's mark, which the probe takes
// with it, less its budget. The peak's own sample may be one the probe's
// timer took inside a step that never ended (the run's last): then the
// step before's end. nil without a sample at that mark.
func (a *gpuAnalysis) heldAtStepEnd(p storage.TorchSample) (*int64, error) {
	i := a.steps.Search(p.T)
	if i == a.steps.Len() {
		i--
	}
	if i < 0 {
		return nil, nil
	}
	end := a.steps.T(i)
	it := a.db.TorchSamples(a.run, a.g.Index, p.PID, end, end+1)
	var at *storage.TorchSample
	for it.Next() {
		s := it.At()
		at = &s
	}
	if err := it.Err(); err != nil || at == nil {
		return nil, err
	}
	bs, err := a.budgetBefore(p.PID, end)
	if err != nil || bs == nil {
		return nil, err
	}
	held := max(0, at.Allocated-(bs.Params+bs.Grads+bs.OptimizerState+bs.Buffers))
	return &held, nil
}

// budgetBefore is process pid's last budget sample at or before t. A
// watched process sends one with each allocator sample, so the minute
// before t is read first, and the run from its start only where that
// holds none: the peak, its step's end and each OOM ask, and a day's run
// has a budget sample every few steps.
func (a *gpuAnalysis) budgetBefore(pid int, t int64) (*storage.BudgetSample, error) {
	for _, from := range []int64{max(t, storage.MinTime+windowLookBack) - windowLookBack, storage.MinTime} {
		it := a.db.BudgetSamples(a.run, a.g.Index, pid, from, t+1)
		var last *storage.BudgetSample
		for it.Next() {
			s := it.At()
			last = &s
		}
		if err := it.Err(); err != nil || last != nil {
			return last, err
		}
	}
	return nil, nil
}

// budgetUsed sets device used at the peak; without a device sample of
// that moment, not seen by PyTorch from the pair of device and allocator
// samples nearest the peak within windowLookBack, or why it is not known.
func (a *gpuAnalysis) budgetUsed(in *budget.Input) error {
	if !a.hasDevice {
		in.UnseenWhy = "the run has no device samples on this GPU (NVML)"
		return nil
	}
	t, tol := in.Peak.T, pairTolerance(a.run)
	if u, ok, err := a.deviceNear(t, tol); err != nil || ok {
		if ok {
			in.Used = i64(u)
		}
		return err
	}
	var dev []storage.DeviceSample
	it := a.db.DeviceSamples(a.run, a.g.Index, t-windowLookBack, t+windowLookBack+1)
	for it.Next() {
		dev = append(dev, it.At())
	}
	if err := it.Err(); err != nil {
		return err
	}
	slices.SortStableFunc(dev, func(x, y storage.DeviceSample) int { return cmp.Compare(abs64(x.T-t), abs64(y.T-t)) })
	for _, d := range dev {
		res, ok, err := a.reservedNear(d.T, tol)
		if err != nil {
			return err
		}
		if ok && d.Used >= res {
			in.Unseen, in.UnseenAt = i64(d.Used-res), d.T
			return nil
		}
	}
	in.UnseenWhy = fmt.Sprintf("no device sample within %s of the peak, nor one within %s of it with allocator samples of the same moment", units.FormatDuration(float64(tol)/1e9), units.FormatDuration(windowLookBack/1e9))
	return nil
}

// reservedNear is what the GPU's PyTorch processes reserved at t: each
// one's sample nearest t within tol, summed; false when one of them that
// was running then has none that near.
func (a *gpuAnalysis) reservedNear(t, tol int64) (int64, bool, error) {
	var sum int64
	for _, pid := range a.torchPIDs {
		it := a.db.TorchSamples(a.run, a.g.Index, pid, t-tol, t+tol+1)
		best, v := tol+1, int64(0)
		for it.Next() {
			if s := it.At(); abs64(s.T-t) < best {
				best, v = abs64(s.T-t), s.Reserved
			}
		}
		if err := it.Err(); err != nil {
			return 0, false, err
		}
		if best > tol {
			if len(a.torchPIDs) == 1 {
				return 0, false, nil
			}
			continue // a process not running then reserves nothing
		}
		sum += v
	}
	return sum, sum > 0, nil
}

// deviceNear is the device sample nearest to t within tol.
func (a *gpuAnalysis) deviceNear(t, tol int64) (used int64, ok bool, err error) {
	it := a.db.DeviceSamples(a.run, a.g.Index, t-tol, t+tol+1)
	best := tol + 1
	for it.Next() {
		s := it.At()
		if d := abs64(s.T - t); d < best {
			best, used, ok = d, s.Used, true
		}
	}
	return used, ok, it.Err()
}
