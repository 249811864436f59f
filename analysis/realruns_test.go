package analysis

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
	"github.com/memrec/memrec/testsupport/analysistest"
	"github.com/memrec/memrec/testsupport/fixtures"
)

// importFixtures imports JSON Lines inputs into one fresh database and
// analyses every run, by run name.
func importFixtures(t *testing.T, inputs map[string][]byte) map[string]*Report {
	t.Helper()
	return analysistest.AnalyzeFiles(t, inputs, func(db *storage.DB, r storage.Run) (*Report, error) { return Analyze(db, r, Options{}) })
}

// TestDeviceOnlyLeakOnRealRuns judges real H200 runs recorded without the
// probe: ResNet-18 leaking (each step's logits kept) and clean, at two
// batch sizes, with and without process series; and the probe runs with
// their allocator samples and marks dropped (the device view is the same).
// The truth is the planted leak per step over the script's own step times
// (fixtures.Truth), or, for the probe runs, what their steps and marks say.
// Slopes must lie within 15 % of it, verdicts be right, and a no_leak
// verdict carry no slope outside an interval around 0.
func TestDeviceOnlyLeakOnRealRuns(t *testing.T) {
	truth := fixtures.ReadTruth(t)
	inputs := map[string][]byte{}
	want := map[string]float64{} // run name -> bytes per hour
	for _, f := range fixtures.H200Plain {
		tr, ok := truth.Plain[f]
		if !ok {
			t.Fatalf("no truth for %s", f)
		}
		run := f[len("h200-"):]
		inputs[f] = fixtures.Read(t, f)
		inputs[f+"-noprocs"] = fixtures.DeviceOnlyNoProcs(t, f)
		want[run], want[run+"-noprocs"] = tr.LeakBytesPerHour(), tr.LeakBytesPerHour()
	}
	// The probe runs: 256 000 B per step in the leaking one, at the step
	// rate after its first epoch.
	for _, f := range []string{fixtures.LeakRun, fixtures.CleanRun} {
		inputs[f+"-device"] = fixtures.DeviceOnly(t, f)
		inputs[f+"-noprocs"] = fixtures.DeviceOnlyNoProcs(t, f)
	}
	withMarks := importFixtures(t, map[string][]byte{"leak": fixtures.Read(t, fixtures.LeakRun)})[fixtures.LeakRun]
	steps := withMarks.GPUs[0].Steps
	var after []growth.StepMark
	for i := range steps.Len() {
		if s := steps.At(i); s.TNS > withMarks.GPUs[0].Epochs[0].EndNS {
			after = append(after, s)
		}
	}
	leakRate := 256000 * float64(len(after)-1) / (float64(after[len(after)-1].TNS-after[0].TNS) / 1e9) * 3600
	want[fixtures.LeakRun+"-device"], want[fixtures.LeakRun+"-noprocs"] = leakRate, leakRate
	want[fixtures.CleanRun+"-device"], want[fixtures.CleanRun+"-noprocs"] = 0, 0
	for _, f := range append(append([]string{}, fixtures.H200R18...), fixtures.H200GPT...) {
		inputs[f] = fixtures.DeviceOnly(t, f)
	}

	reps := importFixtures(t, inputs)
	for _, f := range append(append([]string{}, fixtures.H200R18...), fixtures.H200GPT...) {
		want[f[len("h200-"):]+"-device"] = 0
	}
	if len(reps) != len(want) {
		t.Fatalf("%d runs analysed, %d with a truth", len(reps), len(want))
	}
	for name, rate := range want {
		rep := reps[name]
		if rep == nil {
			t.Errorf("%s: not imported", name)
			continue
		}
		g := rep.GPUs[0]
		l := g.Leak
		if l.Basis != "device_used" || g.JobSpan == nil {
			t.Errorf("%s: basis %s, job span %v", name, l.Basis, g.JobSpan)
		}
		switch {
		case rate > 0:
			if l.Verdict != growth.VerdictLeak || l.SlopeBytesPerHour == nil {
				t.Errorf("%s: %s (%s), want a leak of %.1f GB/h", name, l.Verdict, l.Reason, rate/1e9)
				continue
			}
			if e := math.Abs(*l.SlopeBytesPerHour-rate) / rate; e > 0.15 {
				t.Errorf("%s: %.2f GB/h, truth %.2f GB/h (%.0f %% off)", name, *l.SlopeBytesPerHour/1e9, rate/1e9, 100*e)
			}
			t.Logf("%s: %.2f GB/h, truth %.2f GB/h (%+.1f %%)", name, *l.SlopeBytesPerHour/1e9, rate/1e9, 100*(*l.SlopeBytesPerHour-rate)/rate)
		default:
			if l.Verdict != growth.VerdictNoLeak {
				t.Errorf("%s: %s (%s), want no_leak", name, l.Verdict, l.Reason)
			}
			if s := l.SlopeBytesPerHour; s != nil && (*l.CILowBytesPerHour > 0 || *l.CIHighBytesPerHour < 0) {
				t.Errorf("%s: no_leak with a slope of %.2f GB/h outside an interval around 0", name, *s/1e9)
			}
		}
		// The per-slice table covers the job, not the start-up.
		if len(g.Intervals) != 10 {
			t.Errorf("%s: %d slices, want 10", name, len(g.Intervals))
		} else if g.Intervals[0].StartNS != g.JobSpan.FromNS {
			t.Errorf("%s: the first slice starts at %d ns, the job at %d ns", name, g.Intervals[0].StartNS-rep.StartNS, g.JobSpan.FromNS-rep.StartNS)
		}
		// None of these jobs gives memory back each step: no step time
		// can be read from their device memory.
		if g.InferredStepTimeS != nil {
			t.Errorf("%s: step time %v s inferred (%s)", name, *g.InferredStepTimeS, g.InferredStepBasis)
		}
		// Start-up and teardown are outside the job: the run's first and
		// last seconds hold no process memory.
		if g.JobSpan.FromNS <= rep.StartNS || g.JobSpan.ToNS >= rep.EndNS {
			t.Errorf("%s: job span %d..%d is not inside the run %d..%d", name, g.JobSpan.FromNS, g.JobSpan.ToNS, rep.StartNS, rep.EndNS)
		}
	}
}

