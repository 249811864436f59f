package analysis

import (
	"fmt"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/analysis/units"
)

// WholeRun is what a full recording of a job needed beyond its first
// steps: what a trial of a few steps (memrec fit) does not see. An
// evaluation pass, longer sequences later in an epoch, a checkpoint or a
// leak raise the step peak after the first steps; the margin is the
// larger of the rise of the step peak over the run against its first
// steps, and the growth rule's slope (Leak: a leak, the cache, memory
// PyTorch does not see) times the run's steps. Both are taken as shares
// of the first steps' peak, so that they scale with the value as the
// activations do (a leak of a fixed size then errs on the safe side).
type WholeRun struct {
	Run            string `json:"run"`
	GPU            int    `json:"gpu"`   // the fullest GPU
	Steps          int    `json:"steps"` // step peaks in the run
	FirstSteps     int    `json:"first_steps"`
	FirstPeakBytes int64  `json:"first_peak_bytes"` // the highest of the first steps
	PeakBytes      int64  `json:"peak_bytes"`       // the highest over the run
	// Growth is the growth rule's verdict when memory grows (leak,
	// cache_growth, unseen_growth), with its slope; GrowthBytes is that
	// slope × the run's steps.
	Growth        growth.Verdict `json:"growth,omitempty"`
	GrowthPerStep *float64       `json:"growth_bytes_per_step,omitempty"`
	GrowthBytes   float64        `json:"growth_bytes"`
	// Fraction is the margin: max(PeakBytes − FirstPeakBytes, GrowthBytes)
	// over FirstPeakBytes.
	Fraction float64 `json:"fraction"`
	Words    string  `json:"words"`
}

// WholeRunMargin reads the margin from a run with step peaks over more
// than firstSteps steps, on its GPU with the highest step peak; false when
// the run has no more steps than that (a trial, not a full recording).
func WholeRunMargin(rep *Report, firstSteps int) (WholeRun, bool) {
	var g *GPUReport
	for i := range rep.GPUs {
		c := &rep.GPUs[i]
		if c.PeakStepBytes != nil && len(c.StepPeaks) > 0 && (g == nil || *c.PeakStepBytes > *g.PeakStepBytes) {
			g = c
		}
	}
	if g == nil || g.Steps.Len() <= firstSteps {
		return WholeRun{}, false
	}
	w := WholeRun{Run: rep.Run, GPU: g.GPU, Steps: g.Steps.Len(), FirstSteps: firstSteps}
	x0 := g.StepPeaks[0].X
	for _, p := range g.StepPeaks {
		if p.X < x0+float64(firstSteps) || w.FirstPeakBytes == 0 {
			w.FirstPeakBytes = max(w.FirstPeakBytes, p.Bytes)
		}
		w.PeakBytes = max(w.PeakBytes, p.Bytes)
	}
	if w.FirstPeakBytes <= 0 {
		return WholeRun{}, false
	}
	if v := g.Leak.Judgement(); v.Grows() && g.Leak.SlopeBytesPerStep != nil && *g.Leak.SlopeBytesPerStep > 0 {
		s := *g.Leak.SlopeBytesPerStep
		w.Growth, w.GrowthPerStep, w.GrowthBytes = v, &s, s*float64(w.Steps)
	}
	rise := float64(w.PeakBytes - w.FirstPeakBytes)
	w.Fraction = max(rise, w.GrowthBytes) / float64(w.FirstPeakBytes)
	first := float64(w.FirstPeakBytes)
	w.Words = fmt.Sprintf("run %q (%d steps): step peak %s over the run against %s in its first %d steps (+%.1f %%)",
		w.Run, w.Steps, units.FormatBytes(w.PeakBytes), units.FormatBytes(w.FirstPeakBytes), firstSteps, 100*rise/first)
	if w.GrowthPerStep != nil {
		w.Words += fmt.Sprintf("; %s of %s a step, × %d steps = %s (+%.1f %%)", w.Growth, units.FormatBytes(int64(*w.GrowthPerStep)), w.Steps, units.FormatBytes(int64(w.GrowthBytes)), 100*w.GrowthBytes/first)
	} else {
		w.Words += "; memory does not grow"
	}
	w.Words += fmt.Sprintf(": the recommended value leaves %.1f %% of the step peak for it", 100*w.Fraction)
	return w, true
}
