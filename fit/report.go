package fit

import (
	"github.com/memrec/memrec/analysis"
)

// strandedAtOOM is what the allocator held and could not use at a run's
// fatal OOM: reserved less allocated, as a share of allocated plus the
// request that failed. Before the error the allocator has freed its cache
// and retried, so what it still holds unallocated lies in segments that
// hold tensors: the splitting and rounding the job costs at its limit,
// measured where AllocatorAllowance is a bound over models. The fullest
// GPU's, where several ran out.
func strandedAtOOM(r *analysis.Report) (float64, bool) {
	best, ok := 0.0, false
	for _, g := range r.GPUs {
		for _, o := range g.OOMs {
			if o.Outcome != analysis.OOMFatal || o.AllocatedBytes == nil || o.ReservedBytes == nil || *o.AllocatedBytes <= 0 {
				continue
			}
			asked := float64(*o.AllocatedBytes)
			if o.RequestedBytes != nil {
				asked += float64(*o.RequestedBytes)
			}
			if s := float64(max(*o.ReservedBytes-*o.AllocatedBytes, 0)) / asked; !ok || s > best {
				best, ok = s, true
			}
		}
	}
	return best, ok
}

// stepPeak is the highest per-step peak allocated over the run's GPUs
// (the fullest rank's), or nil without allocator samples.
func stepPeak(r *analysis.Report) *int64 {
	var p *int64
	for _, g := range r.GPUs {
		if g.PeakStepBytes != nil && (p == nil || *g.PeakStepBytes > *p) {
			v := *g.PeakStepBytes
			p = &v
		}
	}
	return p
}

// heldBy is the most the allocator reserved on the run's fullest GPU (by
// reserved memory) and how often it retried there; nil without allocator
// samples from a probe that reads the allocator's segments (one that
// sends the retries with them: PyTorch's, without expandable segments).
func heldBy(r *analysis.Report) (reserved, retries *int64) {
	for _, g := range r.GPUs {
		if g.PeakReservedBytes != nil && g.LargestSegmentBytes != nil && (reserved == nil || *g.PeakReservedBytes > *reserved) {
			reserved, retries = g.PeakReservedBytes, g.AllocRetries
		}
	}
	return reserved, retries
}