// TestOOMsToldApartOnARealRun analyses ResNet-18 at a batch too large for
// the H200: 32 OOM marks within 240 ms, then exit 3. The script's own log
// (storage/testdata/h200-truth.json's source) has the error that ended it:
// "Tried to allocate 2.89 GiB ... of which 1.04 GiB is free ... 891.49 MiB
// is reserved by PyTorch but unallocated". The 31 before it were survived
// (each followed by another allocation of the process).
func TestOOMsToldApartOnARealRun(t *testing.T) {
	rep := importFixtures(t, map[string][]byte{fixtures.H200OOM: fixtures.Read(t, fixtures.H200OOM)})["r18-oom"]
	ooms := rep.GPUs[0].OOMs
	if len(ooms) != 32 {
		t.Fatalf("%d OOMs, want 32", len(ooms))
	}
	for i, o := range ooms[:31] {
		if o.Outcome != OOMSurvived {
			t.Errorf("OOM %d: %s (%s), want survived", i, o.Outcome, o.OutcomeReason)
		}
	}
	f := ooms[31]
	if f.Outcome != OOMFatal || !strings.Contains(f.OutcomeReason, "code 3") {
		t.Fatalf("last OOM: %s (%s), want fatal", f.Outcome, f.OutcomeReason)
	}
	gib := func(v float64) int64 { return int64(v * (1 << 30)) }
	near := func(got *int64, want int64, tol int64) bool {
		return got != nil && *got >= want-tol && *got <= want+tol
	}
	if !near(f.RequestedBytes, gib(2.89), gib(0.005)) || !near(f.FreeBytes, gib(1.04), gib(0.005)) {
		t.Fatalf("request %v, free %v; the script saw 2.89 GiB and 1.04 GiB", deref64(f.RequestedBytes), deref64(f.FreeBytes))
	}
	// torch's own message: 137.28 GiB allocated at the OOM. The figures
	// come from the probe's sample in the OOM observer and the device
	// sample nearest to it, both within 20 ms (two 10 ms intervals); the
	// device sees 630.8 MiB more than the allocator reserved (the CUDA
	// context), never less.
	if !near(f.AllocatedBytes, gib(137.28), gib(0.005)) || f.AllocatorTNS == nil || abs64(*f.AllocatorTNS-f.TNS) > 20e6 ||
		f.UsedTNS == nil || abs64(*f.UsedTNS-f.TNS) > 20e6 || f.PairToleranceNS != 20e6 {
		t.Fatalf("allocated %v from the sample at %v, used from %v, tolerance %d; want 137.28 GiB from samples within 20 ms of %d",
			deref64(f.AllocatedBytes), deref64(f.AllocatorTNS), deref64(f.UsedTNS), f.PairToleranceNS, f.TNS)
	}
	if f.UnseenBytes == nil || *f.UnseenBytes != *f.UsedBytes-*f.ReservedBytes || *f.UnseenBytes < 0 || len(f.LeftOut) != 0 {
		t.Fatalf("not seen by PyTorch %v (used %v, reserved %v), left out %q", deref64(f.UnseenBytes), deref64(f.UsedBytes), deref64(f.ReservedBytes), f.LeftOut)
	}
	// reserved − allocated at the OOM was 891.49 MiB: with the 1.04 GiB free,
	// 1.91 GiB, less than the 2.89 GiB asked: the cache would not have helped.
	if !near(f.CachedFreeBytes, 934795018, 8<<20) || f.CacheWouldHelp == nil || *f.CacheWouldHelp {
		t.Fatalf("cached free %v, would help %v", deref64(f.CachedFreeBytes), f.CacheWouldHelp)
	}
	// No step completed: the step needed at least 137.28 + 2.89 GiB and had
	// 137.28 + 1.04 GiB, so batch 7728 scaled by 138.32/140.17, 7625, is
	// only an upper bound: below the batch that failed and above the
	// largest that ran, found by bisection.
	lim := fixtures.ReadTruth(t).Limits["r18"]
	want := math.Floor(7728 * (137.28 + 1.04) / (137.28 + 2.89))
	if f.FittingBatch == nil || f.FitBasis != "lower_bound" || f.FitKind != FitUpperBound {
		t.Fatalf("fitting batch %v (%s, %s), want an upper bound", analysistest.Deref(f.FittingBatch), f.FitBasis, f.FitKind)
	}
	if b := *f.FittingBatch; math.Abs(b-want) > 1 || b >= 7728 || b < float64(lim.Largest) {
		t.Fatalf("fitting batch at most %v, want %v from torch's figures; an upper bound of the largest that ran, %d, below the 7728 that failed", b, want, lim.Largest)
	}
	b, _ := json.Marshal(f)
	if !strings.Contains(string(b), `"fitting_batch_kind":"upper_bound"`) {
		t.Fatalf("JSON lacks the figure's kind: %s", b)
	}
}

