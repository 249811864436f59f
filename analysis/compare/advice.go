package compare

import (
	"strconv"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/replay"
)

// advise gives the advice of the run at the largest value with a watched
// budget again, with a sample's cost from the need curve (its marginal
// cost between the two largest values): a batch that fits after each
// remedy then keeps what does not grow with the batch.
func (by *ByTag) advise(c *Comparison) {
	if by.Need == nil || by.Basis != "step_peak_allocated" && by.Basis != "allocator_replay" {
		return
	}
	var best *budget.Budget
	var bestRun string
	var value float64
	for _, r := range c.Reports {
		v, _ := strconv.ParseFloat(r.Tags[by.Tag], 64)
		if s := Summarize(r); s.Budget != nil && s.Budget.Watched && !analysis.RanOutOfMemory(r) && (best == nil || v > value) {
			best, bestRun, value = s.Budget, r.Run, v
		}
	}
	if best == nil || value <= 0 {
		return
	}
	b := *best
	b.Help, b.Skipped, b.Missing, b.FitsBatch = nil, nil, nil, nil
	sampled, _ := b.Part(budget.PartActivations)
	var segPerUnit float64
	if l := by.SegmentLine; l != nil {
		segPerUnit = l.SlopeBytesPerUnit
	}
	if l := by.SplitLine; l != nil {
		// Advise counts StrandedSegments segments a sample; the split
		// line is the whole stranded room a sample.
		segPerUnit = l.SlopeBytesPerUnit / replay.StrandedSegments
	}
	budget.Advise(&b, budget.AdviceInput{Batch: value, Total: by.TotalBytes, DriverReserved: by.DriverReservedBytes,
		SampleAllocated: b.PeakAllocatedBytes - sampled,
		Curve: &budget.SampleCost{Bytes: by.Need.MarginalBytesPerUnit, Allowance: by.AllowanceFraction,
			Segment: segPerUnit, Rounding: by.RoundingBytes, Runs: len(by.Points), Fits: by.replayFits()}})
	by.Help, by.HelpRun = b.Help, bestRun
}
