package analysis

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/analysis/units"
)

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
		if z := parseOOMSizes(m.Text); z.requested >= 0 {
			o.RequestedBytes = i64(z.requested)
			if z.free >= 0 {
				o.FreeBytes = i64(z.free)
				limitFree(&o, z.limit)
			}
		}
		gr.OOMs = append(gr.OOMs, o)
	}
	a.oomOutcomes()
}

// limitFree takes the free memory at o down to what the process's limit
// leaves beyond what its allocator reserved, where that is less: under
// torch.cuda.set_per_process_memory_fraction the device has room the
// process may not take. Without a fraction the limit is the device's
// memory, and the device's free memory is at most that less reserved (the
// CUDA context and other processes use the rest), so nothing changes.
func limitFree(o *OOM, limit int64) {
	if limit < 0 || o.ReservedBytes == nil || o.FreeBytes == nil {
		return
	}
	if left := max(0, limit-*o.ReservedBytes); left < *o.FreeBytes {
		o.DeviceFreeBytes, o.FreeBytes, o.ProcessLimitBytes = o.FreeBytes, i64(left), i64(limit)
	}
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
		seg, rounding := gr.strandable()
		oomAdvice(o, batch, gr.stepPeakBefore(o.TNS), seg, rounding, 0)
		gr.oomWhatIfs(o)
	}
}

// stepPeakBefore is the run's own per-step peak before t: the highest of
// the steps completed before it; nil where none did.
func (g *GPUReport) stepPeakBefore(t int64) *int64 {
	var peak *int64
	for _, p := range g.StepPeaks {
		if p.TNS < t && (peak == nil || p.Bytes > *peak) {
			peak = i64(p.Bytes)
		}
	}
	return peak
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