func deref64(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestClassifyOOMs(t *testing.T) {
	oom := func(t int64, pid int) storage.Mark { m := storage.NewMark(t, wire.MarkOOM); m.PID = pid; return m }
	step := func(t int64, n int) growth.StepMark { return growth.StepMark{TNS: t, Step: n} }
	exit := func(t int64, code int) *storage.Mark {
		m := storage.NewMark(t, wire.MarkExit)
		m.Code = code
		return &m
	}
	for _, tc := range []struct {
		name  string
		ooms  []storage.Mark
		steps []growth.StepMark
		exit  *storage.Mark
		want  []OOMOutcome
	}{
		{"fallbacks then fatal", []storage.Mark{oom(10, 1), oom(20, 1), oom(30, 1)}, nil, exit(50, 1), []OOMOutcome{OOMSurvived, OOMSurvived, OOMFatal}},
		{"caught, training went on", []storage.Mark{oom(10, 1)}, []growth.StepMark{step(5, 0), step(40, 1)}, exit(50, 1), []OOMOutcome{OOMSurvived}},
		{"caught, clean exit", []storage.Mark{oom(10, 1)}, nil, exit(50, 0), []OOMOutcome{OOMSurvived}},
		{"no exit mark", []storage.Mark{oom(10, 1)}, nil, nil, []OOMOutcome{OOMUnknown}},
		{"two processes", []storage.Mark{oom(10, 1), oom(20, 2)}, nil, exit(50, 1), []OOMOutcome{OOMFatal, OOMFatal}},
	} {
		got, why := classifyOOMs(tc.ooms, growth.StepsOf(tc.steps...), tc.exit)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v (%v), want %v", tc.name, got, why, tc.want)
		}
	}
}

