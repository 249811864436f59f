package compare

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/testsupport/analysistest"
)

// batchRuns writes runs whose peak device memory is exactly
// 1 GiB + batch × 64 MiB on an 80 GiB GPU.
func batchRuns(g *analysistest.Gen, batches []int, tag func(b int) string) {
	for _, b := range batches {
		g.Line(`{"type":"run","name":"bs%d","start_ns":%d,"tags":{"batch_size":%q}}`, b, t0, tag(b))
		g.Line(`{"type":"gpu","gpu":0,"name":"Test GPU","total_bytes":%d}`, int64(80*GiB))
		for i := 0; i < 50; i++ {
			v := int64(GiB) + int64(b)*64*MiB
			if i%10 != 5 {
				v -= 512 * MiB // the peak is reached once in ten samples
			}
			g.Line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`, t0+int64(i)*1e8, v)
		}
	}
}

func TestFitByBatchSizeExact(t *testing.T) {
	g := &analysistest.Gen{}
	batchRuns(g, []int{16, 32, 64, 96}, func(b int) string { return strconv.Itoa(b) })
	reps := analyzeJSONL(t, g.String())
	c, err := Compare([]*analysis.Report{reps["bs16"], reps["bs32"], reps["bs64"], reps["bs96"]}, "bs32", "time")
	if err != nil {
		t.Fatal(err)
	}
	if c.Baseline != "bs32" || *c.Runs[2].PeakUsedRatio != float64(GiB+64*64*MiB)/float64(GiB+32*64*MiB) {
		t.Fatalf("ratios: %+v", c.Runs[2])
	}
	if err := FitByTag(c, "batch_size", 0.05); err != nil {
		t.Fatal(err)
	}
	b := c.By
	if b.Fit.SlopeBytesPerUnit != 64*MiB || b.Fit.InterceptBytes != GiB {
		t.Fatalf("fit %+v", b.Fit)
	}
	// (80 GiB × 0.95 − 1 GiB) / 64 MiB = 1200 exactly.
	if b.MaxFittingValue == nil || *b.MaxFittingValue != 1200 {
		t.Fatalf("max fitting %v", analysistest.Deref(b.MaxFittingValue))
	}
	if b.Statement != "batch_size up to 1200 fits on Test GPU (80.00 GiB) with 5 % headroom" {
		t.Errorf("statement %q", b.Statement)
	}
}

func TestFitByNonNumericTag(t *testing.T) {
	g := &analysistest.Gen{}
	batchRuns(g, []int{16, 32}, func(b int) string {
		if b == 32 {
			return "big"
		}
		return strconv.Itoa(b)
	})
	reps := analyzeJSONL(t, g.String())
	c, _ := Compare([]*analysis.Report{reps["bs16"], reps["bs32"]}, "", "")
	err := FitByTag(c, "batch_size", 0.05)
	if !errors.Is(err, ErrTagNotNumber) || !strings.Contains(err.Error(), `run "bs32" has batch_size="big"`) {
		t.Fatal(err)
	}
	if err := FitByTag(c, "lr", 0.05); !errors.Is(err, ErrNoTag) || !strings.Contains(err.Error(), `has no tag "lr"`) {
		t.Fatal(err)
	}
}

func TestCompareLeakAgainstCleanAndRunsWithoutMarks(t *testing.T) {
	g := &analysistest.Gen{Rand: rand.New(rand.NewPCG(9, 10))}
	g.Train("clean", analysistest.Train{GPUs: 2, Epochs: 3, StepsPerEpoch: 40, StepNS: 100e6})
	leaky := analysistest.Train{GPUs: 1, Epochs: 3, StepsPerEpoch: 40, StepNS: 100e6, Leak: []int64{8 * MiB}}
	g.Train("leaky", leaky)
	g.Train("nomarks", analysistest.Train{GPUs: 1, Epochs: 3, StepsPerEpoch: 40, StepNS: 100e6, NoMarks: true})
	reps := analyzeJSONL(t, g.String())
	c, err := Compare([]*analysis.Report{reps["clean"], reps["leaky"], reps["nomarks"]}, "", "step")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]RunSummary{}
	for _, r := range c.Runs {
		byName[r.Run] = r
	}
	if byName["clean"].LeakVerdict != growth.VerdictNoLeak || byName["leaky"].LeakVerdict != growth.VerdictLeak {
		t.Fatalf("verdicts %v %v", byName["clean"].LeakVerdict, byName["leaky"].LeakVerdict)
	}
	job := leaky.Job()
	if s := byName["leaky"].SlopeBytesPerStep; s == nil || !analysistest.Within(*s, float64(job.LeakPerStep(0)), 0.02) {
		t.Fatalf("slope %v, want %d", analysistest.Deref(s), job.LeakPerStep(0))
	}
	if r := byName["leaky"].PeakUsedRatio; r == nil || *r <= 1 {
		t.Errorf("leaky peak ratio %v", analysistest.Deref(r))
	}
	if byName["nomarks"].StepTimeS != nil || byName["nomarks"].EpochDeltaBytes != nil {
		t.Errorf("figures from marks that do not exist: %+v", byName["nomarks"])
	}
	notes := strings.Join(c.Notes, "\n")
	if !strings.Contains(notes, "different numbers of GPUs") || !strings.Contains(notes, "no step marks in [nomarks]") {
		t.Errorf("notes: %s", notes)
	}
	if _, err := Compare(c.Reports, "missing", "step"); !errors.Is(err, ErrUnknownBaseline) {
		t.Errorf("unknown baseline: %v", err)
	}
	if _, err := Compare(c.Reports, "", "sideways"); !errors.Is(err, ErrBadAlign) {
		t.Errorf("unknown alignment: %v", err)
	}
}

// probeBatchRuns writes runs with allocator samples: each step's peak
// allocated is 200 MiB + batch × 20 MiB, the allocator's reserved stays at
// twice that (its cache), the device shows reserved + 700 MiB (memory
// PyTorch does not see) and the driver reserves 600 MiB.
func probeBatchRuns(g *analysistest.Gen, batches []int) {
	for _, b := range batches {
		probeBatchRun(g, b, 0)
	}
}

// probeBatchRun writes one run of probeBatchRuns. With nearLimit > 0 the
// run is at the GPU's limit: from step 10 on, its allocator frees its cache
// and retries each step, and keeps reserved at the peak × (1 + nearLimit).
func probeBatchRun(g *analysistest.Gen, b int, nearLimit float64) {
	probeRun(g, b, int64(200*MiB)+int64(b)*20*MiB, nearLimit)
}

// probeRun writes one run of probeBatchRun whose per-step peak is peak.
func probeRun(g *analysistest.Gen, b int, peak int64, nearLimit float64) {
	g.Line(`{"type":"run","name":"p%d","start_ns":%d,"interval_ns":10000000,"tags":{"batch_size":"%d"}}`, b, t0, b)
	g.Line(`{"type":"gpu","gpu":0,"name":"Test GPU","total_bytes":%d}`, int64(80*GiB))
	for i := 0; i < 40; i++ {
		t := t0 + int64(i)*100e6
		reserved, retries := 2*peak, 0
		if nearLimit > 0 && i >= 10 {
			reserved, retries = int64(float64(peak)*(1+nearLimit)), 2*(i-9)
		}
		g.Line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d,"reserved_bytes":%d}`, t-5e6, reserved+700*MiB, 600*MiB)
		g.Line(`{"type":"mark","t_ns":%d,"kind":"step","step":%d}`, t, i)
		g.Line(`{"type":"torch","t_ns":%d,"gpu":0,"pid":1,"allocated_bytes":%d,"reserved_bytes":%d,"active_bytes":%d,"inactive_split_bytes":0,"peak_allocated_bytes":%d,"segments":4,"alloc_retries":%d,"ooms":0}`,
			t, 100*MiB, reserved, 100*MiB, peak, retries)
	}
}

