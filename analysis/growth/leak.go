package growth

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
)

// This file holds the leak rule's verdict: the verdict type, the
// thresholds the growth rule judges by, the judgement of a GPU from the
// growth of its allocated, reserved and device memory, and its words. The
// growth rule itself (warm-up, jumps, Theil–Sen, Mann–Kendall) is in
// trend.go; docs/analysis.md defines each threshold and verdict, and
// TestLeakThresholdsStatedOnce checks its table and the Python reference
// against the constants below.

// The leak rule's thresholds.
const (
	// leakP is the Mann–Kendall p-value under which a trend is told apart
	// from noise.
	leakP = 0.01
	// minLeakGrowth is the least growth over the fitted span that counts
	// as a leak: below it a trend is too small to matter on any GPU.
	minLeakGrowth = 1 << 20
	// minSiteGrowth is the least growth of an allocation site's live
	// bytes that counts: a site holds a part of a GPU's memory, so a
	// smaller one than minLeakGrowth; it alone decides (with a positive
	// Theil–Sen slope) where a site has fewer than MinSteadyPoints
	// snapshots, too few for the test (epoch-end summaries).
	minSiteGrowth = 64 << 10
	// MinSteadyPoints is the fewest floors after the warm-up that can be
	// judged.
	MinSteadyPoints = 8
	// A series without epochs has settled after its last early point more
	// than a band below the line of its second half (settle, trend.go):
	// the band is the largest of settleMADs times that half's median
	// distance from its line, settleShare of its median level, and
	// SettleMin.
	settleMADs  = 4
	settleShare = 0.01
	SettleMin   = 4 << 20
	// A run without two epochs (whose first is its warm-up) whose memory
	// grows is too short to tell a start-up ramp (CUDA's context, the
	// model's load, compilation, autotuning, the allocator's first
	// iterations, a first epoch's cache) from a leak when the growing
	// series has fewer than startupSteps steps or, without steps, spans
	// less than startupSpanS seconds: it reads startup, with no slope.
	startupSteps = 50
	startupSpanS = 5
)

// FloorPoint is one point of the leak series: the floor of a step or a
// time slice.
type FloorPoint struct {
	X     float64 // step index or seconds since start
	TNS   int64
	Bytes int64
}

// HeldBy names the site that explains most of a leak.
type HeldBy struct {
	Site         string  `json:"site"`
	File         string  `json:"file"`
	Line         int     `json:"line"`
	Func         string  `json:"func"`
	Share        float64 `json:"share"`
	SampledEvery float64 `json:"sampled_every,omitempty"`
}

// Verdict is the leak judgement of one GPU.
type Verdict string

// Verdicts. Leak.Kind holds any of them; Leak.Verdict, the key earlier
// versions wrote, only leak, no_leak and insufficient_data (Legacy).
const (
	// VerdictLeak: allocated memory grows, tensors are kept.
	VerdictLeak Verdict = "leak"
	// VerdictCacheGrowth: reserved memory grows while allocated does not:
	// the caching allocator's cache grows (fragmentation, many sizes).
	VerdictCacheGrowth Verdict = "cache_growth"
	// VerdictUnseenGrowth: device memory grows while reserved does not:
	// memory PyTorch does not see (NCCL, CUDA graphs, another library).
	VerdictUnseenGrowth Verdict = "unseen_growth"
	// VerdictStartup: memory still ramps up when the run ends; nothing
	// settled to judge.
	VerdictStartup Verdict = "startup"
	// VerdictNoLeak: nothing grows.
	VerdictNoLeak Verdict = "no_leak"
	// VerdictInsufficient: too few points to judge.
	VerdictInsufficient Verdict = "insufficient_data"
)

// String is the verdict as the JSON report spells it.
func (v Verdict) String() string { return string(v) }

// Severity orders the verdicts: a run's verdict over several GPUs is the
// most severe of theirs. Growth of any kind comes before no growth, and
// no growth before not knowing.
func (v Verdict) Severity() int {
	switch v {
	case VerdictLeak:
		return 5
	case VerdictCacheGrowth:
		return 4
	case VerdictUnseenGrowth:
		return 3
	case VerdictNoLeak:
		return 2
	case VerdictStartup:
		return 1
	}
	return 0
}

