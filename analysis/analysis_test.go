package analysis

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/analysistest"
	"github.com/memrec/memrec/testsupport/fixtures"
)

const (
	MiB = 1 << 20
	GiB = 1 << 30
	t0  = analysistest.Start
)

func analyzeJSONL(t *testing.T, data string) map[string]*Report {
	t.Helper()
	return analysistest.Analyze(t, data, func(db *storage.DB, r storage.Run) (*Report, error) {
		rep, err := Analyze(db, r, Options{})
		if err != nil {
			return nil, err
		}
		// The JSON form holds the keys its readers rely on.
		b, _ := json.Marshal(rep)
		for _, k := range []string{`"peak_used_bytes"`, `"peak_allocated_bytes"`, `"peak_reserved_bytes"`, `"epochs"`,
			`"leak"`, `"verdict"`, `"slope_bytes_per_step"`, `"slope_bytes_per_hour"`, `"time_to_full_s"`, `"fragmentation"`, `"ooms"`} {
			if !strings.Contains(string(b), k) {
				t.Fatalf("JSON lacks %s", k)
			}
		}
		return rep, nil
	})
}

// The analysis finds the model's truth: the leak per step and per hour,
// the epoch deltas, the peaks.
func TestLeakOnOneGPUOfTwo(t *testing.T) {
	g := &analysistest.Gen{Rand: rand.New(rand.NewPCG(1, 2))}
	c := analysistest.Train{GPUs: 2, Epochs: 4, StepsPerEpoch: 60, StepNS: 100e6, Leak: []int64{0, 4 * MiB}, Noise: 64 << 10}
	g.Train("leak", c)
	job := c.Job()
	rep := analyzeJSONL(t, g.String())["leak"]
	g0, g1 := rep.GPUs[0].Leak, rep.GPUs[1].Leak
	if g0.Verdict != growth.VerdictNoLeak {
		t.Errorf("GPU 0: %+v", g0)
	}
	leak := float64(job.LeakPerStep(1))
	if g1.Verdict != growth.VerdictLeak || g1.SlopeBytesPerStep == nil || !analysistest.Within(*g1.SlopeBytesPerStep, leak, 0.02) {
		t.Fatalf("GPU 1: %+v slope %v, want %v", g1, analysistest.Deref(g1.SlopeBytesPerStep), leak)
	}
	perHour := leak * float64(3600e9/c.StepNS)
	if g1.SlopeBytesPerHour == nil || !analysistest.Within(*g1.SlopeBytesPerHour, perHour, 0.02) || g1.TimeToFullS == nil || *g1.TimeToFullS <= 0 {
		t.Errorf("per hour %v (want %v), time to full %v", analysistest.Deref(g1.SlopeBytesPerHour), perHour, analysistest.Deref(g1.TimeToFullS))
	}
	if g1.Basis != "allocated" || g1.Per != "step" || *g1.CILowBytesPerStep > *g1.SlopeBytesPerStep {
		t.Errorf("%+v", g1)
	}
	if s := g1.Sentence(1); !strings.Contains(s, "GPU 1 grows 4.0 MiB per step") || !strings.Contains(s, "full in about") {
		t.Errorf("sentence %q", s)
	}
	last := c.Epochs*c.StepsPerEpoch - 1
	for gpu, gr := range rep.GPUs {
		// Epoch deltas (±noise), once the first epoch has warmed up: from
		// the floor after an epoch's first step to the floor after its
		// last (DeltaStepFloors), one step's leak less than the epoch's.
		for ep := 1; ep < c.Epochs; ep++ {
			want := float64(job.EpochDelta(gpu, ep) - job.LeakPerStep(gpu))
			if d := gr.Epochs[ep].DeltaAllocatedBytes; d == nil || math.Abs(float64(*d)-want) > 2*float64(c.Noise) {
				t.Errorf("GPU %d epoch %d delta %v, want %v ± noise", gpu, ep, analysistest.Deref(d), want)
			}
		}
		// The peaks: the last step's.
		if p := gr.PeakAllocatedBytes; p == nil || *p != job.Peak(gpu, last) {
			t.Errorf("GPU %d peak allocated %v, want %d", gpu, analysistest.Deref(p), job.Peak(gpu, last))
		}
		if p := gr.PeakUsedBytes; p == nil || *p != job.Used(gpu, last, 0, true) {
			t.Errorf("GPU %d peak used %v, want %d", gpu, analysistest.Deref(p), job.Used(gpu, last, 0, true))
		}
	}
}