// A run at the limit measures the allowance: its allocator retried and
// kept 3 % beyond the step's peak, and that replaces the default. A run
// that ran out of memory is no point of the fit and caps the value below
// its own.
func TestFitByBatchSizeMeasuresTheAllowanceAndHonoursFailures(t *testing.T) {
	g := &analysistest.Gen{}
	probeBatchRuns(g, []int{32, 64})
	probeBatchRun(g, 3000, 0.03)
	reps := analyzeJSONL(t, g.String())
	if o := reps["p3000"].GPUs[0].NearLimitOverhead; o == nil || math.Abs(*o-0.03) > 1e-6 {
		t.Fatalf("near-limit overhead %v, want 0.03", analysistest.Deref(o))
	}
	if o := reps["p64"].GPUs[0].NearLimitOverhead; o != nil {
		t.Fatalf("a run far from the limit measured %v", *o)
	}
	c := fitByBatch(t, 0.05, reps["p32"], reps["p64"], reps["p3000"])
	b := c.By
	if b.AllowanceBasis != "measured" || b.AllowanceRun != "p3000" || math.Abs(b.AllowanceFraction-0.03) > 1e-6 ||
		!strings.Contains(b.BasisWords, `measured in run "p3000"`) {
		t.Fatalf("allowance %g (%s, %q): %s", b.AllowanceFraction, b.AllowanceBasis, b.AllowanceRun, b.BasisWords)
	}
	largest := func(h, allowance float64) float64 {
		v := 0
		for float64(200*MiB+(v+1)*20*MiB)*(1+allowance)+700*MiB <= 80*GiB*(1-h)-600*MiB {
			v++
		}
		return float64(v)
	}
	if b.MaxFittingValueNoHeadroom == nil || *b.MaxFittingValueNoHeadroom != largest(0, 0.03) {
		t.Fatalf("no headroom %v, want %v", analysistest.Deref(b.MaxFittingValueNoHeadroom), largest(0, 0.03))
	}

	// Without the run at the limit the default applies; a run that ran
	// out of memory at 2800 (below the projection) caps both values.
	var o strings.Builder
	fmt.Fprintf(&o, `{"type":"run","name":"oom","start_ns":%d,"tags":{"batch_size":"2800"}}`+"\n", t0)
	fmt.Fprintf(&o, `{"type":"gpu","gpu":0,"name":"Test GPU","total_bytes":%d}`+"\n", int64(80*GiB))
	fmt.Fprintf(&o, `{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`+"\n", t0+1e9, int64(79*GiB))
	fmt.Fprintf(&o, `{"type":"mark","t_ns":%d,"kind":"oom","gpu":0,"pid":1,"text":"CUDA out of memory. Tried to allocate 2.00 GiB"}`+"\n", t0+2e9)
	fmt.Fprintf(&o, `{"type":"mark","t_ns":%d,"kind":"exit","code":1}`+"\n", t0+3e9)
	oom := analyzeJSONL(t, o.String())["oom"]
	c = fitByBatch(t, 0, reps["p32"], reps["p64"], oom)
	b = c.By
	if b.AllowanceBasis != "default" || b.AllowanceFraction != replay.AllocatorAllowance || len(b.Points) != 2 ||
		len(b.Failed) != 1 || b.Failed[0].Run != "oom" || b.Failed[0].Value != 2800 {
		t.Fatalf("allowance %g (%s), points %d, failed %+v", b.AllowanceFraction, b.AllowanceBasis, len(b.Points), b.Failed)
	}
	if largest(0, replay.AllocatorAllowance) < 2800 {
		t.Fatalf("the projection %v is below the failure: the test does not test the cap", largest(0, replay.AllocatorAllowance))
	}
	if b.MaxFittingValue == nil || *b.MaxFittingValue != 2799 || *b.MaxFittingValueNoHeadroom != 2799 ||
		!strings.Contains(b.Statement, `run "oom" ran out of memory at batch_size=2800`) {
		t.Fatalf("max fitting %v / %v: %s", analysistest.Deref(b.MaxFittingValue), analysistest.Deref(b.MaxFittingValueNoHeadroom), b.Statement)
	}
}

