package analysis

import (
	"fmt"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/analysis/units"
)

// WholeRun is what a full recording of a job needed beyond its first
// steps: what a trial of a few steps (memrec fit) does not see. An
// evaluation pass, longer sequences later in an epoch or a checkpoint
// raise the step peak after the first steps; that rise is a share of the
// first steps' peak (Fraction), so that it scales with the value as the
// activations do. Growth the growth rule judges (a leak, the cache, memory
// PyTorch does not see) is a number of bytes a step whatever the value:
// its allowance is that slope times the steps the job runs (the full
// recording's), in bytes, bounded by GrowthAllowanceMax of the room (see
// Allowance); the part of the rise it explains is not counted twice.
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
	// Fraction is the margin that scales with the value: the rise of the
	// step peak beyond what the growth explains, max(0, PeakBytes −
	// FirstPeakBytes − GrowthBytes), over FirstPeakBytes.
	Fraction float64 `json:"fraction"`
	// AllowanceBytes is what the recommended value leaves for the growth
	// (GrowthBytes, or the bound where Bounded); set by Allowance.
	AllowanceBytes float64 `json:"growth_allowance_bytes"`
	Bounded        bool    `json:"growth_allowance_bounded,omitempty"`
	Words          string  `json:"words"`
}

// GrowthAllowanceMax bounds the growth's allowance, as a share of the
// room the recommendation is made in: growth that needs more than this
// would leave too little for the step itself, and no batch size keeps a
// leak from filling the GPU; the leak is what to fix.
const GrowthAllowanceMax = 0.5

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
	first := float64(w.FirstPeakBytes)
	w.Fraction = max(0, rise-w.GrowthBytes) / first
	w.AllowanceBytes = w.GrowthBytes
	w.Words = fmt.Sprintf("run %q (%d steps): step peak %s over the run against %s in its first %d steps (+%.1f %%)",
		w.Run, w.Steps, units.FormatBytes(w.PeakBytes), units.FormatBytes(w.FirstPeakBytes), firstSteps, 100*rise/first)
	if w.GrowthPerStep != nil {
		w.Words += fmt.Sprintf("; %s of %s a step, × its %d steps = %s, left for it in bytes whatever the value; the rest of the rise, %.1f %%, grows with the value",
			w.Growth, units.FormatBytes(int64(*w.GrowthPerStep)), w.Steps, units.FormatBytes(int64(w.GrowthBytes)), 100*w.Fraction)
	} else {
		w.Words += "; memory does not grow: the rise grows with the value"
	}
	return w, true
}

// Share is the whole margin at the first steps' peak, to pick the run
// that needs the most of several.
func (w *WholeRun) Share() float64 {
	return w.Fraction + w.GrowthBytes/float64(max(w.FirstPeakBytes, 1))
}

// Allowance sets and returns what a value recommended in room bytes (the
// step peak of the largest value that ran, less the headroom) leaves for
// the growth over the run's steps: GrowthBytes, at most
// GrowthAllowanceMax of the room.
func (w *WholeRun) Allowance(room float64) float64 {
	w.AllowanceBytes, w.Bounded = w.GrowthBytes, false
	if bound := GrowthAllowanceMax * max(room, 0); w.GrowthBytes > bound {
		w.AllowanceBytes, w.Bounded = bound, true
	}
	return w.AllowanceBytes
}

// AllowanceWords says what the recommendation leaves for the growth;
// BoundWords, where the bound cut it, how long that lasts.
func (w *WholeRun) AllowanceWords() string {
	if w.GrowthPerStep == nil {
		return ""
	}
	if w.Bounded {
		return fmt.Sprintf("%s for the %s, bounded", units.FormatBytes(int64(w.AllowanceBytes)), w.Growth)
	}
	return fmt.Sprintf("%s for the %s over the run's %d steps", units.FormatBytes(int64(w.AllowanceBytes)), w.Growth, w.Steps)
}

// BoundWords is "" unless the growth's allowance was bounded.
func (w *WholeRun) BoundWords() string {
	if !w.Bounded || w.GrowthPerStep == nil {
		return ""
	}
	return fmt.Sprintf("the %s's allowance is bounded at %.0f %% of the room: its %d steps need %s, and at the recommended value it lasts about %d steps; fix the growth (memrec analyze %s)",
		w.Growth, 100*GrowthAllowanceMax, w.Steps, units.FormatBytes(int64(w.GrowthBytes)), int64(w.AllowanceBytes / *w.GrowthPerStep), w.Run)
}