func TestNoLeakWithWarmupNoiseAndJump(t *testing.T) {
	g := &analysistest.Gen{Rand: rand.New(rand.NewPCG(3, 4))}
	g.Train("jump", analysistest.Train{GPUs: 2, Epochs: 3, StepsPerEpoch: 80, StepNS: 100e6, Noise: 256 << 10, JumpAt: 150, Jump: 300 * MiB})
	g.Train("plain", analysistest.Train{GPUs: 1, Epochs: 3, StepsPerEpoch: 80, StepNS: 100e6, Noise: 1 * MiB})
	reps := analyzeJSONL(t, g.String())
	for name, rep := range reps {
		for _, gr := range rep.GPUs {
			if gr.Leak.Verdict != growth.VerdictNoLeak {
				t.Errorf("%s GPU %d: %+v (slope %v)", name, gr.GPU, gr.Leak, analysistest.Deref(gr.Leak.SlopeBytesPerStep))
			}
		}
	}
	if reps["jump"].GPUs[0].Leak.JumpsRemoved != 1 {
		t.Errorf("jump not set aside: %+v", reps["jump"].GPUs[0].Leak)
	}
}

func TestSlowLeakOverHoursWithoutMarks(t *testing.T) {
	// Three hours of device samples at 1 Hz, no marks, no probe: memory
	// grows 100 MiB per hour in whole 2 MiB pages, with ±20 MiB of noise.
	g := &analysistest.Gen{Rand: rand.New(rand.NewPCG(5, 6))}
	g.Line(`{"type":"run","name":"slow","start_ns":%d,"interval_ns":1000000000}`, t0)
	g.Line(`{"type":"gpu","gpu":0,"total_bytes":%d}`, int64(80*GiB))
	rate := 100.0 * MiB / 3600
	for s := 0; s < 3*3600; s++ {
		v := int64(10*GiB) + int64(rate*float64(s))/(2*MiB)*(2*MiB) + (g.Rand.Int64N(40)-20)*MiB
		g.Line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`, t0+int64(s)*1e9, v)
	}
	rep := analyzeJSONL(t, g.String())["slow"]
	l := rep.GPUs[0].Leak
	if l.Verdict != growth.VerdictLeak || l.SlopeBytesPerStep != nil || !analysistest.Within(*l.SlopeBytesPerHour, 100*MiB, 0.05) {
		t.Fatalf("%+v per hour %v", l, analysistest.Deref(l.SlopeBytesPerHour))
	}
	if l.Per != "time" || l.Basis != "device_used" || len(rep.GPUs[0].Intervals) != 10 || len(rep.Notes) < 2 {
		t.Errorf("%+v notes %v", l, rep.Notes)
	}
	// 80 GiB minus about 10.3 GiB at 100 MiB per hour.
	if l.TimeToFullS == nil || !analysistest.Within(*l.TimeToFullS/3600, (80*1024-10*1024-300)/100.0, 0.06) {
		t.Errorf("time to full %v s", analysistest.Deref(l.TimeToFullS))
	}
	if rep.GPUs[0].Fragmentation != nil || rep.GPUs[0].PeakAllocatedBytes != nil {
		t.Error("allocator figures without allocator samples")
	}
}

func TestFragmentationExact(t *testing.T) {
	g := &analysistest.Gen{}
	g.Line(`{"type":"run","name":"frag","start_ns":%d}`, t0)
	g.Line(`{"type":"gpu","gpu":0,"total_bytes":%d}`, int64(80*GiB))
	for i := 0; i < 100; i++ {
		a := int64(GiB + i*MiB)
		// reserved twice allocated, a quarter of it in split blocks
		g.Line(`{"type":"torch","t_ns":%d,"gpu":0,"pid":7,"allocated_bytes":%d,"reserved_bytes":%d,"inactive_split_bytes":%d}`, t0+int64(i)*1e8, a, 2*a, a/2)
		g.Line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`, t0+int64(i)*1e8, 2*a+700*MiB)
	}
	rep := analyzeJSONL(t, g.String())["frag"]
	f := rep.GPUs[0].Fragmentation
	if f == nil || f.Mean != 0.5 || f.P95 != 0.5 || f.Max != 0.5 || f.Final != 0.5 || f.StuckMean != 0.25 || f.Samples != 100 {
		t.Fatalf("%+v", f)
	}
	if u := rep.GPUs[0].Unseen; u == nil || u.MeanBytes != 700*MiB {
		t.Fatalf("unseen %+v", u)
	}
}