// TestFitByBatchSizeLeavesOutAJobThatCrashed: a run whose script failed
// before its first step without running out of memory (exit 1, no step
// marks: a model that cannot be built at that batch, a typo) is not a
// point of the fit, whatever it allocated, and the notes say so; the
// prediction is that of the other runs.
func TestFitByBatchSizeLeavesOutAJobThatCrashed(t *testing.T) {
	g := &analysistest.Gen{}
	probeBatchRuns(g, []int{32, 64})
	var o strings.Builder
	fmt.Fprintf(&o, `{"type":"run","name":"crash","start_ns":%d,"tags":{"batch_size":"128"}}`+"\n", t0)
	fmt.Fprintf(&o, `{"type":"gpu","gpu":0,"name":"Test GPU","total_bytes":%d}`+"\n", int64(80*GiB))
	fmt.Fprintf(&o, `{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`+"\n", t0+1e9, int64(GiB))
	fmt.Fprintf(&o, `{"type":"torch","t_ns":%d,"gpu":0,"pid":1,"allocated_bytes":%d,"reserved_bytes":%d,"peak_allocated_bytes":%d}`+"\n",
		t0+2e9, int64(100*MiB), int64(GiB), int64(900*MiB))
	fmt.Fprintf(&o, `{"type":"mark","t_ns":%d,"kind":"exit","code":1}`+"\n", t0+3e9)
	reps := analyzeJSONL(t, g.String()+o.String())
	fit := func(names ...string) *ByTag {
		var rs []*analysis.Report
		for _, n := range names {
			rs = append(rs, reps[n])
		}
		c := fitByBatch(t, 0, rs...)
		if len(names) == 3 && !slices.ContainsFunc(c.Notes, func(n string) bool {
			return strings.Contains(n, `run "crash" exited 1 before its first step, without running out of memory`)
		}) {
			t.Errorf("notes %q", c.Notes)
		}
		return c.By
	}
	with, without := fit("p32", "p64", "crash"), fit("p32", "p64")
	if len(with.Points) != 2 || len(with.Failed) != 0 || with.MaxFittingValueNoHeadroom == nil ||
		*with.MaxFittingValueNoHeadroom != *without.MaxFittingValueNoHeadroom {
		t.Fatalf("points %d, failed %d, predicted %v, without the crash %v", len(with.Points), len(with.Failed),
			analysistest.Deref(with.MaxFittingValueNoHeadroom), analysistest.Deref(without.MaxFittingValueNoHeadroom))
	}
}