func TestParseOOMSizes(t *testing.T) {
	for _, tc := range []struct {
		text             string
		req, free, limit int64
	}{
		{"CUDA out of memory. Tried to allocate 2.89 GiB on GPU 0 (1.04 GiB free of 139.80 GiB)", 3103113871, 1116691497, 150109106995},
		{"CUDA out of memory. Tried to allocate 662.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which 391.12 MiB is free.", 662 << 20, 410119045, -1}, // 391.12 × 2^20 = 410 119 045.12,
		{"CUDA out of memory. Tried to allocate 1.53 GiB. GPU 0 has a total capacity of 79.18 GiB of which 67.40 GiB is free. Including non-PyTorch memory, this process has 11.78 GiB memory in use. 12.10 GiB allowed; Of the allocated memory 10.94 GiB is allocated by PyTorch",
			1642824991, 72370198938, 12992276070},
		{"CUDA out of memory.", -1, -1, -1},
		{"Tried to allocate 20.00 KiB", 20 << 10, -1, -1},
	} {
		if z := parseOOMSizes(tc.text); z != (oomSizes{tc.req, tc.free, tc.limit}) {
			t.Errorf("%q: %+v; want %d, %d, %d", tc.text, z, tc.req, tc.free, tc.limit)
		}
	}
}

// TestFreeUnderAMemoryFraction: PyTorch's OOM observer passes the limit a
// memory fraction sets as the total, with the device's free memory, which
// the process could not take; the free memory the OOM is judged by is what
// the limit leaves beyond reserved. Without a fraction nothing changes.
func TestFreeUnderAMemoryFraction(t *testing.T) {
	const gib = int64(1) << 30
	o := OOM{ReservedBytes: i64(11 * gib), FreeBytes: i64(67 * gib)}
	limitFree(&o, 12*gib)
	if *o.FreeBytes != gib || *o.ProcessLimitBytes != 12*gib || *o.DeviceFreeBytes != 67*gib {
		t.Errorf("under a fraction: free %d, limit %v, device free %v", *o.FreeBytes, o.ProcessLimitBytes, o.DeviceFreeBytes)
	}
	o = OOM{ReservedBytes: i64(70 * gib), FreeBytes: i64(2 * gib)}
	limitFree(&o, 80*gib)
	if *o.FreeBytes != 2*gib || o.ProcessLimitBytes != nil || o.DeviceFreeBytes != nil {
		t.Errorf("without a fraction: free %d, limit %v", *o.FreeBytes, o.ProcessLimitBytes)
	}
}

// TestStepTimeFromASawtooth writes the device trace of a job that gives
// its activations back at the end of every step (steps of 250 ms plus up
// to 5 ms of noise, sampled at 100 Hz, 2 MiB pages, a second of start-up
// before CUDA) and reads the step time back from the device alone; the
// real runs, whose cache keeps its memory, show no period and get none.
func TestStepTimeFromASawtooth(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var b strings.Builder
	fmt.Fprintf(&b, `{"type":"run","name":"saw","start_ns":%d,"interval_ns":10000000}`+"\n", t0)
	fmt.Fprintf(&b, `{"type":"gpu","gpu":0,"total_bytes":%d}`+"\n", int64(80*GiB))
	stepStart, stepLen := t0+int64(1e9), int64(250e6)
	for k := int64(0); k < 4000; k++ { // 40 s
		ts := t0 + k*10e6
		for ts >= stepStart+stepLen {
			stepStart += stepLen
			stepLen = 250e6 + rng.Int64N(5e6)
		}
		used := int64(0)
		if ts >= t0+int64(1e9) {
			frac := float64(ts-stepStart) / float64(stepLen)
			used = int64(2*GiB) + int64(frac*float64(3*GiB))/(2*MiB)*(2*MiB)
		}
		fmt.Fprintf(&b, `{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`+"\n", ts, used)
	}
	reps := importFixtures(t, map[string][]byte{"saw": []byte(b.String()), fixtures.H200Plain[0]: fixtures.Read(t, fixtures.H200Plain[0]),
		fixtures.LeakRun: fixtures.DeviceOnly(t, fixtures.LeakRun)})
	g := reps["saw"].GPUs[0]
	if g.InferredStepTimeS == nil || *g.InferredStepTimeS < 0.25 || *g.InferredStepTimeS > 0.255 {
		t.Fatalf("inferred step time %v (%s), want 0.25 s to 0.255 s", analysistest.Deref(g.InferredStepTimeS), g.InferredStepBasis)
	}
	for _, name := range []string{"plain-leak-bs64", fixtures.LeakRun + "-device"} {
		if g := reps[name].GPUs[0]; g.InferredStepTimeS != nil {
			t.Errorf("%s: a step time of %v s inferred from a device trace without a sawtooth", name, *g.InferredStepTimeS)
		}
	}
}

