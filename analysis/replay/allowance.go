package replay

import "math"

// AllocatorAllowance is the share of the projected per-step peak that
// the caching allocator may hold beyond it at the limit where nothing
// else measures it (see ByTag.chooseBasis): the most any job measured
// needed, rounded up. Near the limit the allocator frees its cache and
// retries, so what stays beyond the peak is free room inside segments
// that still hold live blocks. Bisecting the largest batch that runs on
// an H200 and comparing it with the projected peak gave what eighteen
// jobs needed beyond their peak there: from none (ResNet-18, ResNet-34,
// ConvNeXt-T, ViT-B/16: their large blocks come in equal sizes that reuse
// each other's space) through 2.5 % (T5-base), 5.9 % (DeepLabV3), 7.6 to
// 13.5 % (GPT-2-shaped and Llama-style models, their fp32 logits) and
// 17.5 % (BERT-base) to 21.5 to 32 % (VGG-11, on two hosts) and 36 %
// (VGG-16, whose two full-resolution activations strand 1.1 of its
// largest segments). The allocator's counters at small batches do not
// tell these apart (its cache hides the packing), so without the largest
// segment (probes before it, JAX, expandable segments) the value errs low
// for most jobs; a run that did reach the limit measures it
// (GPUReport.NearLimitOverhead); memrec fit finds the limit by trial.
const AllocatorAllowance = 0.40

// StrandedSegments is how many of the allocator's largest segments it may
// strand at the limit, where the probe measured the largest (the
// allowance then, at the pessimistic end, with the segments' rounding).
// The room stranded lies in segments that hold live blocks; on eighteen
// jobs on H200s it was from none (the ResNets, ViT-B/16, ConvNeXt-T: their
// large blocks come in equal sizes that reuse each other's space) through
// about half of one (the GPT-2-shaped models' fp32 logits), 0.86 to 1.3
// (VGG-11: on two hosts its limits were 2368 and 2176, as cuDNN chose its
// convolutions by the memory left), one (BERT-base), 1.1 (VGG-16, and
// DenseNet-121 at most), 1.26 (a Llama-style 1.1 B) to 1.56 (T5-base)
// and 1.75 (DeepLabV3 in its OOM's figures, whose atrous branches hold
// several segments of about the same size), measured at the limit. Two
// bound all of them. A share of the peak does not: VGG-16 needed 37 % of
// it, ResNet-18 none, with the same largest segment to peak (a sixth); so
// the jobs that strand much less than two segments (ResNet-18 and -34, the
// language models, the VGGs) come out 11.8 to 29.4 % below their limit,
// which memrec fit finds by trial.
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
// allocator takes the lowest address, which the replay cannot know; on
// 24 models on H200s it was exact in 51 of 72 runs at small batches and
// from 14.9 % below (VGG-16 at batch 16, 3.9 GiB) to 3.8 % above.
const Tolerance = 0.20

// CapacityKnown is how well the room for the allocator's segments
// is known: the CUDA total less what the process holds outside the
// allocator, which the traces' own events put within 24 MiB on an H200,
// and which another H200 of the same total held 4 MiB more of.
const CapacityKnown = 32 << 20
