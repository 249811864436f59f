package compare

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
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
	LeakVerdict        growth.Verdict    `json:"leak_verdict"`           // LeakKind as earlier versions spelled it (Verdict.Legacy)
	LeakKind           growth.Verdict    `json:"leak_kind"`              // the most severe of the GPUs' (Verdict.Severity)
	SlopeBytesPerStep  *float64          `json:"slope_bytes_per_step"`
	SlopeBytesPerHour  *float64          `json:"slope_bytes_per_hour"`
	FragmentationMean  *float64          `json:"fragmentation_mean"`
	StepTimeS          *float64          `json:"step_time_s"`
	PeakUsedRatio      *float64          `json:"peak_used_ratio"`
	PeakAllocatedRatio *float64          `json:"peak_allocated_ratio"`
	SteadyRatio        *float64          `json:"steady_state_ratio"`
	FragmentationRatio *float64          `json:"fragmentation_mean_ratio"`
	StepTimeRatio      *float64          `json:"step_time_ratio"`
	// Across the GPUs of a run of two or more: its hosts (0 for one
	// machine), the GPU to look at first (Report.Worst) and the imbalance
	// of peaks (Report.Imbalance's ratio).
	Hosts       int      `json:"hosts,omitempty"`
	WorstLabel  string   `json:"worst_gpu_label,omitempty"`
	WorstReason string   `json:"worst_gpu_reason,omitempty"`
	Imbalance   *float64 `json:"imbalance,omitempty"`
	// Budget is the worst GPU's budget at its peak, for the runs side by
	// side; nil without allocator samples.
	Budget *budget.Budget `json:"budget,omitempty"`
}