// TestFitByBatchSizeCountsAFullGPUAsOutOfMemory: a run that exited 1
// before its first step with no OOM mark but with its GPU full (cuBLAS's
// CUBLAS_STATUS_ALLOC_FAILED raises a plain RuntimeError) ran out of
// memory: it caps the prediction below its value, as an OOM does, and the
// notes say why; with the GPU 3 % free, the same run is a crash, left out.
func TestFitByBatchSizeCountsAFullGPUAsOutOfMemory(t *testing.T) {
	g := &analysistest.Gen{}
	probeBatchRuns(g, []int{32, 64})
	run := func(name string, used int64) string {
		var o strings.Builder
		fmt.Fprintf(&o, `{"type":"run","name":%q,"start_ns":%d,"tags":{"batch_size":"1000"}}`+"\n", name, t0)
		fmt.Fprintf(&o, `{"type":"gpu","gpu":0,"name":"Test GPU","total_bytes":%d}`+"\n", int64(80*GiB))
		fmt.Fprintf(&o, `{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`+"\n", t0+1e9, used)
		fmt.Fprintf(&o, `{"type":"mark","t_ns":%d,"kind":"exit","code":1}`+"\n", t0+3e9)
		return o.String()
	}
	reps := analyzeJSONL(t, g.String()+run("full", 79*GiB)+run("crash", 776*GiB/10))
	if !analysis.RanOutOfMemory(reps["full"]) || analysis.RanOutOfMemory(reps["crash"]) || analysis.RanOutOfMemory(reps["p32"]) {
		t.Fatalf("ran out of memory: full %v, crash %v, p32 %v", analysis.RanOutOfMemory(reps["full"]), analysis.RanOutOfMemory(reps["crash"]), analysis.RanOutOfMemory(reps["p32"]))
	}
	if _, failed := analysis.FailedBeforeAStep(reps["full"]); failed {
		t.Error("the full GPU's run counted as a crash")
	}
	if code, failed := analysis.FailedBeforeAStep(reps["crash"]); !failed || code != 1 {
		t.Errorf("the crash: failed %v, code %d", failed, code)
	}
	fit := func(last string) *Comparison {
		c := fitByBatch(t, 0, reps["p32"], reps["p64"], reps[last])
		return c
	}
	c := fit("full")
	if len(c.By.Points) != 2 || len(c.By.Failed) != 1 || c.By.Failed[0].Run != "full" ||
		c.By.MaxFittingValueNoHeadroom == nil || *c.By.MaxFittingValueNoHeadroom != 999 {
		t.Fatalf("points %d, failed %+v, predicted %v", len(c.By.Points), c.By.Failed, analysistest.Deref(c.By.MaxFittingValueNoHeadroom))
	}
	if !slices.ContainsFunc(c.Notes, func(n string) bool {
		return strings.Contains(n, `run "full" exited 1 before its first step with no OOM mark but its GPU full (79.00 GiB of 80.00 GiB in use)`)
	}) {
		t.Errorf("notes %q", c.Notes)
	}
	if c := fit("crash"); len(c.By.Failed) != 0 || *c.By.MaxFittingValueNoHeadroom <= 1000 {
		t.Errorf("with the crash: failed %+v, predicted %v", c.By.Failed, analysistest.Deref(c.By.MaxFittingValueNoHeadroom))
	}
}

