package analysis

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/memrec/memrec/storage"
)

// This file holds the leak rule: the verdict type, the thresholds it is
// judged by, the judgement of a GPU's floors and its words. The statistics
// it uses (Theil–Sen, Mann–Kendall, the removal of one-off jumps) are in
// trend.go; docs/analysis.md defines each threshold.

// The leak rule's thresholds.
const (
	// leakP is the Mann–Kendall p-value under which a trend is told apart
	// from noise.
	leakP = 0.01
	// minLeakGrowth is the least growth over the fitted span that counts
	// as a leak: below it a trend is too small to matter on any GPU.
	minLeakGrowth = 1 << 20
	// minSteadyPoints is the fewest floors after the warm-up that can be
	// judged.
	minSteadyPoints = 8
	// warmupShare is the share of the floors taken as warm-up when the run
	// has fewer than two epochs and the caller found none.
	warmupShare = 5
)

// Verdict is the leak judgement of one GPU.
type Verdict string

// Leak verdicts.
const (
	VerdictLeak         Verdict = "leak"
	VerdictNoLeak       Verdict = "no_leak"
	VerdictInsufficient Verdict = "insufficient_data"
)

// String is the verdict as the JSON report spells it.
func (v Verdict) String() string { return string(v) }

// Severity orders the verdicts: a run's verdict over several GPUs is the
// most severe of theirs.
func (v Verdict) Severity() int {
	switch v {
	case VerdictLeak:
		return 2
	case VerdictNoLeak:
		return 1
	}
	return 0
}

// IsLeak reports whether the verdict is a leak.
func (v Verdict) IsLeak() bool { return v == VerdictLeak }

// Leak is the growth of the steady-state memory.
type Leak struct {
	Verdict            Verdict  `json:"verdict"`
	Basis              string   `json:"basis"` // allocated, device_used
	Per                string   `json:"per"`   // step, time
	SlopeBytesPerStep  *float64 `json:"slope_bytes_per_step"`
	SlopeBytesPerHour  *float64 `json:"slope_bytes_per_hour"`
	CILowBytesPerHour  *float64 `json:"ci95_low_bytes_per_hour"`
	CIHighBytesPerHour *float64 `json:"ci95_high_bytes_per_hour"`
	CILowBytesPerStep  *float64 `json:"ci95_low_bytes_per_step"`
	CIHighBytesPerStep *float64 `json:"ci95_high_bytes_per_step"`
	PValue             *float64 `json:"p_value"`
	TimeToFullS        *float64 `json:"time_to_full_s"`
	Points             int      `json:"points"`
	SkippedWarmup      int      `json:"skipped_warmup_points"`
	JumpsRemoved       int      `json:"jumps_removed"`
	Reason             string   `json:"reason"`
	// HeldBy names the site that explains most of the growth, when the
	// run has site snapshots.
	HeldBy *HeldBy `json:"held_by,omitempty"`
	// FitIntercept is the fitted line's value at x = 0 (steps or seconds
	// since the run's start), for drawing it.
	FitIntercept float64 `json:"-"`
}

// IsLeak reports whether the verdict is a leak.
func (l Leak) IsLeak() bool { return l.Verdict.IsLeak() }

