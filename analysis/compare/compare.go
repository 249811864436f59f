package compare

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/replay"
)

// Comparison sets several analysed runs side by side.
type Comparison struct {
	Baseline string       `json:"baseline"`
	Align    Align        `json:"align"`
	Runs     []RunSummary `json:"runs"`
	Notes    []string     `json:"notes,omitempty"`
	By       *ByTag       `json:"by_tag,omitempty"`
	// Reports are the analyses compared, for the charts.
	Reports []*analysis.Report `json:"-"`
}

func ratio[T int64 | float64](a, b *T) *float64 {
	if a == nil || b == nil || *b == 0 {
		return nil
	}
	return f64(float64(*a) / float64(*b))
}

// Align says how a comparison lines runs up in its overlay charts.
type Align string

// The alignments.
const (
	AlignStep  Align = "step"
	AlignEpoch Align = "epoch"
	AlignTime  Align = "time"
)

// String is the alignment's name.
func (a Align) String() string { return string(a) }

// Errors of Compare and FitByTag; they are wrapped with the value at fault.
var (
	ErrBadAlign         = errors.New("want step, epoch or time")
	ErrUnknownBaseline  = errors.New("is not among the compared runs")
	ErrNoTag            = errors.New("missing tag")
	ErrTagNotNumber     = errors.New("not a number")
	ErrTagOutOfRange    = errors.New("beyond ±2^53, where float64 no longer tells whole numbers apart: no memory fit means anything there")
	ErrTooFewTagValues  = replay.ErrTooFewTagValues
	ErrNothingToCompare = errors.New("nothing to compare")
)

// Compare sets the reports side by side; baseline names one of them ("":
// the first), align is "" (step), step, epoch or time. Runs that differ in
// GPU count or marks are compared on what they share, and the notes say
// what they do not.
func Compare(reps []*analysis.Report, baseline string, align Align) (*Comparison, error) {
	if len(reps) == 0 {
		return nil, ErrNothingToCompare
	}
	switch align {
	case "":
		align = AlignStep
	case AlignStep, AlignEpoch, AlignTime:
	default:
		return nil, fmt.Errorf("%q: %w", string(align), ErrBadAlign)
	}
	c := &Comparison{Align: align, Reports: reps}
	base := 0
	if baseline != "" {
		base = -1
		for i, r := range reps {
			if r.Run == baseline {
				base = i
			}
		}
		if base < 0 {
			return nil, fmt.Errorf("%q %w", baseline, ErrUnknownBaseline)
		}
	}
	c.Baseline = reps[base].Run
	for _, r := range reps {
		c.Runs = append(c.Runs, Summarize(r))
	}
	b := c.Runs[base]
	for i := range c.Runs {
		s := &c.Runs[i]
		s.PeakUsedRatio = ratio(s.PeakUsedBytes, b.PeakUsedBytes)
		s.PeakAllocatedRatio = ratio(s.PeakAllocatedBytes, b.PeakAllocatedBytes)
		s.SteadyRatio = ratio(s.SteadyBytes, b.SteadyBytes)
		s.FragmentationRatio = ratio(s.FragmentationMean, b.FragmentationMean)
		s.StepTimeRatio = ratio(s.StepTimeS, b.StepTimeS)
	}
	gpuCounts := map[int]bool{}
	var noSteps, noEpochs, noProbe []string
	for _, r := range reps {
		gpuCounts[len(r.GPUs)] = true
		if r.Marks.Steps == 0 {
			noSteps = append(noSteps, r.Run)
		}
		if r.Marks.Epochs == 0 {
			noEpochs = append(noEpochs, r.Run)
		}
		for _, g := range r.GPUs {
			if g.PeakAllocatedBytes == nil {
				noProbe = append(noProbe, r.Run)
				break
			}
		}
	}
	if len(gpuCounts) > 1 {
		c.Notes = append(c.Notes, "the runs have different numbers of GPUs: each run's figures are its worst GPU's")
	}
	if len(noSteps) > 0 && align == AlignStep {
		c.Notes = append(c.Notes, fmt.Sprintf("no step marks in %v: those runs are drawn against time, not steps", noSteps))
	}
	if len(noEpochs) > 0 && align == AlignEpoch {
		c.Notes = append(c.Notes, fmt.Sprintf("no epoch marks in %v: those runs are drawn against time, not epochs", noEpochs))
	}
	if len(noProbe) > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("no allocator samples in %v: their allocated, steady-state and fragmentation figures are device-based or missing", noProbe))
	}
	return c, nil
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func f64(v float64) *float64 { return &v }

func i64(v int64) *int64 { return &v }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
