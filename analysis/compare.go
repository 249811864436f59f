package analysis

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
)

// Comparison sets several analysed runs side by side.
type Comparison struct {
	Baseline string       `json:"baseline"`
	Align    Align        `json:"align"`
	Runs     []RunSummary `json:"runs"`
	Notes    []string     `json:"notes,omitempty"`
	By       *ByTag       `json:"by_tag,omitempty"`
	// Reports are the analyses compared, for the charts.
	Reports []*Report `json:"-"`
}

// RunSummary is one run's figures: its worst GPU's (highest peak, steepest
// leak), and each figure's ratio to the baseline's.
type RunSummary struct {
	Run                string            `json:"run"`
	Tags               map[string]string `json:"tags"`
	GPUs               int               `json:"gpus"`
	WorstGPU           int               `json:"worst_gpu"`
	PeakUsedBytes      *int64            `json:"peak_used_bytes"`
	PeakUsedByGPU      []int64           `json:"peak_used_by_gpu_bytes"`
	PeakAllocatedBytes *int64            `json:"peak_allocated_bytes"`
	PeakAllocatedByGPU []int64           `json:"peak_allocated_by_gpu_bytes,omitempty"`
	SteadyBytes        *int64            `json:"steady_state_bytes"`
	EpochDeltaBytes    *int64            `json:"epoch_delta_used_bytes"` // mean over epochs after the first
	LeakVerdict        Verdict           `json:"leak_verdict"`
	SlopeBytesPerStep  *float64          `json:"slope_bytes_per_step"`
	SlopeBytesPerHour  *float64          `json:"slope_bytes_per_hour"`
	FragmentationMean  *float64          `json:"fragmentation_mean"`
	StepTimeS          *float64          `json:"step_time_s"`
	PeakUsedRatio      *float64          `json:"peak_used_ratio"`
	PeakAllocatedRatio *float64          `json:"peak_allocated_ratio"`
	SteadyRatio        *float64          `json:"steady_state_ratio"`
	FragmentationRatio *float64          `json:"fragmentation_mean_ratio"`
	StepTimeRatio      *float64          `json:"step_time_ratio"`
}

// ByTag is peak device memory as a function of a numeric tag, fitted with a
// straight line, and the largest value that still fits in the GPU.
type ByTag struct {
	Tag             string     `json:"by"`
	Points          []TagPoint `json:"points"`
	Fit             Fit        `json:"fit"`
	GPUName         string     `json:"gpu_name"`
	TotalBytes      int64      `json:"total_bytes"`
	Headroom        float64    `json:"headroom"`
	MaxFittingValue *float64   `json:"max_fitting_value"`
	Statement       string     `json:"statement"`
}

// TagPoint is one run's tag value and peak.
type TagPoint struct {
	Run           string  `json:"run"`
	Value         float64 `json:"value"`
	PeakUsedBytes int64   `json:"peak_used_bytes"`
}

// Fit is a least-squares line: bytes = slope·value + intercept.
type Fit struct {
	SlopeBytesPerUnit float64 `json:"slope_bytes_per_unit"`
	InterceptBytes    float64 `json:"intercept_bytes"`
	R2                float64 `json:"r2"`
}

// Summarize reduces a report to the figures compared.
func Summarize(rep *Report) RunSummary {
	s := RunSummary{Run: rep.Run, Tags: rep.Tags, GPUs: len(rep.GPUs), LeakVerdict: VerdictInsufficient, StepTimeS: rep.StepTimeS}
	worst := -1
	for i, g := range rep.GPUs {
		if g.PeakUsedBytes != nil {
			s.PeakUsedByGPU = append(s.PeakUsedByGPU, *g.PeakUsedBytes)
			if s.PeakUsedBytes == nil || *g.PeakUsedBytes > *s.PeakUsedBytes {
				s.PeakUsedBytes, worst = i64(*g.PeakUsedBytes), i
			}
		}
		if g.PeakAllocatedBytes != nil {
			s.PeakAllocatedByGPU = append(s.PeakAllocatedByGPU, *g.PeakAllocatedBytes)
			if s.PeakAllocatedBytes == nil || *g.PeakAllocatedBytes > *s.PeakAllocatedBytes {
				s.PeakAllocatedBytes = i64(*g.PeakAllocatedBytes)
				if worst < 0 {
					worst = i
				}
			}
		}
		if g.Fragmentation != nil && (s.FragmentationMean == nil || g.Fragmentation.Mean > *s.FragmentationMean) {
			s.FragmentationMean = f64(g.Fragmentation.Mean)
		}
		// Leak: the most serious verdict, and the steepest slope.
		if rank(g.Leak.Verdict) > rank(s.LeakVerdict) {
			s.LeakVerdict = g.Leak.Verdict
		}
		if g.Leak.SlopeBytesPerHour != nil && (s.SlopeBytesPerHour == nil || *g.Leak.SlopeBytesPerHour > *s.SlopeBytesPerHour) {
			s.SlopeBytesPerHour = f64(*g.Leak.SlopeBytesPerHour)
			if g.Leak.SlopeBytesPerStep != nil {
				s.SlopeBytesPerStep = f64(*g.Leak.SlopeBytesPerStep)
			} else {
				s.SlopeBytesPerStep = nil
			}
		}
	}
	if worst < 0 && len(rep.GPUs) > 0 {
		worst = 0
	}
	if worst >= 0 {
		g := rep.GPUs[worst]
		s.WorstGPU = g.GPU
		if steady := g.Floors[min(g.Leak.SkippedWarmup, len(g.Floors)):]; len(steady) > 0 {
			v := make([]float64, len(steady))
			for i, f := range steady {
				v[i] = float64(f.Bytes)
			}
			slices.Sort(v)
			s.SteadyBytes = i64(int64(median(v)))
		}
		var sum int64
		n := 0
		for i, e := range g.Epochs {
			if i > 0 && e.DeltaUsedBytes != nil && !e.Open {
				sum += *e.DeltaUsedBytes
				n++
			}
		}
		if n > 0 {
			s.EpochDeltaBytes = i64(sum / int64(n))
		}
	}
	return s
}