func TestFitByBatchSizeFromWhatTheJobNeeds(t *testing.T) {
	g := &analysistest.Gen{}
	probeBatchRuns(g, []int{32, 64, 128})
	reps := analyzeJSONL(t, g.String())
	c := fitByBatch(t, 0.05, reps["p32"], reps["p64"], reps["p128"])
	b := c.By
	if b.Basis != "step_peak_allocated" || b.NeedFit == nil || math.Abs(b.NeedFit.SlopeBytesPerUnit-20*MiB) > 1 || math.Abs(b.NeedFit.InterceptBytes-200*MiB) > 1 {
		t.Fatalf("basis %q, need fit %+v", b.Basis, b.NeedFit)
	}
	if b.UnseenBytes != 700*MiB || b.DriverReservedBytes != 600*MiB || b.AllowanceFraction != replay.AllocatorAllowance {
		t.Fatalf("unseen %d, driver %d, allowance %g", b.UnseenBytes, b.DriverReservedBytes, b.AllowanceFraction)
	}
	// The largest b with (200 MiB + 20 MiB·b)(1 + allowance) + 700 MiB ≤
	// 80 GiB·(1 − h) − 600 MiB, by counting up rather than by the formula.
	largest := func(h float64) float64 {
		v := 0
		for float64(200*MiB+(v+1)*20*MiB)*(1+replay.AllocatorAllowance)+700*MiB <= 80*GiB*(1-h)-600*MiB {
			v++
		}
		return float64(v)
	}
	if b.MaxFittingValue == nil || *b.MaxFittingValue != largest(0.05) || b.MaxFittingValueNoHeadroom == nil || *b.MaxFittingValueNoHeadroom != largest(0) {
		t.Fatalf("max fitting %v (no headroom %v), want %v (%v)", analysistest.Deref(b.MaxFittingValue), analysistest.Deref(b.MaxFittingValueNoHeadroom), largest(0.05), largest(0))
	}
	// The device fit (cache included) would have said far less, even
	// against the default allowance of 40 %.
	if dev := (0.95*80*GiB - 600*MiB - b.Fit.InterceptBytes) / b.Fit.SlopeBytesPerUnit; dev > 0.75**b.MaxFittingValue {
		t.Fatalf("device-based value %v is not far below %v: the test does not test the basis", dev, *b.MaxFittingValue)
	}
	if !strings.Contains(b.BasisWords, "per-step peak allocated") || !strings.Contains(b.BasisWords, "700.0 MiB") {
		t.Errorf("basis words %q", b.BasisWords)
	}
}

// TestFitByBatchSizeWithTheLargestSegment: runs whose probe measured the
// allocator's largest segment (after the warm-up) are projected with it:
// the pessimistic end adds two segments at the value with the rounding of
// the segments held (2 MiB each), the middle half of that, the optimistic
// end nothing, whether the segments are small (1 MiB a sample beside 20
// MiB a sample of peak) or large (8 MiB a sample).
func TestFitByBatchSizeWithTheLargestSegment(t *testing.T) {
	for _, segMiB := range []float64{1, 8} {
		t.Run(fmt.Sprintf("%g MiB a sample", segMiB), func(t *testing.T) { fitWithTheLargestSegment(t, segMiB) })
	}
}