// TestOOMAdviceFromStepPeaks checks the fatal OOM's advice when steps had
// completed: batch 100 ran steps peaking at 78 GiB, then asked for 5 GiB
// with 1 GiB free and 70 GiB allocated, 72 GiB reserved. The need is the
// peak plus the 4 GiB it lacked, 82 GiB, against the 71 GiB it had
// (allocated + free): 100 × 71/82, less the allocator allowance.
func TestOOMAdviceFromStepPeaks(t *testing.T) {
	o := OOM{AllocatedBytes: i64(70 * GiB), ReservedBytes: i64(72 * GiB), RequestedBytes: i64(5 * GiB), FreeBytes: i64(GiB)}
	oomAdvice(&o, 100, i64(78*GiB), 0, 0, 0)
	want := math.Floor(100 * 71.0 / 82.0 / (1 + replay.AllocatorAllowance))
	if o.FittingBatch == nil || *o.FittingBatch != want || o.FitBasis != "step_peak" || o.FitKind != FitEstimate {
		t.Fatalf("fitting batch %v (%s), want %v from the step peak", analysistest.Deref(o.FittingBatch), o.FitBasis, want)
	}
	// With the largest segment measured (200 segments held: 400 MiB of
	// rounding): 100 × (71 GiB − 400 MiB) / (82 GiB + 2 segments), the rule
	// of compare --by, however small or large a share of the need two
	// segments are.
	for _, seg := range []int64{GiB, 3 * GiB, 20 * GiB} {
		s := OOM{AllocatedBytes: i64(70 * GiB), ReservedBytes: i64(72 * GiB), RequestedBytes: i64(5 * GiB), FreeBytes: i64(GiB)}
		oomAdvice(&s, 100, i64(78*GiB), seg, 200*replay.SegmentRounding, 0)
		want := math.Floor(100 * (71*GiB - 400*MiB) / float64(82*GiB+replay.StrandedSegments*seg))
		if s.FittingBatch == nil || *s.FittingBatch != want || s.FitKind != FitEstimate {
			t.Errorf("segment %s: fitting batch %v, want %v", units.FormatBytes(seg), analysistest.Deref(s.FittingBatch), want)
		}
	}
	// 2 GiB cached and free + 1 GiB free < 5 GiB asked: the cache would not help.
	if *o.ShortBytes != 4*GiB || *o.CachedFreeBytes != 2*GiB || *o.CacheWouldHelp {
		t.Fatalf("short %d, cached free %d, would help %v", *o.ShortBytes, *o.CachedFreeBytes, *o.CacheWouldHelp)
	}
	// With 4.5 GiB cached and free it would have.
	o = OOM{AllocatedBytes: i64(70 * GiB), ReservedBytes: i64(74*GiB + GiB/2), RequestedBytes: i64(5 * GiB), FreeBytes: i64(GiB)}
	oomAdvice(&o, 0, nil, 0, 0, 0)
	if o.CacheWouldHelp == nil || !*o.CacheWouldHelp || o.FittingBatch != nil {
		t.Fatalf("would help %v, fitting batch %v without a batch tag", o.CacheWouldHelp, o.FittingBatch)
	}
}

// TestProcessGrowthOnRealRuns: the growth rule on each process's used
// memory (NVML) of the real runs without probe: the leaking job's process
// grows at the planted rate (within 15 %, as its GPU's floor does), the
// clean ones' stay flat.
func TestProcessGrowthOnRealRuns(t *testing.T) {
	truth := fixtures.ReadTruth(t)
	inputs := map[string][]byte{}
	for _, f := range fixtures.H200Plain {
		inputs[f] = fixtures.Read(t, f)
	}
	reps := importFixtures(t, inputs)
	for _, f := range fixtures.H200Plain {
		rate := truth.Plain[f].LeakBytesPerHour()
		rep := reps[f[len("h200-"):]]
		if rep == nil || len(rep.GPUs[0].Processes) == 0 {
			t.Fatalf("%s: no process", f)
		}
		var main *Process
		for i := range rep.GPUs[0].Processes {
			if p := &rep.GPUs[0].Processes[i]; main == nil || p.Samples > main.Samples {
				main = p
			}
		}
		g := main.Growth
		switch {
		case g == nil:
			t.Errorf("%s: pid %d has no growth", f, main.PID)
		case rate > 0 && (g.Trend != "grows" || g.SlopeBytesPerHour == nil || math.Abs(*g.SlopeBytesPerHour-rate)/rate > 0.15):
			t.Errorf("%s: pid %d %s at %v B/h, truth %.3g B/h", f, main.PID, g.Trend, g.SlopeBytesPerHour, rate)
		case rate == 0 && g.Trend != "flat":
			t.Errorf("%s: pid %d %s, want flat", f, main.PID, g.Trend)
		}
	}
}