func rank(v Verdict) int {
	switch v {
	case VerdictLeak:
		return 2
	case VerdictNoLeak:
		return 1
	}
	return 0
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
	ErrTooFewTagValues  = errors.New("need runs with at least two different values")
	ErrNothingToCompare = errors.New("nothing to compare")
)

// Compare sets the reports side by side; baseline names one of them ("":
// the first), align is "" (step), step, epoch or time. Runs that differ in
// GPU count or marks are compared on what they share, and the notes say
// what they do not.
func Compare(reps []*Report, baseline string, align Align) (*Comparison, error) {
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

// FitByTag fits peak device memory against a numeric tag and finds the
// largest value that fits in the GPU with the given headroom (0.05 = 5 %).
func FitByTag(c *Comparison, tag string, headroom float64) error {
	by := &ByTag{Tag: tag, Headroom: headroom}
	for _, r := range c.Reports {
		raw, ok := r.Tags[tag]
		if !ok {
			return fmt.Errorf("%w: run %q has no tag %q", ErrNoTag, r.Run, tag)
		}
		v, err := strconv.ParseFloat(raw, 64)
		if err != nil || !finite(v) {
			return fmt.Errorf("run %q has %s=%q: %w", r.Run, tag, raw, ErrTagNotNumber)
		}
		s := Summarize(r)
		if s.PeakUsedBytes == nil {
			c.Notes = append(c.Notes, fmt.Sprintf("run %q has no device samples: left out of the fit", r.Run))
			continue
		}
		by.Points = append(by.Points, TagPoint{Run: r.Run, Value: v, PeakUsedBytes: *s.PeakUsedBytes})
		for _, g := range r.GPUs {
			if g.TotalBytes > 0 && (by.TotalBytes == 0 || g.TotalBytes < by.TotalBytes) {
				by.TotalBytes, by.GPUName = g.TotalBytes, g.Name
			}
		}
	}
	sort.Slice(by.Points, func(i, j int) bool { return by.Points[i].Value < by.Points[j].Value })
	distinct := map[float64]bool{}
	for _, p := range by.Points {
		distinct[p.Value] = true
	}
	if len(distinct) < 2 {
		return fmt.Errorf("%w of %s", ErrTooFewTagValues, tag)
	}
	by.Fit = leastSquares(by.Points)
	integer := true
	for _, p := range by.Points {
		integer = integer && p.Value == math.Trunc(p.Value)
	}
	if by.TotalBytes > 0 && by.Fit.SlopeBytesPerUnit > 0 {
		budget := float64(by.TotalBytes) * (1 - headroom)
		v := (budget - by.Fit.InterceptBytes) / by.Fit.SlopeBytesPerUnit
		if integer {
			v = math.Floor(v + 1e-9)
		}
		by.MaxFittingValue = &v
		name := by.GPUName
		if name == "" {
			name = "this GPU"
		}
		by.Statement = fmt.Sprintf("%s up to %s fits on %s (%s) with %g %% headroom",
			tag, strconv.FormatFloat(v, 'f', -1, 64), name, FormatBytes(by.TotalBytes), 100*headroom)
		if v < by.Points[0].Value {
			by.Statement += "; not even the smallest value tried fits"
		}
	} else if by.Fit.SlopeBytesPerUnit <= 0 {
		by.Statement = fmt.Sprintf("peak memory does not grow with %s in these runs: no limit can be projected", tag)
	} else {
		by.Statement = "the GPU's total memory is unknown: no limit can be projected"
	}
	c.By = by
	return nil
}

func leastSquares(pts []TagPoint) Fit {
	n := float64(len(pts))
	var sx, sy, sxx, sxy float64
	for _, p := range pts {
		x, y := p.Value, float64(p.PeakUsedBytes)
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return Fit{}
	}
	slope := (n*sxy - sx*sy) / den
	icpt := (sy - slope*sx) / n
	var ssr, sst float64
	mean := sy / n
	for _, p := range pts {
		y := float64(p.PeakUsedBytes)
		ssr += (y - (slope*p.Value + icpt)) * (y - (slope*p.Value + icpt))
		sst += (y - mean) * (y - mean)
	}
	r2 := 1.0
	if sst > 0 {
		r2 = 1 - ssr/sst
	}
	return Fit{SlopeBytesPerUnit: slope, InterceptBytes: icpt, R2: r2}
}