// IsLeak reports whether the verdict is a leak.
func (v Verdict) IsLeak() bool { return v == VerdictLeak }

// Grows reports whether memory grows: a leak, the cache, or memory
// PyTorch does not see.
func (v Verdict) Grows() bool { return v.Severity() >= VerdictUnseenGrowth.Severity() }

// Legacy is the verdict as the "verdict" key spelled it before the other
// kinds existed: leak, no_leak (nothing is kept by tensors: the cache or
// unseen memory may grow) or insufficient_data (a start-up ramp too).
func (v Verdict) Legacy() Verdict {
	switch v {
	case VerdictLeak:
		return VerdictLeak
	case VerdictCacheGrowth, VerdictUnseenGrowth, VerdictNoLeak:
		return VerdictNoLeak
	}
	return VerdictInsufficient
}

// Leak is the growth of the steady-state memory. Its slope figures are
// those of Basis, the series the verdict rests on.
type Leak struct {
	// Verdict is Kind as earlier versions spelled it (Verdict.Legacy).
	Verdict            Verdict  `json:"verdict"`
	Kind               Verdict  `json:"kind"`
	Basis              string   `json:"basis"` // allocated, reserved, device_used
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
	// Growth is the growth rule on each series judged (allocated,
	// reserved, device used), in that order.
	Growth []Growth `json:"growth,omitempty"`
	// HeldBy names the site that explains most of the growth, when the
	// run has site snapshots.
	HeldBy *HeldBy `json:"held_by,omitempty"`
	// FitIntercept is the fitted line's value at x = 0 (steps or seconds
	// since the run's start), for drawing it.
	FitIntercept float64 `json:"-"`
}

// IsLeak reports whether the verdict is a leak.
func (l Leak) IsLeak() bool { return l.Judgement().IsLeak() }

// Judgement is the verdict of every kind: Kind, or Verdict where a report
// has no Kind (one decoded from an earlier version's JSON).
func (l Leak) Judgement() Verdict {
	if l.Kind != "" {
		return l.Kind
	}
	return l.Verdict
}

// Growth is the growth rule's finding on one series of bytes.
type Growth struct {
	// Quantity is allocated, reserved, device_used, reserved_beyond_peak
	// (reserved minus the largest step peak so far), used (a process's),
	// live_bytes (a site's) or host_total.
	Quantity string `json:"quantity"`
	// Trend is grows, flat, startup (a ramp that has not settled) or
	// too_few_points.
	Trend              string   `json:"trend"`
	SlopeBytesPerStep  *float64 `json:"slope_bytes_per_step,omitempty"`
	SlopeBytesPerHour  *float64 `json:"slope_bytes_per_hour,omitempty"`
	CILowBytesPerStep  *float64 `json:"ci95_low_bytes_per_step,omitempty"`
	CIHighBytesPerStep *float64 `json:"ci95_high_bytes_per_step,omitempty"`
	CILowBytesPerHour  *float64 `json:"ci95_low_bytes_per_hour,omitempty"`
	CIHighBytesPerHour *float64 `json:"ci95_high_bytes_per_hour,omitempty"`
	PValue             *float64 `json:"p_value,omitempty"`
	// GrowthBytes is the slope times the span fitted.
	GrowthBytes   *float64 `json:"growth_bytes,omitempty"`
	Points        int      `json:"points"`
	SkippedWarmup int      `json:"skipped_warmup_points"`
	JumpsRemoved  int      `json:"jumps_removed"`

	kind    growthKind
	fit     trend // the verdict's fit: per step where steps are known
	perHour trend // the same points against time (seconds)
	perStep bool
	// Of the floors: why they are too few to tell a start-up ramp from a
	// leak ("" if not: tooShortToTell), and the last one's bytes.
	short     string
	lastBytes int64
}

// Grows reports whether the series grows.
func (g Growth) Grows() bool { return g.kind == growthRises }