// judgeLeak fits the floors after the warm-up and gives the verdict.
//
// skip is the number of warm-up floors when the caller found it; with -1
// the warm-up is the first epoch when there are later ones, else the first
// fifth of the floors.
func judgeLeak(floors []FloorPoint, skip int, basis, per string, mi *markIndex, run storage.Run, g storage.GPU, lastUsed int64, hasDevice bool) Leak {
	l := Leak{Basis: basis, Per: per, Verdict: VerdictInsufficient}
	switch {
	case skip >= 0:
	case len(mi.epochs) >= 2:
		end0 := mi.epochs[0].end
		skip = sort.Search(len(floors), func(i int) bool { return floors[i].TNS > end0 })
	default:
		skip = len(floors) / warmupShare
	}
	steady := floors[min(skip, len(floors)):]
	l.SkippedWarmup = min(skip, len(floors))
	l.Points = len(steady)
	if len(steady) < minSteadyPoints {
		l.Reason = fmt.Sprintf("fewer than %d steady-state points after the warm-up", minSteadyPoints)
		return l
	}
	x := make([]float64, len(steady))
	xt := make([]float64, len(steady))
	y := make([]float64, len(steady))
	for i, f := range steady {
		x[i], y[i] = f.X, float64(f.Bytes)
		xt[i] = float64(f.TNS-run.StartNS) / 1e9
	}
	byTime := fitTrend(xt, y)
	l.JumpsRemoved = byTime.JumpsTaken
	l.PValue = f64(byTime.P)
	l.SlopeBytesPerHour = f64(byTime.Slope * 3600)
	l.CILowBytesPerHour, l.CIHighBytesPerHour = f64(byTime.Lo*3600), f64(byTime.Hi*3600)
	l.FitIntercept = byTime.Intercept
	slope := byTime
	span := xt[len(xt)-1] - xt[0]
	if per == "step" {
		byStep := fitTrend(x, y)
		l.SlopeBytesPerStep = f64(byStep.Slope)
		l.CILowBytesPerStep, l.CIHighBytesPerStep = f64(byStep.Lo), f64(byStep.Hi)
		l.FitIntercept = byStep.Intercept
		l.PValue = f64(byStep.P)
		l.JumpsRemoved = byStep.JumpsTaken
		slope = byStep
		span = x[len(x)-1] - x[0]
	}
	growth := slope.Slope * span
	switch {
	case slope.P < leakP && slope.Slope > 0 && slope.Lo > 0 && growth >= minLeakGrowth:
		l.Verdict = VerdictLeak
		l.Reason = fmt.Sprintf("sustained growth of the steady-state floor (Mann–Kendall p < %g, Theil–Sen slope > 0 with its 95 %% interval above 0)", leakP)
		rate := byTime.Slope // bytes per second
		if rate > 0 && g.TotalBytes > 0 {
			// The last device sample is 0 once the job has exited.
			now := max(lastUsed, steady[len(steady)-1].Bytes)
			l.TimeToFullS = fptr(float64(g.TotalBytes-now) / rate)
		}
	default:
		l.Verdict = VerdictNoLeak
		switch {
		case growth < minLeakGrowth && slope.Slope > 0:
			l.Reason = "the steady-state floor grows by less than 1 MiB over the run"
		case slope.P >= leakP:
			l.Reason = "no significant trend in the steady-state floor"
		case slope.Slope > 0:
			l.Reason = "the steady-state floor's rise is not told apart from 0 (its slope's 95 % interval reaches 0)"
		default:
			l.Reason = "the steady-state floor does not grow"
		}
		if l.JumpsRemoved > 0 {
			l.Reason += "; one-off jumps were set aside"
		}
		// The verdict's own fit decides for both slopes; the slope per
		// hour is fitted on its own as well (step times can change), so
		// it must also pass for itself.
		if !slopeBesideNoLeak(slope) {
			l.SlopeBytesPerStep, l.CILowBytesPerStep, l.CIHighBytesPerStep = nil, nil, nil
		}
		if !slopeBesideNoLeak(slope) || !slopeBesideNoLeak(byTime) {
			l.SlopeBytesPerHour, l.CILowBytesPerHour, l.CIHighBytesPerHour = nil, nil, nil
		}
	}
	return l
}

// slopeBesideNoLeak says whether a no_leak verdict may show the slope: a
// slope that is told apart from 0 next to "no leak" reads as a leak. It
// stays when it is 0, or when its 95 % interval holds 0 and the
// Mann–Kendall test finds no trend. Both are needed: memory known to 1 MiB
// (nvidia-smi's logs) is full of ties, and the interval can then end
// exactly at 0 beside a trend the test tells apart (a real log: 6.62 GiB
// per hour, interval [0, 8.88 GiB], p = 1e-6).
func slopeBesideNoLeak(t trend) bool {
	return t.Slope == 0 || t.Lo <= 0 && t.Hi >= 0 && t.P >= leakP
}

// Sentence says the leak verdict of GPU gpu in plain words.
func (l Leak) Sentence(gpu int) string { return l.SentenceFor(fmt.Sprintf("GPU %d", gpu)) }

// SentenceFor says the leak verdict in plain words, naming the GPU as gpu
// (GPUReport.Label).
func (l Leak) SentenceFor(gpu string) string {
	switch l.Verdict {
	case VerdictLeak:
		var parts []string
		if l.SlopeBytesPerStep != nil {
			parts = append(parts, fmt.Sprintf("%s grows %s per step", gpu, FormatBytes(int64(math.Round(*l.SlopeBytesPerStep)))))
			if l.SlopeBytesPerHour != nil {
				parts[0] += fmt.Sprintf(" (%s per hour)", FormatBytes(int64(*l.SlopeBytesPerHour)))
			}
		} else if l.SlopeBytesPerHour != nil {
			parts = append(parts, fmt.Sprintf("%s grows %s per hour", gpu, FormatBytes(int64(*l.SlopeBytesPerHour))))
		}
		if l.HeldBy != nil {
			parts = append(parts, l.HeldBy.words())
		}
		if l.TimeToFullS != nil {
			parts = append(parts, "full in about "+FormatDuration(*l.TimeToFullS))
		}
		return strings.Join(parts, "; ") + " (" + basisWords(l.Basis) + ")"
	case VerdictNoLeak:
		return fmt.Sprintf("%s: no leak: %s", gpu, l.Reason)
	}
	return fmt.Sprintf("%s: not enough data to judge a leak: %s", gpu, l.Reason)
}

func basisWords(b string) string {
	if b == "allocated" {
		return "PyTorch allocated memory at step ends"
	}
	return "device memory floors"
}