// ByTag projects memory as a function of a numeric tag (batch size,
// sequence length) and finds the largest value that still fits in the GPU.
//
// With allocator samples in every run the projection is of what the job
// needs (Basis "step_peak_allocated"): the probe's true per-step peak
// allocated, fitted by least squares against the tag (NeedFit), plus what
// the allocator may hold beyond it at the limit (where the probe measured
// them, StrandedSegments largest segments at the value with the segments'
// rounding, SegmentLine and RoundingBytes; else AllowanceFraction of the
// peak),
// plus the memory PyTorch does not see (UnseenBytes: CUDA context, library
// workspaces), against the GPU's total less the driver's reservation and
// the headroom. Without them it falls back to peak device memory (Basis
// "device_used"), which includes the allocator's cache and so errs low.
type ByTag struct {
	Tag             string     `json:"by"`
	Points          []TagPoint `json:"points"`
	Fit             replay.Fit `json:"fit"` // peak device used against the tag
	GPUName         string     `json:"gpu_name"`
	TotalBytes      int64      `json:"total_bytes"`
	Headroom        float64    `json:"headroom"`
	MaxFittingValue *float64   `json:"max_fitting_value"`
	Statement       string     `json:"statement"`

	Basis             string      `json:"basis"` // step_peak_allocated or device_used
	NeedFit           *replay.Fit `json:"need_fit,omitempty"`
	AllowanceFraction float64     `json:"allowance_fraction"`
	// AllowanceBasis is "measured" (AllowanceRun reached the GPU's limit:
	// its allocator retried, and its reserved memory exceeded the step's
	// peak by AllowanceFraction), "largest_segment" (every run's probe
	// measured the allocator's largest segment: SegmentLine, and
	// AllowanceFraction is 0) or "default" (AllocatorAllowance).
	AllowanceBasis string `json:"allowance_basis,omitempty"`
	AllowanceRun   string `json:"allowance_run,omitempty"`
	// SegmentLine is, with AllowanceBasis "largest_segment", the largest
	// segment of the allocator against the value: the line through the
	// largest value's segment with the larger of its size per unit and its
	// growth from the value below. The need's pessimistic end adds
	// StrandedSegments such segments, its middle half as many.
	SegmentLine *replay.Fit `json:"largest_segment_line,omitempty"`
	// RoundingBytes is, with SegmentLine, what the allocator's rounding of
	// segments may hold beyond the peak: 2 MiB (its rounding of a large
	// segment) for each of the most segments a run held. The pessimistic
	// end adds it, the middle half of it.
	RoundingBytes float64 `json:"segment_rounding_bytes,omitempty"`
	// StrandedSegments is, with SegmentLine, how many largest segments the
	// pessimistic end adds (traceless.go), measured in StrandedRun's
	// inactive split; without it the package's StrandedSegments.
	StrandedSegments float64 `json:"stranded_segments,omitempty"`
	StrandedRun      string  `json:"stranded_run,omitempty"`
	// Failed are the runs that ended in an out-of-memory error: their peak
	// is not what they needed, so they are not points of the fit, and the
	// largest value that fits lies below the smallest of them.
	Failed                    []TagFailure `json:"failed,omitempty"`
	UnseenBytes               int64        `json:"unseen_bytes"`
	DriverReservedBytes       int64        `json:"driver_reserved_bytes"`
	MaxFittingValueNoHeadroom *float64     `json:"max_fitting_value_no_headroom"`
	BasisWords                string       `json:"basis_words"`

	// Need is the curve the values come from (NeedCurve: the runs'
	// curvature and its interval). MaxFittingValue and
	// MaxFittingValueNoHeadroom are at its pessimistic end;
	// MaxFittingValueMiddle is without headroom in its middle and
	// MaxFittingValueOptimistic at its optimistic end without the
	// allowance. Extrapolation is MaxFittingValueNoHeadroom over the largest
	// value measured; IntervalWords says all that in a sentence.
	Need                      *replay.NeedCurve `json:"need_curve,omitempty"`
	MaxFittingValueMiddle     *float64          `json:"max_fitting_value_middle,omitempty"`
	MaxFittingValueOptimistic *float64          `json:"max_fitting_value_optimistic,omitempty"`
	Extrapolation             float64           `json:"extrapolation,omitempty"`
	IntervalWords             string            `json:"interval_words,omitempty"`
	// Help is what would help the run at the largest value with a watched
	// budget (HelpRun), its batches that would fit from the need curve
	// instead of from that run alone: what does not grow with the batch
	// (workspaces) stays. Only for a batch size.
	Help    []budget.Remedy `json:"what_would_help,omitempty"`
	HelpRun string          `json:"help_run,omitempty"`

	// Replay is, with Basis "allocator_replay", how the allocator's replay
	// was made and checked (ReplayFigures).
	Replay *ReplayFigures `json:"allocator_replay,omitempty"`
	// LimitBySetting is, with the replay, the largest value under each
	// allocator setting (limitsettings.go).
	LimitBySetting []SettingLimit `json:"limit_by_setting,omitempty"`

	integer bool     // every value tried is an integer
	leftOut []string // why runs are not points, for the notes
	replay  *replay.ReplayScale
	atLimit *replay.ReplayResult // the replay at the pessimistic end without headroom
}

// TagFailure is a run that ran out of memory at a tag value.
type TagFailure struct {
	trace *storage.AllocTrace // the allocator trace of its GPU that ran out, to the failed request
	Run   string              `json:"run"`
	Value float64             `json:"value"`
}

// TagPoint is one run's tag value and peaks.
type TagPoint struct {
	trace         *storage.AllocTrace // the allocator trace of its GPU of the highest step peak
	Run           string              `json:"run"`
	Value         float64             `json:"value"`
	PeakUsedBytes int64               `json:"peak_used_bytes"`
	// StepPeakBytes is the probe's highest per-step peak allocated (of the
	// run's worst GPU); UnseenBytes the median memory PyTorch does not see.
	StepPeakBytes *int64 `json:"step_peak_allocated_bytes,omitempty"`
	UnseenBytes   *int64 `json:"unseen_bytes,omitempty"`
	// NearLimitOverhead is the run's GPUReport.NearLimitOverhead, if any.
	NearLimitOverhead *float64 `json:"near_limit_overhead,omitempty"`
	// LargestSegmentBytes is the GPUReport.LargestSegmentBytes of the GPU
	// with the step peak, if the probe measured it.
	LargestSegmentBytes *int64 `json:"largest_segment_bytes,omitempty"`
	// MostSegments is that GPU's GPUReport.MostSegments.
	MostSegments *int64 `json:"most_segments,omitempty"`
	// MostInactiveSplitBytes is that GPU's GPUReport.MostInactiveSplitBytes.
	MostInactiveSplitBytes *int64 `json:"most_inactive_split_bytes,omitempty"`
}