// Warmup says where a run's warm-up ends: with two epochs or more, at the
// end of the first (EndNS); else each series settles on its own.
type Warmup struct {
	ByEpoch bool
	EndNS   int64
}

// skipOf is the number of floors of the warm-up, or -1 for settle.
func (w Warmup) skipOf(floors []FloorPoint) int {
	if !w.ByEpoch {
		return -1
	}
	return sort.Search(len(floors), func(i int) bool { return floors[i].TNS > w.EndNS })
}

// JudgeGrowths gives a GPU's verdict from the growth rule applied to each
// series: allocated, reserved, device used, reserved_beyond_peak and
// step_peak_high where known (all but device used need a probe, the last
// two step peaks), on the same spans; the first is the series a leak is
// judged on (allocated, or device used without a probe). A GPU's pass
// makes each series' floors and its growth, and lets the floors go before
// the next (a week of steps is millions of floors a series).
func JudgeGrowths(growths []Growth, w Warmup, per string, run storage.Run, g storage.GPU, lastUsed int64) Leak {
	l := Leak{Per: per, Kind: VerdictInsufficient, Growth: growths}
	if len(growths) == 0 {
		l.Basis, l.Verdict = "device_used", VerdictInsufficient
		l.Reason = "no samples"
		return l
	}
	byName := map[string]*Growth{}
	for i := range l.Growth {
		byName[l.Growth[i].Quantity] = &l.Growth[i]
	}
	first := &l.Growth[0]
	basis := first
	switch {
	case first.kind == growthRises:
		l.Kind = VerdictLeak
		if first.Quantity == "allocated" {
			l.Reason = fmt.Sprintf("sustained growth of allocated memory at step ends: tensors are kept (Mann–Kendall p < %g, Theil–Sen slope > 0 with its 95 %% interval above 0)", leakP)
		} else {
			l.Reason = fmt.Sprintf("sustained growth of the steady-state floor (Mann–Kendall p < %g, Theil–Sen slope > 0 with its 95 %% interval above 0)", leakP)
		}
	case first.kind == growthStartup:
		l.Kind = VerdictStartup
		l.Reason = "memory still ramps up when the run ends: it never settles, so there is no steady state to judge"
		if first.Points < MinSteadyPoints {
			l.Reason = fmt.Sprintf("memory still ramps up when the run ends: fewer than %d points after the warm-up", MinSteadyPoints)
		}
	case first.kind == growthTooFew:
		l.Kind = VerdictInsufficient
		l.Reason = fmt.Sprintf("fewer than %d steady-state points after the warm-up", MinSteadyPoints)
	case byName["reserved"] != nil && byName["reserved"].Grows() && !cacheDominates(byName["reserved_beyond_peak"], byName["step_peak_high"]):
		l.Kind = VerdictNoLeak
		l.Reason = "allocated memory does not grow; reserved memory grows with the step's peak (the job needs more at its busiest: longer inputs), not beyond it"
		if c := byName["reserved_beyond_peak"]; c.Grows() {
			l.Reason = fmt.Sprintf("allocated memory does not grow; reserved memory grows mostly with the step's peak (the job needs more at its busiest: longer inputs): the largest peak rises %s, the cache beyond it only %s",
				byName["step_peak_high"].rateWords(), c.rateWords())
		}
	case byName["reserved"] != nil && byName["reserved"].Grows():
		l.Kind, basis = VerdictCacheGrowth, byName["reserved"]
		l.Reason = "the allocator's reserved memory grows while allocated memory does not: its cache grows, as with many block sizes (variable shapes) that fragment it; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, fixed shapes or bucketing keep it flat"
	case first.Quantity != "device_used" && byName["device_used"] != nil && byName["device_used"].Grows():
		l.Kind, basis = VerdictUnseenGrowth, byName["device_used"]
		l.Reason = "device memory grows while PyTorch's reserved memory does not: memory PyTorch does not see (NCCL, CUDA graphs, another library or process)"
	default:
		l.Kind = VerdictNoLeak
		l.Reason = noGrowthReason(first)
	}
	if l.Kind.Grows() && !w.ByEpoch {
		if why := basis.short; why != "" {
			l.Kind = VerdictStartup
			l.Reason = fmt.Sprintf("%s grows, but the run is too short to tell a start-up ramp from a leak (%s, no completed epoch); record a longer run", strings.ReplaceAll(basis.Quantity, "_", " "), why)
			basis.kind = growthStartup
		}
	}
	l.Verdict = l.Kind.Legacy()
	l.Basis = basis.Quantity
	l.Points, l.SkippedWarmup, l.JumpsRemoved = basis.Points, basis.SkippedWarmup, basis.JumpsRemoved
	if basis.kind == growthTooFew || basis.kind == growthStartup {
		return l // no slope, no time to full
	}
	l.PValue = basis.PValue
	l.SlopeBytesPerHour, l.CILowBytesPerHour, l.CIHighBytesPerHour = basis.SlopeBytesPerHour, basis.CILowBytesPerHour, basis.CIHighBytesPerHour
	l.SlopeBytesPerStep, l.CILowBytesPerStep, l.CIHighBytesPerStep = basis.SlopeBytesPerStep, basis.CILowBytesPerStep, basis.CIHighBytesPerStep
	l.FitIntercept = basis.fit.Intercept
	if l.Kind.Grows() {
		// The GPU is full when device memory is: where device used grows
		// (it holds reserved, which holds allocated), its rate says when;
		// else the basis's.
		rate := basis.perHour.Slope // bytes per second
		if d := byName["device_used"]; d != nil && d.Grows() && d.perHour.Slope > rate {
			rate = d.perHour.Slope
		}
		if rate > 0 && g.TotalBytes > 0 {
			// The last device sample is 0 once the job has exited.
			now := max(lastUsed, basis.lastBytes)
			l.TimeToFullS = fptr(float64(g.TotalBytes-now) / rate)
		}
		return l
	}
	// The verdict's own fit decides for both slopes; the slope per hour
	// is fitted on its own as well (step times can change), so it must
	// also pass for itself.
	if !slopeBesideNoLeak(basis.fit) {
		l.SlopeBytesPerStep, l.CILowBytesPerStep, l.CIHighBytesPerStep = nil, nil, nil
	}
	if !slopeBesideNoLeak(basis.fit) || !slopeBesideNoLeak(basis.perHour) {
		l.SlopeBytesPerHour, l.CILowBytesPerHour, l.CIHighBytesPerHour = nil, nil, nil
	}
	return l
}