func fitWithTheLargestSegment(t *testing.T, segMiB float64) {
	g := &analysistest.Gen{}
	for _, b := range []int{32, 64, 128} {
		peak := int64(200*MiB) + int64(b)*20*MiB
		g.Line(`{"type":"run","name":"s%d","start_ns":%d,"interval_ns":10000000,"tags":{"batch_size":"%d"}}`, b, t0, b)
		g.Line(`{"type":"gpu","gpu":0,"name":"Test GPU","total_bytes":%d}`, int64(80*GiB))
		for i := 0; i < 40; i++ {
			tt := t0 + int64(i)*100e6
			seg := ""
			if i >= 3 {
				seg = fmt.Sprintf(`,"largest_segment_bytes":%d`, int64(float64(b)*segMiB*MiB))
			}
			g.Line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d,"reserved_bytes":%d}`, tt-5e6, 2*peak+700*MiB, 600*MiB)
			g.Line(`{"type":"mark","t_ns":%d,"kind":"step","step":%d}`, tt, i)
			g.Line(`{"type":"torch","t_ns":%d,"gpu":0,"pid":1,"allocated_bytes":%d,"reserved_bytes":%d,"active_bytes":%d,"inactive_split_bytes":0,"peak_allocated_bytes":%d,"segments":%d,"alloc_retries":0,"ooms":0%s}`,
				tt, 100*MiB, 2*peak, 100*MiB, peak, 10+i%3, seg)
		}
	}
	reps := analyzeJSONL(t, g.String())
	if s := reps["s64"].GPUs[0]; s.LargestSegmentBytes == nil || *s.LargestSegmentBytes != int64(64*segMiB*MiB) || s.MostSegments == nil || *s.MostSegments != 12 {
		t.Fatalf("largest segment %v, most segments %v", analysistest.Deref(s.LargestSegmentBytes), analysistest.Deref(s.MostSegments))
	}
	c := fitByBatch(t, 0, reps["s32"], reps["s64"], reps["s128"])
	b := c.By
	if b.AllowanceBasis != "largest_segment" || b.AllowanceFraction != 0 || b.SegmentLine == nil ||
		math.Abs(b.SegmentLine.SlopeBytesPerUnit-segMiB*MiB) > 1 || math.Abs(b.SegmentLine.InterceptBytes) > 1 || b.RoundingBytes != 12*2*MiB {
		t.Fatalf("allowance %g (%s), segment line %+v, rounding %g", b.AllowanceFraction, b.AllowanceBasis, b.SegmentLine, b.RoundingBytes)
	}
	// The largest v whose peak, with k × (two segments and the rounding),
	// fits 80 GiB less the driver's 600 MiB and the 700 MiB PyTorch does
	// not see.
	largest := func(k float64) float64 {
		v := 0
		for {
			w := float64(v + 1)
			peak := 200*MiB + w*20*MiB
			if peak+k*(replay.StrandedSegments*w*segMiB*MiB+24*MiB) > 80*GiB-600*MiB-700*MiB {
				return float64(v)
			}
			v++
		}
	}
	for _, c := range []struct {
		name string
		got  *float64
		k    float64
	}{{"pessimistic", b.MaxFittingValueNoHeadroom, 1}, {"middle", b.MaxFittingValueMiddle, 0.5}, {"optimistic", b.MaxFittingValueOptimistic, 0}} {
		if c.got == nil || *c.got != largest(c.k) {
			t.Errorf("%s %v, want %v", c.name, analysistest.Deref(c.got), largest(c.k))
		}
	}
	if !strings.Contains(b.BasisWords, "largest segments") || !strings.Contains(b.IntervalWords, "2.00 largest segments with their rounding") {
		t.Errorf("words: %s / %s", b.BasisWords, b.IntervalWords)
	}
}

// TestLargestSegmentsOfProcessesSharingAGPU: two processes on one GPU
// (ranks of a data-parallel job) each strand up to one segment of their
// own: the GPU's figure is their sum while both live.
func TestLargestSegmentsOfProcessesSharingAGPU(t *testing.T) {
	g := &analysistest.Gen{}
	g.Line(`{"type":"run","name":"ddp","start_ns":%d,"interval_ns":10000000}`, t0)
	g.Line(`{"type":"gpu","gpu":0,"name":"Test GPU","total_bytes":%d}`, int64(80*GiB))
	for i := 0; i < 20; i++ {
		tt := t0 + int64(i)*100e6
		g.Line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`, tt-5e6, int64(10*GiB))
		for pid, seg := range map[int]int64{1: 100 * MiB, 2: 50 * MiB} {
			g.Line(`{"type":"torch","t_ns":%d,"gpu":0,"pid":%d,"allocated_bytes":%d,"reserved_bytes":%d,"peak_allocated_bytes":%d,"segments":3,"largest_segment_bytes":%d}`,
				tt+int64(pid), pid, 1*GiB, 2*GiB, 1*GiB, int64(i/5)*seg)
		}
	}
	r := analyzeJSONL(t, g.String())["ddp"].GPUs[0]
	if r.LargestSegmentBytes == nil || *r.LargestSegmentBytes != 3*150*MiB || r.MostSegments == nil || *r.MostSegments != 6 {
		t.Fatalf("largest segments %v, most segments %v; want 450 MiB and 6", analysistest.Deref(r.LargestSegmentBytes), analysistest.Deref(r.MostSegments))
	}
}