func TestOOMPostMortem(t *testing.T) {
	g := &analysistest.Gen{Rand: rand.New(rand.NewPCG(7, 8))}
	c := analysistest.Train{GPUs: 1, Epochs: 2, StepsPerEpoch: 30, StepNS: 100e6, Leak: []int64{64 * MiB}, OOMAt: 45}
	g.Train("oom", c)
	job := c.Job()
	rep := analyzeJSONL(t, g.String())["oom"]
	gr := rep.GPUs[0]
	if len(gr.OOMs) != 1 {
		t.Fatalf("ooms %+v", gr.OOMs)
	}
	o := gr.OOMs[0]
	if o.Message != "CUDA out of memory. Tried to allocate 8.00 GiB" || !strings.Contains(o.Summary, "memory summary") {
		t.Errorf("%q / %q", o.Message, o.Summary)
	}
	// Just before the OOM: the sample at the peak of the step that did not
	// fit.
	step := job.OOMStep(0, c.Epochs*c.StepsPerEpoch)
	wantAlloc := job.At(0, step, 0.45).Allocated
	if o.AllocatedBytes == nil || *o.AllocatedBytes != wantAlloc || o.UsedBytes == nil || o.Epoch == nil || *o.Epoch != job.Epoch(step) {
		t.Errorf("allocated %v want %d, used %v, epoch %v want %d", analysistest.Deref(o.AllocatedBytes), wantAlloc, analysistest.Deref(o.UsedBytes), analysistest.Deref(o.Epoch), job.Epoch(step))
	}
	if o.LargestGrowth == nil || *o.LargestGrowth != job.LeakPerStep(0) || o.Fragmentation == nil {
		t.Errorf("growth %v frag %v", analysistest.Deref(o.LargestGrowth), o.Fragmentation)
	}
	// The open epoch (no epoch_end: the job died) is kept and flagged.
	if last := gr.Epochs[len(gr.Epochs)-1]; !last.Open {
		t.Errorf("last epoch %+v", last)
	}
}