// noGrowthReason says why a series that was judged does not grow.
func noGrowthReason(g *Growth) string {
	t := g.fit
	var r string
	switch {
	case g.GrowthBytes != nil && *g.GrowthBytes < minLeakGrowth && t.Slope > 0:
		r = "the steady-state floor grows by less than " + wholeBytes(minLeakGrowth) + " over the run"
	case t.P >= leakP:
		r = "no significant trend in the steady-state floor"
	case t.Slope > 0:
		r = "the steady-state floor's rise is not told apart from 0 (its slope's 95 % interval reaches 0)"
	default:
		r = "the steady-state floor does not grow"
	}
	if g.JumpsRemoved > 0 {
		r += "; one-off jumps were set aside"
	}
	return r
}

// wholeBytes writes a threshold of whole MiB or KiB as docs/analysis.md
// spells it ("1 MiB", "64 KiB"), so that a message formats the constant.
func wholeBytes(b int64) string {
	switch {
	case b >= 1<<20 && b%(1<<20) == 0:
		return strconv.FormatInt(b>>20, 10) + " MiB"
	case b >= 1<<10 && b%(1<<10) == 0:
		return strconv.FormatInt(b>>10, 10) + " KiB"
	}
	return strconv.FormatInt(b, 10) + " B"
}