// Summarize reduces a report to the figures compared.
func Summarize(rep *analysis.Report) RunSummary {
	s := RunSummary{Run: rep.Run, Tags: rep.Tags, GPUs: len(rep.GPUs), LeakVerdict: growth.VerdictInsufficient, LeakKind: growth.VerdictInsufficient, StepTimeS: rep.StepTimeS, Hosts: len(rep.Hosts)}
	if w := rep.Worst; w != nil {
		s.WorstLabel, s.WorstReason = w.Label, w.Reason
	}
	if im := rep.Imbalance; im != nil {
		s.Imbalance = f64(im.Ratio)
	}
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
		if k := g.Leak.Judgement(); k.Severity() > s.LeakKind.Severity() {
			s.LeakKind, s.LeakVerdict = k, k.Legacy()
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
		s.Budget = g.Budget
		s.WorstGPU = g.GPU
		s.SteadyBytes = g.SteadyFloorBytes
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

// FitByTag projects memory against a numeric tag and finds the largest
// value that fits in the GPU with the given headroom (0.05 = 5 % of its
// total). See ByTag for the basis and NeedCurve for the interval.
func FitByTag(c *Comparison, tag string, headroom float64) error {
	by := &ByTag{Tag: tag, Headroom: headroom}
	allProbe, err := by.collect(c)
	if err != nil {
		return err
	}
	c.Notes = append(c.Notes, by.leftOut...)
	distinct := map[float64]bool{}
	for _, p := range by.Points {
		distinct[p.Value] = true
	}
	if len(distinct) < 2 {
		if len(by.leftOut) > 0 {
			return fmt.Errorf("%w of %s: %s", ErrTooFewTagValues, tag, strings.Join(by.leftOut, "; "))
		}
		return fmt.Errorf("%w of %s", ErrTooFewTagValues, tag)
	}
	xs := make([]float64, len(by.Points))
	used := make([]float64, len(by.Points))
	for i, p := range by.Points {
		xs[i], used[i] = p.Value, float64(p.PeakUsedBytes)
	}
	by.Fit = replay.LeastSquares(xs, used)
	by.integer = true
	for _, p := range by.Points {
		by.integer = by.integer && p.Value == math.Trunc(p.Value)
	}
	ys := by.chooseBasis(xs, used, allProbe)
	newCurve := replay.NewNeedCurve
	if replay.IsBatchTag(tag) {
		newCurve = replay.NewBatchNeedCurve
	}
	if curve, err := newCurve(xs, ys); err == nil && by.TotalBytes > 0 {
		by.Need = &curve
		by.chooseReplay()
		by.MaxFittingValue, by.MaxFittingValueNoHeadroom = by.LargestFitting(by.Available(headroom)), by.LargestFitting(by.Available(0))
		by.interval()
		by.limitsBySetting()
		if replay.IsBatchTag(tag) {
			by.advise(c)
		}
	}
	by.Statement = by.statement()
	c.By = by
	return nil
}

// Available is the memory the job may need at most with headroom h: the
// smallest GPU's total less the headroom, the driver's reservation and
// the memory PyTorch does not see.
func (by *ByTag) Available(h float64) float64 {
	return float64(by.TotalBytes)*(1-h) - float64(by.DriverReservedBytes) - float64(by.UnseenBytes)
}

// LargestFitting returns the largest value whose need, at the pessimistic
// end of the interval and with the allocator allowance, is at most avail
// bytes (Available gives the GPU's): rounded down when every value tried
// is an integer, and below the smallest value that ran out of memory. Nil
// when nothing can be projected (a need that does not grow, an unknown
// GPU). It is what the runs say fits, for callers asking "what would fit
// with this much memory".
func (by *ByTag) LargestFitting(avail float64) *float64 {
	if by.Need == nil {
		return nil
	}
	v, ok := by.fitting(avail, replay.Pessimistic)
	if !ok {
		return nil
	}
	return by.belowFailed(by.round(v))
}

// fitting is the largest value whose need at end e of the interval is at
// most avail bytes: the peak with StrandedSegments of the allocator's
// largest segments and their rounding where the runs measured them, else
// with the share AllowanceFraction of it; half of that in the middle,
// nothing at the optimistic end.
func (by *ByTag) fitting(avail float64, e replay.End) (float64, bool) {
	if r := by.replay; r != nil {
		var plus func(v float64) float64
		if e == replay.Pessimistic {
			plus = by.beyondGrowth
		}
		v, res, ok := r.FittingPlus(*by.Need, by.replayRoom(avail), plus, e, by.integer)
		if ok && e == replay.Pessimistic && avail == by.Available(0) {
			by.atLimit = &res // for the interval's words
		}
		return by.floorAtHigh(avail, v, ok)
	}
	k := map[replay.End]float64{replay.Optimistic: 0, replay.Middle: 0.5, replay.Pessimistic: 1}[e]
	if l := by.SegmentLine; l != nil {
		return by.Need.Plus(k*(by.StrandedSegments*l.InterceptBytes+by.RoundingBytes), k*by.StrandedSegments*l.SlopeBytesPerUnit).Solve(avail, e)
	}
	return by.Need.Solve(avail/(1+k*by.AllowanceFraction), e)
}

// round rounds v down to an integer when the values tried are integers.
func (by *ByTag) round(v float64) *float64 {
	if by.integer {
		v = math.Floor(v + 1e-9)
	}
	if !finite(v) {
		return nil
	}
	return &v
}

// interval sets the optimistic and middle values without headroom, how
// far the projection reaches beyond the values measured, and says so.
func (by *ByTag) interval() {
	c, p := by.Need, by.MaxFittingValueNoHeadroom
	if p == nil {
		return
	}
	if v, ok := by.fitting(by.Available(0), replay.Middle); ok {
		by.MaxFittingValueMiddle = by.belowFailed(by.round(v))
	}
	if v, ok := by.fitting(by.Available(0), replay.Optimistic); ok {
		by.MaxFittingValueOptimistic = by.belowFailed(by.round(v))
	}
	from := c.Largest()
	by.Extrapolation = *p / from
	num := func(v *float64) string {
		if v == nil {
			return "?"
		}
		return strconv.FormatFloat(*v, 'f', -1, 64)
	}
	reach := fmt.Sprintf("projected from %s to %s, %.1f×", num(&from), num(p), by.Extrapolation)
	if by.Extrapolation <= 1 {
		reach = fmt.Sprintf("within the values measured (up to %s)", num(&from))
	}
	allowance := "no allowance"
	if by.replay != nil {
		if r := by.atLimit; r != nil {
			by.Replay.StrandedBytes, by.Replay.Retries = r.StrandedAtPeak, r.Retries
			allowance = fmt.Sprintf("the allocator replayed: at %s it strands %s at the peak and frees its cache %s", num(p), units.FormatBytes(r.StrandedAtPeak), timesWords(r.Retries))
			if ch := by.replay.Chosen; ch > 0 {
				allowance += fmt.Sprintf("; + %s for a request sized for the shape (%s at %s, %s)",
					units.FormatBytes(int64(float64(ch)*by.replay.Grown(*p))), units.FormatBytes(ch), num(&by.replay.HighValue), by.replay.GrownWords())
			}
		}
	} else if l := by.SegmentLine; l != nil {
		segs := by.StrandedSegments*(l.InterceptBytes+l.SlopeBytesPerUnit**p) + by.RoundingBytes
		_, _, peak := c.At(*p)
		allowance = fmt.Sprintf("+ %s at %s, %.2f largest segments with their rounding (%.0f %% of the peak); in the middle half of it",
			units.FormatBytes(int64(segs)), num(p), by.StrandedSegments, 100*segs/peak)
	} else if by.AllowanceFraction > 0 {
		allowance = fmt.Sprintf("+ %.1f %%; in the middle half of it", 100*by.AllowanceFraction)
	}
	curvature := "the steepest reading of the runs"
	switch {
	case c.Quadratic != nil:
		curvature = "the marginal cost rose, carried on"
	case c.Power > 1:
		curvature = fmt.Sprintf("the need grew with the value to the power %.2f, carried on", c.Power)
	case len(c.Values) == 2:
		curvature = "two values show no curvature"
	}
	optimistic := "the flattest reading, no allowance"
	if by.replay != nil {
		optimistic += replayNotABound
	}
	by.IntervalWords = fmt.Sprintf("without headroom %s up to %s (%s, %s), %s in the middle, up to %s at the optimistic end (%s); %s",
		by.Tag, num(p), curvature, allowance, num(by.MaxFittingValueMiddle), num(by.MaxFittingValueOptimistic), optimistic, reach)
}

// replayNotABound says why the replay's optimistic end is not a bound:
// the replay sizes a library's workspace as the runs did, and near the
// limit cuDNN takes a smaller one where memory is short (how far, on real
// models: bench/README.md, TestReplayLargestBatchOnTheH200).
const replayNotABound = "; not a bound: where a library such as cuDNN takes a smaller workspace when memory is short (convolutions), the limit can lie a few per cent above it"

// collect sets by's points, one per run with device samples sorted by the
// tag's value, and the smallest GPU's total and the driver's reserve. It
// reports whether every point has a per-step allocator peak.
func (by *ByTag) collect(c *Comparison) (allProbe bool, err error) {
	allProbe = true
	for _, r := range c.Reports {
		raw, ok := r.Tags[by.Tag]
		if !ok {
			return false, fmt.Errorf("%w: run %q has no tag %q", ErrNoTag, r.Run, by.Tag)
		}
		v, err := strconv.ParseFloat(raw, 64)
		if err != nil || !finite(v) {
			return false, fmt.Errorf("run %q has %s=%q: %w", r.Run, by.Tag, raw, ErrTagNotNumber)
		}
		if math.Abs(v) > replay.MaxTagValue {
			return false, fmt.Errorf("run %q has %s=%q: %w", r.Run, by.Tag, raw, ErrTagOutOfRange)
		}
		if analysis.FatalOOM(r) {
			f := TagFailure{Run: r.Run, Value: v}
			for _, g := range r.GPUs {
				if g.AllocTrace != nil && replay.LastFailed(g.AllocTrace.Ops) >= 0 {
					f.trace = g.AllocTrace
				}
			}
			by.Failed = append(by.Failed, f)
			continue
		}
		code, crashed := analysis.FailedBeforeAStep(r)
		if crashed {
			by.leftOut = append(by.leftOut, fmt.Sprintf("run %q exited %d before its first step, without running out of memory: its peak is not a step's; left out of the fit", r.Run, code))
			continue
		}
		if analysis.RanOutOfMemory(r) { // not a fatal OOM (above): it exited before its first step with a GPU full
			full := analysis.FullGPU(r)
			by.Failed = append(by.Failed, TagFailure{Run: r.Run, Value: v})
			by.leftOut = append(by.leftOut, fmt.Sprintf("run %q exited %d before its first step with no OOM mark but its GPU full (%s in use): counted as out of memory (an allocation outside PyTorch's allocator, such as cuBLAS's, failed)", r.Run, code, full))
			continue
		}
		s := Summarize(r)
		if s.PeakUsedBytes == nil {
			by.leftOut = append(by.leftOut, fmt.Sprintf("run %q has no device samples: left out of the fit", r.Run))
			continue
		}
		p := TagPoint{Run: r.Run, Value: v, PeakUsedBytes: *s.PeakUsedBytes}
		for _, g := range r.GPUs {
			if g.TotalBytes > 0 && (by.TotalBytes == 0 || g.TotalBytes < by.TotalBytes) {
				by.TotalBytes, by.GPUName = g.TotalBytes, g.Name
			}
			if g.DriverReservedBytes != nil {
				by.DriverReservedBytes = max(by.DriverReservedBytes, *g.DriverReservedBytes)
			}
			if o := g.NearLimitOverhead; o != nil && (p.NearLimitOverhead == nil || *o > *p.NearLimitOverhead) {
				p.NearLimitOverhead = f64(*o)
			}
			if g.PeakStepBytes != nil && *g.PeakStepBytes > 0 && (p.StepPeakBytes == nil || *g.PeakStepBytes > *p.StepPeakBytes) {
				p.StepPeakBytes = i64(*g.PeakStepBytes)
				if g.Unseen != nil {
					p.UnseenBytes = i64(g.Unseen.MedianBytes)
				}
				p.LargestSegmentBytes, p.MostSegments, p.MostInactiveSplitBytes = g.LargestSegmentBytes, g.MostSegments, g.MostInactiveSplitBytes
				p.trace = g.AllocTrace
			}
		}
		allProbe = allProbe && p.StepPeakBytes != nil
		by.Points = append(by.Points, p)
	}
	sort.Slice(by.Points, func(i, j int) bool { return by.Points[i].Value < by.Points[j].Value })
	sort.Slice(by.Failed, func(i, j int) bool { return by.Failed[i].Value < by.Failed[j].Value })
	return allProbe, nil
}

// chooseBasis sets the basis and the allowance, and returns each point's
// need: the per-step allocator peak when every run has one, else peak
// device memory (used).
func (by *ByTag) chooseBasis(xs, used []float64, allProbe bool) []float64 {
	by.Basis = "device_used"
	by.BasisWords = "peak device memory (no allocator samples: it includes the allocator's cache, so the value errs low)"
	if !allProbe {
		return used
	}
	peaks := make([]float64, len(by.Points))
	for i, p := range by.Points {
		peaks[i] = float64(*p.StepPeakBytes)
		if p.UnseenBytes != nil {
			by.UnseenBytes = max(by.UnseenBytes, *p.UnseenBytes)
		}
	}
	f := replay.LeastSquares(xs, peaks)
	by.NeedFit, by.Basis = &f, "step_peak_allocated"
	allowance := replay.AllocatorAllowance
	by.AllowanceBasis = "default"
	for _, p := range by.Points {
		if o := p.NearLimitOverhead; o != nil && (by.AllowanceRun == "" || *o > allowance) {
			allowance, by.AllowanceBasis, by.AllowanceRun = *o, "measured", p.Run
		}
	}
	if by.AllowanceBasis == "default" {
		if l, ok := segmentLine(by.Points); ok {
			allowance, by.AllowanceBasis, by.SegmentLine = 0, "largest_segment", &l
			by.StrandedSegments, by.StrandedRun = strandedSegments(by.Points)
			for _, p := range by.Points {
				if p.MostSegments != nil {
					by.RoundingBytes = max(by.RoundingBytes, float64(*p.MostSegments)*replay.SegmentRounding)
				}
			}
		}
	}
	by.AllowanceFraction = allowance
	how := "a bound on what the allocator keeps beyond the step's peak at its limit, more than most jobs keep, so the value usually errs low; no run here reached its limit, and the probe did not measure the allocator's largest segment, which bounds it closer"
	if by.AllowanceBasis == "measured" {
		how = fmt.Sprintf("measured in run %q, which reached the GPU's limit: its allocator freed its cache and retried, and kept this much beyond the step's peak", by.AllowanceRun)
	}
	by.BasisWords = fmt.Sprintf("the per-step peak allocated + %.1f %% for the allocator's rounding and splitting (%s) + %s PyTorch does not see",
		100*allowance, how, units.FormatBytes(by.UnseenBytes))
	if by.SegmentLine != nil {
		by.BasisWords = fmt.Sprintf("the per-step peak allocated + %.2f of the allocator's largest segments at the value "+
			"with %s for the rounding of its segments (2 MiB each) "+
			"(at its limit the allocator frees its cache and retries; what it cannot free is room in segments that hold live blocks: %s) "+
			"+ %s PyTorch does not see",
			by.StrandedSegments, units.FormatBytes(int64(by.RoundingBytes)), strandedWords(by.StrandedRun, by.StrandedSegments), units.FormatBytes(by.UnseenBytes))
	}
	if by.DriverReservedBytes > 0 {
		by.BasisWords += fmt.Sprintf(", against the total less %s the driver reserves", units.FormatBytes(by.DriverReservedBytes))
	}
	return peaks
}

// segmentLine is the allocator's largest segment against the value where
// every point measured it: through the largest value's (the largest of
// its runs'), with the larger of its size per unit (a request of one
// tensor grows with the batch) and its growth from the value below (one
// that grows faster, as a sequence's attention does). False when a point
// lacks it or the largest value is not above 0.
func segmentLine(points []TagPoint) (replay.Fit, bool) {
	var xs, ys []float64
	for _, p := range points { // ascending by value
		if p.LargestSegmentBytes == nil || *p.LargestSegmentBytes <= 0 {
			return replay.Fit{}, false
		}
		v, seg := p.Value, float64(*p.LargestSegmentBytes)
		if n := len(xs); n > 0 && xs[n-1] == v {
			ys[n-1] = max(ys[n-1], seg)
			continue
		}
		xs, ys = append(xs, v), append(ys, seg)
	}
	n := len(xs) - 1
	if n < 0 || xs[n] <= 0 {
		return replay.Fit{}, false
	}
	slope := ys[n] / xs[n]
	if n > 0 {
		slope = max(slope, (ys[n]-ys[n-1])/(xs[n]-xs[n-1]))
	}
	return replay.Fit{SlopeBytesPerUnit: slope, InterceptBytes: ys[n] - slope*xs[n]}, true
}

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
	budget.Advise(&b, budget.AdviceInput{Batch: value, Total: by.TotalBytes, DriverReserved: by.DriverReservedBytes,
		SampleAllocated: b.PeakAllocatedBytes - sampled,
		Curve: &budget.SampleCost{Bytes: by.Need.MarginalBytesPerUnit, Allowance: by.AllowanceFraction,
			Segment: segPerUnit, Rounding: by.RoundingBytes, Runs: len(by.Points), Fits: by.replayFits()}})
	by.Help, by.HelpRun = b.Help, bestRun
}

// belowFailed caps v below the smallest value that ran out of memory:
// at the next integer down when the values are integers, else at it.
func (by *ByTag) belowFailed(v *float64) *float64 {
	if v == nil || len(by.Failed) == 0 || *v < by.Failed[0].Value {
		return v
	}
	c := by.Failed[0].Value
	if by.integer {
		c = math.Ceil(c) - 1
	}
	return &c
}

// statement says in one sentence what the fit found.
func (by *ByTag) statement() string {
	switch {
	case by.MaxFittingValue != nil:
		v := *by.MaxFittingValue
		name := by.GPUName
		if name == "" {
			name = "this GPU"
		}
		st := fmt.Sprintf("%s up to %s fits on %s (%s) with %g %% headroom",
			by.Tag, strconv.FormatFloat(v, 'f', -1, 64), name, units.FormatBytes(by.TotalBytes), 100*by.Headroom)
		if v < by.Points[0].Value {
			st += "; not even the smallest value tried fits"
		}
		if len(by.Failed) > 0 {
			f := by.Failed[0]
			st += fmt.Sprintf("; run %q ran out of memory at %s=%s", f.Run, by.Tag, strconv.FormatFloat(f.Value, 'f', -1, 64))
		}
		return st
	case by.TotalBytes > 0:
		return fmt.Sprintf("peak memory does not grow with %s in these runs: no limit can be projected", by.Tag)
	default:
		return "the GPU's total memory is unknown: no limit can be projected"
	}
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func f64(v float64) *float64 { return &v }

func i64(v int64) *int64 { return &v }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