func TestRealRuns(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "r.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, f := range []string{fixtures.LeakRun, fixtures.CleanRun} {
		if _, err := jsonl.Import(db, []jsonl.Source{{Name: f, R: bytes.NewReader(fixtures.Read(t, f))}}, jsonl.ImportOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	leakRun, _ := db.Run("real-resnet18-bs64-leak")
	rep, err := Analyze(db, leakRun, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := rep.GPUs[0].Leak
	// The planted leak: 64 × 1000 float32 logits kept per step.
	if l.Verdict != growth.VerdictLeak || *l.SlopeBytesPerStep != 256000 {
		t.Errorf("leak run: %+v %v", l, analysistest.Deref(l.SlopeBytesPerStep))
	}
	if u := rep.GPUs[0].Unseen; u == nil || u.MeanBytes < 760*MiB || u.MeanBytes > 775*MiB {
		t.Errorf("unseen %+v", u)
	}
	if p := rep.GPUs[0].PeakUsedBytes; p == nil || math.Round(float64(*p)/MiB) != 3603 {
		t.Errorf("peak used %v bytes, want 3603 MiB", analysistest.Deref(p))
	}
	cleanRun, _ := db.Run("real-resnet18-bs128")
	rep, _ = Analyze(db, cleanRun, Options{})
	if v := rep.GPUs[0].Leak.Verdict; v != growth.VerdictNoLeak {
		t.Errorf("clean run: %v", rep.GPUs[0].Leak)
	}
	// Step-end allocated is flat after epoch 0 (the fixture's README), and
	// epoch 0 is the warm-up.
	if ep := rep.GPUs[0].Epochs; len(ep) != 4 || !ep[0].Warmup {
		t.Errorf("epochs %+v", ep)
	} else {
		for _, e := range ep[1:] {
			if e.Warmup || e.Open || e.DeltaAllocatedBytes == nil || *e.DeltaAllocatedBytes != 0 || e.DeltaBasis != DeltaStepFloors {
				t.Errorf("epoch %d: Δ allocated %v (%s), want 0 between step floors", e.Epoch, deref64(e.DeltaAllocatedBytes), e.DeltaBasis)
			}
		}
	}
}

func TestEmptyAndInsufficient(t *testing.T) {
	g := &analysistest.Gen{}
	g.Line(`{"type":"run","name":"empty","start_ns":%d}`, t0)
	g.Line(`{"type":"gpu","gpu":0}`)
	g.Line(`{"type":"run","name":"short","start_ns":%d}`, t0)
	g.Line(`{"type":"gpu","gpu":0}`)
	g.Line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":5}`, t0+1)
	reps := analyzeJSONL(t, g.String())
	for _, name := range []string{"empty", "short"} {
		if v := reps[name].GPUs[0].Leak.Verdict; v != growth.VerdictInsufficient {
			t.Errorf("%s: %v", name, v)
		}
	}
	if !strings.Contains(strings.Join(reps["empty"].Notes, " "), "no samples") {
		t.Error(reps["empty"].Notes)
	}
}

// TestStepPeakInsideTheStep: a step's peak is the highest peak reported
// by a sample inside the step, up to its own mark (whose sample, dated
// the mark's nanosecond, reports it); a sample after the last mark belongs
// to no step, and a step without a sample of its own has no peak. The
// steps here peak at 1 GiB, read by the sample at each mark, with timer
// samples inside the steps reporting 900 MiB so far; the last step (9)
// shares its predecessor's sample, and after it the job holds 100 MiB.
func TestStepPeakInsideTheStep(t *testing.T) {
	g := &analysistest.Gen{}
	g.Line(`{"type":"run","name":"peaks","start_ns":%d}`, t0)
	g.Line(`{"type":"gpu","gpu":0,"total_bytes":%d}`, int64(80*GiB))
	torch := func(t int64, peak int64) {
		g.Line(`{"type":"torch","t_ns":%d,"gpu":0,"pid":7,"allocated_bytes":%d,"reserved_bytes":%d,"peak_allocated_bytes":%d}`, t, 50*MiB, 2*GiB, peak)
	}
	for i := int64(0); i < 10; i++ {
		mark := t0 + (i+1)*1e9
		if i < 9 {
			torch(mark-5e8, 900*MiB) // inside step i, before its end
		}
		g.Line(`{"type":"mark","t_ns":%d,"kind":"step","step":%d}`, mark, i)
		if i < 9 {
			torch(mark, GiB)
		}
	}
	torch(t0+105e8, 100*MiB) // after the loop
	torch(t0+110e8, 100*MiB)
	rep := analyzeJSONL(t, g.String())["peaks"]
	peaks := rep.GPUs[0].StepPeaks
	if len(peaks) != 9 {
		t.Fatalf("%d step peaks, want 9 (steps 0-8): %+v", len(peaks), peaks)
	}
	for i, p := range peaks {
		if p.X != float64(i) || p.Bytes != GiB {
			t.Errorf("step %v: peak %d, want step %d at %d", p.X, p.Bytes, i, int64(GiB))
		}
	}
}

// TestProbeNoteReplacesNoProbe: a probe that had no allocator view (torch
// without CUDA) says why in a "probe" mark, and the run's note says that
// instead of "no probe"; the note is not one of the run's events.
func TestProbeNoteReplacesNoProbe(t *testing.T) {
	g := &analysistest.Gen{}
	g.Line(`{"type":"run","name":"cpu","start_ns":%d}`, t0)
	g.Line(`{"type":"gpu","gpu":0,"total_bytes":%d}`, int64(80*GiB))
	for i := range 20 {
		g.Line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`, t0+int64(i)*1e8, 600*MiB)
	}
	for range 2 { // from two moments of one process: one note
		g.Line(`{"type":"mark","t_ns":%d,"kind":"probe","pid":7,"text":"torch 1.13.1 without CUDA: no allocator view"}`, t0+5e8)
	}
	rep := analyzeJSONL(t, g.String())["cpu"]
	var said, noProbe int
	for _, n := range rep.Notes {
		if strings.Contains(n, "the probe says torch 1.13.1 without CUDA: no allocator view") {
			said++
		}
		if strings.Contains(n, "no probe") {
			noProbe++
		}
	}
	if said != 1 || noProbe != 0 || len(rep.Events) != 0 || rep.Marks.Events != 0 {
		t.Errorf("notes %q, events %+v", rep.Notes, rep.Events)
	}
}

// TestProbeSaysWhyThereIsNoAllocatorTrace: with allocator samples, the
// probe's note on its allocator trace (the job recorded the history
// itself) is one of the run's notes; a note from before CUDA started (no
// allocator view yet) is not, the samples having come.
func TestProbeSaysWhyThereIsNoAllocatorTrace(t *testing.T) {
	g := &analysistest.Gen{}
	g.Line(`{"type":"run","name":"own","start_ns":%d}`, t0)
	g.Line(`{"type":"gpu","gpu":0,"total_bytes":%d}`, int64(80*GiB))
	g.Line(`{"type":"mark","t_ns":%d,"kind":"probe","pid":7,"text":"torch 2.11.0 without CUDA: no allocator view"}`, t0+1)
	for i := range 20 {
		g.Line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`, t0+int64(i)*1e8, 600*MiB)
		g.Line(`{"type":"torch","t_ns":%d,"gpu":0,"pid":7,"allocated_bytes":%d,"reserved_bytes":%d}`, t0+int64(i)*1e8+7, 100*MiB, 200*MiB)
	}
	g.Line(`{"type":"mark","t_ns":%d,"kind":"probe","pid":7,"text":"the job records the allocator's history itself: no allocator trace, its history left as it sets it"}`, t0+5e8)
	rep := analyzeJSONL(t, g.String())["own"]
	var trace, view int
	for _, n := range rep.Notes {
		if n == "the probe says the job records the allocator's history itself: no allocator trace, its history left as it sets it" {
			trace++
		}
		if strings.Contains(n, "no allocator view") {
			view++
		}
	}
	if trace != 1 || view != 0 {
		t.Errorf("notes %q", rep.Notes)
	}
}
