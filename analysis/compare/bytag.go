package compare

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
)

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
	// AllowanceFraction is 0), "inactive_split" (every run's probe measured
	// the inactive split, none the largest segment: SplitLine, and
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
	// SplitLine is, with AllowanceBasis "inactive_split" (no run measured
	// the largest segment), the room the allocator may strand at the
	// limit against the value (traceless.go): the pessimistic end adds it
	// with RoundingBytes, the middle half of it. SplitRuns name the runs
	// of its two terms, the most stranded a unit and the least.
	SplitLine *replay.Fit `json:"inactive_split_line,omitempty"`
	SplitRuns [2]string   `json:"inactive_split_runs,omitzero"`
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

	integer bool      // every value tried is an integer
	leftOut []string  // why runs are not points, for the notes
	split   *stranded // the split line's reading, with SplitLine
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
	// MostLiveSegmentBytes and LastInactiveSplitBytes are that GPU's.
	MostLiveSegmentBytes   *int64 `json:"most_live_segment_bytes,omitempty"`
	LastInactiveSplitBytes *int64 `json:"last_inactive_split_bytes,omitempty"`
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
	c.Notes = append(c.Notes, otherDifferences(c, tag)...)
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
	if st := by.split; st != nil && !st.fell {
		c.Notes = append(c.Notes, splitNote(tag, by.Points))
	}
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
				p.MostLiveSegmentBytes, p.LastInactiveSplitBytes = g.MostLiveSegmentBytes, g.LastInactiveSplitBytes
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
