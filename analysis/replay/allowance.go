package replay

import "math"

// AllocatorAllowance is the share of the projected per-step peak that
// the caching allocator may hold beyond it at the limit where nothing
// else measures it (see ByTag.chooseBasis): the most any job needed in
// the largest-batch trials, rounded up (see bench/README.md, "Figures
// behind the code's constants"). Near the limit the allocator frees its
// cache and retries, so what stays beyond the peak is free room inside
// segments that still hold live blocks. How much depends on how the job's
// large blocks pack, which the allocator's counters at small batches do
// not show (its cache hides the packing), so without the largest segment
// (probes before it, JAX, expandable segments) the value errs low for
// most jobs; a run that did reach the limit measures it
// (GPUReport.NearLimitOverhead); memrec fit finds the limit by trial.
const AllocatorAllowance = 0.40

// StrandedSegments is how many of the allocator's largest segments it may
// strand at the limit, where the probe measured the largest (the
// allowance then, at the pessimistic end, with the segments' rounding).
// The room stranded lies in segments that hold live blocks: none where
// the large blocks come in equal sizes that reuse each other's space,
// more where a few large activations of different sizes each hold a
// segment. Two bound every job in the largest-batch trials (see
// bench/README.md, "Figures behind the code's constants"); a share of the
// peak does not, since jobs with the same largest segment to peak strand
// very different amounts. Jobs that strand much less than two come out
// below their limit, which memrec fit finds by trial.
const StrandedSegments = 2

// Fit is a least-squares line: bytes = slope·value + intercept.
type Fit struct {
	SlopeBytesPerUnit float64 `json:"slope_bytes_per_unit"`
	InterceptBytes    float64 `json:"intercept_bytes"`
	R2                float64 `json:"r2"`
}

// MaxTagValue bounds a tag fitted against: 2^53, the last whole number a
// float64 holds exactly; a batch size or a sequence length is far below.
const MaxTagValue = 1 << 53

// SegmentRounding is what PyTorch's caching allocator rounds a large
// segment up to a multiple of (kRoundLarge): the most a segment holds
// beyond its blocks' sizes.
const SegmentRounding = 2 << 20

// LeastSquares is the least-squares line through (xs, ys), with its R².
func LeastSquares(xs, ys []float64) Fit {
	n := float64(len(xs))
	// Sums about the means: the sums of raw squares cancel catastrophically
	// for values large against their spread (1e15 and 1e15 + 1).
	var mx, my float64
	for i, x := range xs {
		mx += x / n
		my += ys[i] / n
	}
	var sxx, sxy float64
	for i, x := range xs {
		sxx += (x - mx) * (x - mx)
		sxy += (x - mx) * (ys[i] - my)
	}
	if sxx == 0 {
		return Fit{}
	}
	slope := sxy / sxx
	icpt := my - slope*mx
	var ssr, sst float64
	for i, x := range xs {
		y := ys[i]
		ssr += (y - (slope*x + icpt)) * (y - (slope*x + icpt))
		sst += (y - my) * (y - my)
	}
	r2 := 1.0
	if sst > 0 {
		r2 = 1 - ssr/sst
	}
	return Fit{SlopeBytesPerUnit: slope, InterceptBytes: icpt, R2: r2}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// PerSample reports whether the scale is of a batch size: no request
// grows faster than the value.
func (s ReplayScale) PerSample() bool { return s.perSample }

// Tolerance is how far the replay of a traced run as recorded may be
// off the segments its allocator took: among free blocks of one size the
// allocator takes the lowest address, which the replay cannot know. It
// is above the largest miss of a replay as recorded (see bench/README.md,
// "Figures behind the code's constants").
const Tolerance = 0.20

// CapacityKnown is how well the room for the allocator's segments
// is known: the CUDA total less what the process holds outside the
// allocator, which the traces' own events bound, and which differs a
// little between GPUs of the same total (see bench/README.md, "Figures
// behind the code's constants").
const CapacityKnown = 32 << 20