// slopeBesideNoLeak says whether a no_leak verdict may show the slope: a
// slope that is told apart from 0 next to "no leak" reads as a leak. It
// stays when it is 0, or when its 95 % interval holds 0 and the
// Mann–Kendall test finds no trend. Both are needed: memory known to 1 MiB
// (nvidia-smi's logs) is full of ties, and the interval can then end
// exactly at 0 beside a trend the test tells apart (one real log did: see
// bench/README.md, "Figures behind the code's constants").
func slopeBesideNoLeak(t trend) bool {
	return t.Slope == 0 || t.Lo <= 0 && t.Hi >= 0 && t.P >= leakP
}

// Sentence says the leak verdict of GPU gpu in plain words.
func (l Leak) Sentence(gpu int) string { return l.SentenceFor(fmt.Sprintf("GPU %d", gpu)) }

// SentenceFor says the leak verdict in plain words, naming the GPU as gpu
// (GPUReport.Label).
func (l Leak) SentenceFor(gpu string) string {
	switch l.Judgement() {
	case VerdictLeak:
		parts := []string{gpu + " grows " + l.rateWords()}
		if l.HeldBy != nil {
			parts = append(parts, l.HeldBy.Words())
		}
		if c := l.cacheFaster(); c != "" {
			parts = append(parts, c)
		}
		if l.TimeToFullS != nil {
			parts = append(parts, "full in about "+units.FormatDuration(*l.TimeToFullS))
		}
		return strings.Join(parts, "; ") + " (" + basisWords(l.Basis) + ")"
	case VerdictCacheGrowth:
		parts := []string{fmt.Sprintf("%s: cache growth, not a leak: reserved memory grows %s while allocated memory stays flat", gpu, l.rateWords()),
			"the allocator's cache fragments with many block sizes; try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, fixed shapes or bucketing"}
		if l.TimeToFullS != nil {
			parts = append(parts, "full in about "+units.FormatDuration(*l.TimeToFullS))
		}
		return strings.Join(parts, "; ")
	case VerdictUnseenGrowth:
		parts := []string{fmt.Sprintf("%s: memory PyTorch does not see grows %s: device used grows while reserved stays flat", gpu, l.rateWords()),
			"NCCL, CUDA graphs, another library or process"}
		if l.TimeToFullS != nil {
			parts = append(parts, "full in about "+units.FormatDuration(*l.TimeToFullS))
		}
		return strings.Join(parts, "; ")
	case VerdictStartup:
		return fmt.Sprintf("%s: start-up only, no leak can be judged: %s", gpu, l.Reason)
	case VerdictNoLeak:
		return fmt.Sprintf("%s: no leak: %s", gpu, l.Reason)
	}
	return fmt.Sprintf("%s: not enough data to judge a leak: %s", gpu, l.Reason)
}

// tooShortToTell says why n floors from firstNS to lastNS are too short a record to tell a
// start-up ramp from a leak: fewer than startupSteps steps, or (without
// steps) less than startupSpanS seconds. Empty when they are long enough.
func tooShortToTell(n int, firstNS, lastNS int64, perStep bool) string {
	if n == 0 {
		return ""
	}
	if perStep {
		if n < startupSteps {
			return fmt.Sprintf("%d steps, under %d", n, startupSteps)
		}
		return ""
	}
	if span := float64(lastNS-firstNS) / 1e9; span < startupSpanS {
		return fmt.Sprintf("%.0f s, under %d s", span, startupSpanS)
	}
	return ""
}

// cacheDominates says whether reserved memory grows by its cache: reserved
// beyond the largest step peak so far (cache) grows, and faster than that
// peak (high), so that it is the larger part of reserved's growth. Where
// the peak rises, reserved must follow it; that is not the cache's doing.
// Without step peaks (cache nil) reserved's growth is the cache's.
func cacheDominates(cache, high *Growth) bool {
	if cache == nil || high == nil {
		return true
	}
	return cache.Grows() && cache.fit.Slope > max(high.fit.Slope, 0)
}

// rateWords is g's slope in words: per step where it has one, else per
// hour.
func (g *Growth) rateWords() string {
	if g.SlopeBytesPerStep != nil {
		return units.FormatBytes(int64(math.Round(*g.SlopeBytesPerStep))) + " per step"
	}
	if g.SlopeBytesPerHour != nil {
		return units.FormatBytes(int64(*g.SlopeBytesPerHour)) + " per hour"
	}
	return "at no rate it can tell"
}

// cacheFaster says, beside a leak, that the allocator's cache grows faster
// than the tensors kept: reserved beyond the largest step peak grows, with
// a steeper slope than allocated's. Empty otherwise.
func (l Leak) cacheFaster() string {
	var alloc, cache *Growth
	for i := range l.Growth {
		switch g := &l.Growth[i]; g.Quantity {
		case "allocated":
			alloc = g
		case "reserved_beyond_peak":
			cache = g
		}
	}
	if alloc == nil || cache == nil || cache.Trend != growthRises.String() {
		return ""
	}
	a, c := alloc.SlopeBytesPerHour, cache.SlopeBytesPerHour
	if a == nil || c == nil || *c <= *a {
		return ""
	}
	return "the allocator's cache grows faster, " + cache.rateWords() + " beyond the step's peak (many block sizes fragment it: try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, fixed shapes or bucketing)"
}

// rateWords is the verdict's slope: "250.0 KiB per step (1.20 GiB per
// hour)", or per hour alone.
func (l Leak) rateWords() string {
	switch {
	case l.SlopeBytesPerStep != nil && l.SlopeBytesPerHour != nil:
		return fmt.Sprintf("%s per step (%s per hour)", units.FormatBytes(int64(math.Round(*l.SlopeBytesPerStep))), units.FormatBytes(int64(*l.SlopeBytesPerHour)))
	case l.SlopeBytesPerStep != nil:
		return units.FormatBytes(int64(math.Round(*l.SlopeBytesPerStep))) + " per step"
	case l.SlopeBytesPerHour != nil:
		return units.FormatBytes(int64(*l.SlopeBytesPerHour)) + " per hour"
	}
	return ""
}

func basisWords(b string) string {
	if b == "allocated" {
		return "allocated memory at step ends, from the probe"
	}
	return "device memory floors"
}

// SiteGrowth is the growth rule on one site's live bytes y at the
// snapshots' x (steps since the first, or seconds) and t (seconds), with
// skip warm-up snapshots (-1: the series settles). With at least
// MinSteadyPoints snapshots the rule decides; with fewer its test cannot
// tell growth from noise, and the site grows where its Theil–Sen slope,
// its one-off jumps set aside, gives at least minSiteGrowth over the
// snapshots after the warm-up. It returns the slope against x and against
// t.
func SiteGrowth(x, t, y []float64, skip int) (perX, perS float64, grows bool) {
	if len(x) >= MinSteadyPoints {
		g := growthOfPart(x, y, skip, minSiteGrowth)
		if g.kind != growthRises {
			return 0, 0, false
		}
		rt, _ := reduce(t, y, maxTrendPoints)
		return g.fit.Slope, fitPoints(rt[g.skip:], g.y[g.skip:]).Slope, true
	}
	skip = max(0, min(skip, len(x)-2))
	x, t, y = x[skip:], t[skip:], y[skip:]
	if len(x) < 2 {
		return 0, 0, false
	}
	y, _ = removeJumps(y)
	perX, _ = theilSen(x, y)
	perS, _ = theilSen(t, y)
	return perX, perS, perX > 0 && perX*(x[len(x)-1]-x[0]) >= minSiteGrowth
}

// Words is the leak sentence's part that names the site.
func (h *HeldBy) Words() string {
	where := h.Site
	if h.Func != "" {
		where += " in `" + h.Func + "`"
	}
	words := fmt.Sprintf("%.0f %% of it is held by blocks allocated at %s", 100*h.Share, where)
	if h.SampledEvery > 1 {
		words += fmt.Sprintf(" (estimated: stacks kept on one step in %s)", everyWords(h.SampledEvery))
	}
	return words
}

// everyWords writes a sampling's N as "8" or "2.5".
func everyWords(n float64) string { return strconv.FormatFloat(math.Round(n*10)/10, 'f', -1, 64) }

func f64(v float64) *float64 { return &v }

// fptr is v's address, or nil where v is not finite.
func fptr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
