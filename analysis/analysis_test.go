package analysis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/internal/fixtures"
	"github.com/memrec/memrec/internal/jobmodel"
	"github.com/memrec/memrec/storage"
)

const (
	MiB = 1 << 20
	GiB = 1 << 30
	t0  = int64(1_764_430_000_000_000_000)
)

// gen writes runs with known ground truth as JSON Lines.
type gen struct {
	b           strings.Builder
	rng         *rand.Rand
	sampleEvery int // site snapshots: stacks kept on one step in this many (see siteLine)
}

func (g *gen) line(format string, a ...any) { fmt.Fprintf(&g.b, format+"\n", a...) }

// trainCfg is a data-parallel job (every GPU steps together) whose memory
// is jobmodel's H200 job on 80 GiB GPUs; job() is that model, the truth a
// test checks the analysis against.
type trainCfg struct {
	gpus, epochs, stepsPerEpoch int
	stepNS                      int64
	leak                        []int64 // bytes kept per step, by GPU
	noise                       int64   // ± bytes on step-end allocated
	jumpAt                      int     // step of a one-off permanent allocation (0: none)
	jump                        int64
	oomAt                       int // step whose peak GPU 0 cannot hold (0: none)
	noMarks                     bool
	sites                       bool // site snapshots at epoch ends and at the OOM (see siteLine)
}

func (c trainCfg) job() jobmodel.Job {
	j := jobmodel.H200(c.gpus, c.stepsPerEpoch)
	j.Leak, j.JumpAt, j.Jump, j.Total = c.leak, c.jumpAt, c.jump, 80*GiB
	if c.oomAt > 0 {
		// The GPU holds the peak of the step before, not this one's.
		j.Total = j.Peak(0, c.oomAt) + j.Context - 1
	}
	return j
}

// train writes one run of c.job(): ten device samples per step, an
// allocator sample at the peak of each step (0.45 into it) and one at its
// end (with noise), and the marks. The job dies with an OOM at the end of
// the first step whose peak does not fit.
func (g *gen) train(name string, c trainCfg) {
	job := c.job()
	g.line(`{"type":"run","name":%q,"host":"t","start_ns":%d,"interval_ns":10000000,"tags":{"batch_size":"64"}}`, name, t0)
	for i := 0; i < c.gpus; i++ {
		g.line(`{"type":"gpu","gpu":%d,"uuid":"GPU-%d","name":"Test GPU","total_bytes":%d}`, i, i, job.Total)
	}
	torch := func(tt int64, gpu int, a jobmodel.Alloc) {
		g.line(`{"type":"torch","t_ns":%d,"gpu":%d,"pid":%d,"rank":%d,"allocated_bytes":%d,"reserved_bytes":%d,"active_bytes":%d,"inactive_split_bytes":%d,"peak_allocated_bytes":%d,"segments":%d}`,
			tt, gpu, 100+gpu, gpu, a.Allocated, a.Reserved, a.Active, a.InactiveSplit, a.Peak, a.Segments)
	}
	steps := c.epochs * c.stepsPerEpoch
	t := t0 + 1e9
	for s := 0; s < steps; s++ {
		ep := job.Epoch(s)
		if s%c.stepsPerEpoch == 0 && !c.noMarks {
			// after the previous step's end sample (t+1000) and epoch_end (t+2000)
			g.line(`{"type":"mark","t_ns":%d,"kind":"epoch_start","epoch":%d}`, t+3000, ep)
		}
		for k := 0; k < 10; k++ {
			tt := t + 5000 + int64(k)*c.stepNS/10
			for gpu := 0; gpu < c.gpus; gpu++ {
				if k == 5 {
					torch(t+5000+c.stepNS*45/100, gpu, job.At(gpu, s, 0.45))
				}
				g.line(`{"type":"sample","t_ns":%d,"gpu":%d,"used_bytes":%d,"reserved_bytes":1000}`, tt, gpu, job.Used(gpu, s, float64(k)/10, true))
			}
		}
		t += c.stepNS
		if !job.Fits(0, s) {
			g.line(`{"type":"mark","t_ns":%d,"kind":"oom","gpu":0,"pid":100,"text":"CUDA out of memory. Tried to allocate 8.00 GiB\n\n|  PyTorch CUDA memory summary  |"}`, t)
			if c.sites {
				g.siteLine(t-500, 0, "oom", ep, job.Kept(0, s))
			}
			a := job.At(0, s, 0.45)
			g.line(`{"type":"torch","t_ns":%d,"gpu":0,"pid":100,"rank":0,"allocated_bytes":%d,"reserved_bytes":%d,"alloc_retries":3,"ooms":1}`, t+1000, a.Allocated, a.Reserved)
			return
		}
		for gpu := 0; gpu < c.gpus; gpu++ {
			a := job.At(gpu, s, 1)
			if c.noise > 0 {
				a.Allocated += (g.rng.Int64N(2*c.noise) - c.noise) / 512 * 512
				a.Active = a.Allocated
			}
			if !c.noMarks {
				g.line(`{"type":"mark","t_ns":%d,"kind":"step","step":%d,"rank":%d}`, t, s, gpu)
			}
			torch(t+1000, gpu, a)
		}
		if (s+1)%c.stepsPerEpoch == 0 && !c.noMarks {
			g.line(`{"type":"mark","t_ns":%d,"kind":"epoch_end","epoch":%d}`, t+2000, ep)
			for gpu := 0; c.sites && gpu < c.gpus; gpu++ {
				g.siteLine(t+2500, gpu, "epoch_end", ep, job.Kept(gpu, s+1))
			}
		}
	}
}

// siteLine writes a site snapshot of what train allocates: the weights and
// optimizer state (3 GiB at model.py:10), a steady 512 MiB buffer at
// model.py:20, what leaks (train.py:52 in keep) and 1 GiB untracked.
//
// With g.sampleEvery N > 1 the probe kept stacks on one step in N: the
// leak's site holds a Nth of what leaked, the untracked entry the rest.
func (g *gen) siteLine(t int64, gpu int, reason string, epoch int, kept int64) {
	untracked, sampled := int64(GiB), ""
	if n := int64(g.sampleEvery); n > 1 {
		tracked := kept / n
		untracked, kept, sampled = untracked+kept-tracked, tracked, fmt.Sprintf(`"sampled_every":%d,`, n)
	}
	g.line(`{"type":"sites","t_ns":%d,"gpu":%d,"pid":%d,"rank":%d,"reason":%q,"epoch":%d,`+sampled+`"untracked":{"live_bytes":%d,"live_blocks":9},"sites":[`+
		`{"file":"/w/model.py","line":10,"func":"__init__","live_bytes":%d,"live_blocks":40},`+
		`{"file":"/w/model.py","line":20,"func":"buffer","live_bytes":%d,"live_blocks":1},`+
		`{"file":"/w/train.py","line":52,"func":"keep","stack":["train.py:80 step"],"live_bytes":%d,"live_blocks":%d}]}`,
		t, gpu, 100+gpu, gpu, reason, epoch, untracked, int64(3*GiB)-512*MiB, int64(512*MiB), kept, kept/(4*MiB)+1)
}

func analyzeJSONL(t *testing.T, data string) map[string]*Report {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "a.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := db.Import([]storage.Source{{Name: "gen", R: strings.NewReader(data)}}, storage.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Report{}
	for _, r := range runs {
		rep, err := Analyze(db, r, Options{})
		if err != nil {
			t.Fatal(err)
		}
		// The JSON form holds the keys the issue promises.
		b, _ := json.Marshal(rep)
		for _, k := range []string{`"peak_used_bytes"`, `"peak_allocated_bytes"`, `"peak_reserved_bytes"`, `"epochs"`,
			`"leak"`, `"verdict"`, `"slope_bytes_per_step"`, `"slope_bytes_per_hour"`, `"time_to_full_s"`, `"fragmentation"`, `"ooms"`} {
			if !strings.Contains(string(b), k) {
				t.Fatalf("JSON lacks %s", k)
			}
		}
		out[r.Name] = rep
	}
	return out
}

func within(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

// The analysis finds the model's truth: the leak per step and per hour,
// the epoch deltas, the peaks.
func TestLeakOnOneGPUOfTwo(t *testing.T) {
	g := &gen{rng: rand.New(rand.NewPCG(1, 2))}
	c := trainCfg{gpus: 2, epochs: 4, stepsPerEpoch: 60, stepNS: 100e6, leak: []int64{0, 4 * MiB}, noise: 64 << 10}
	g.train("leak", c)
	job := c.job()
	rep := analyzeJSONL(t, g.b.String())["leak"]
	g0, g1 := rep.GPUs[0].Leak, rep.GPUs[1].Leak
	if g0.Verdict != growth.VerdictNoLeak {
		t.Errorf("GPU 0: %+v", g0)
	}
	leak := float64(job.LeakPerStep(1))
	if g1.Verdict != growth.VerdictLeak || g1.SlopeBytesPerStep == nil || !within(*g1.SlopeBytesPerStep, leak, 0.02) {
		t.Fatalf("GPU 1: %+v slope %v, want %v", g1, deref(g1.SlopeBytesPerStep), leak)
	}
	perHour := leak * float64(3600e9/c.stepNS)
	if g1.SlopeBytesPerHour == nil || !within(*g1.SlopeBytesPerHour, perHour, 0.02) || g1.TimeToFullS == nil || *g1.TimeToFullS <= 0 {
		t.Errorf("per hour %v (want %v), time to full %v", deref(g1.SlopeBytesPerHour), perHour, deref(g1.TimeToFullS))
	}
	if g1.Basis != "allocated" || g1.Per != "step" || *g1.CILowBytesPerStep > *g1.SlopeBytesPerStep {
		t.Errorf("%+v", g1)
	}
	if s := g1.Sentence(1); !strings.Contains(s, "GPU 1 grows 4.0 MiB per step") || !strings.Contains(s, "full in about") {
		t.Errorf("sentence %q", s)
	}
	last := c.epochs*c.stepsPerEpoch - 1
	for gpu, gr := range rep.GPUs {
		// Epoch deltas (±noise), once the first epoch has warmed up: from
		// the floor after an epoch's first step to the floor after its
		// last (DeltaStepFloors), one step's leak less than the epoch's.
		for ep := 1; ep < c.epochs; ep++ {
			want := float64(job.EpochDelta(gpu, ep) - job.LeakPerStep(gpu))
			if d := gr.Epochs[ep].DeltaAllocatedBytes; d == nil || math.Abs(float64(*d)-want) > 2*float64(c.noise) {
				t.Errorf("GPU %d epoch %d delta %v, want %v ± noise", gpu, ep, deref(d), want)
			}
		}
		// The peaks: the last step's.
		if p := gr.PeakAllocatedBytes; p == nil || *p != job.Peak(gpu, last) {
			t.Errorf("GPU %d peak allocated %v, want %d", gpu, deref(p), job.Peak(gpu, last))
		}
		if p := gr.PeakUsedBytes; p == nil || *p != job.Used(gpu, last, 0, true) {
			t.Errorf("GPU %d peak used %v, want %d", gpu, deref(p), job.Used(gpu, last, 0, true))
		}
	}
}

func TestNoLeakWithWarmupNoiseAndJump(t *testing.T) {
	g := &gen{rng: rand.New(rand.NewPCG(3, 4))}
	g.train("jump", trainCfg{gpus: 2, epochs: 3, stepsPerEpoch: 80, stepNS: 100e6, noise: 256 << 10, jumpAt: 150, jump: 300 * MiB})
	g.train("plain", trainCfg{gpus: 1, epochs: 3, stepsPerEpoch: 80, stepNS: 100e6, noise: 1 * MiB})
	reps := analyzeJSONL(t, g.b.String())
	for name, rep := range reps {
		for _, gr := range rep.GPUs {
			if gr.Leak.Verdict != growth.VerdictNoLeak {
				t.Errorf("%s GPU %d: %+v (slope %v)", name, gr.GPU, gr.Leak, deref(gr.Leak.SlopeBytesPerStep))
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
	g := &gen{rng: rand.New(rand.NewPCG(5, 6))}
	g.line(`{"type":"run","name":"slow","start_ns":%d,"interval_ns":1000000000}`, t0)
	g.line(`{"type":"gpu","gpu":0,"total_bytes":%d}`, int64(80*GiB))
	rate := 100.0 * MiB / 3600
	for s := 0; s < 3*3600; s++ {
		v := int64(10*GiB) + int64(rate*float64(s))/(2*MiB)*(2*MiB) + (g.rng.Int64N(40)-20)*MiB
		g.line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`, t0+int64(s)*1e9, v)
	}
	rep := analyzeJSONL(t, g.b.String())["slow"]
	l := rep.GPUs[0].Leak
	if l.Verdict != growth.VerdictLeak || l.SlopeBytesPerStep != nil || !within(*l.SlopeBytesPerHour, 100*MiB, 0.05) {
		t.Fatalf("%+v per hour %v", l, deref(l.SlopeBytesPerHour))
	}
	if l.Per != "time" || l.Basis != "device_used" || len(rep.GPUs[0].Intervals) != 10 || len(rep.Notes) < 2 {
		t.Errorf("%+v notes %v", l, rep.Notes)
	}
	// 80 GiB minus about 10.3 GiB at 100 MiB per hour.
	if l.TimeToFullS == nil || !within(*l.TimeToFullS/3600, (80*1024-10*1024-300)/100.0, 0.06) {
		t.Errorf("time to full %v s", deref(l.TimeToFullS))
	}
	if rep.GPUs[0].Fragmentation != nil || rep.GPUs[0].PeakAllocatedBytes != nil {
		t.Error("allocator figures without allocator samples")
	}
}

func TestFragmentationExact(t *testing.T) {
	g := &gen{}
	g.line(`{"type":"run","name":"frag","start_ns":%d}`, t0)
	g.line(`{"type":"gpu","gpu":0,"total_bytes":%d}`, int64(80*GiB))
	for i := 0; i < 100; i++ {
		a := int64(GiB + i*MiB)
		// reserved twice allocated, a quarter of it in split blocks
		g.line(`{"type":"torch","t_ns":%d,"gpu":0,"pid":7,"allocated_bytes":%d,"reserved_bytes":%d,"inactive_split_bytes":%d}`, t0+int64(i)*1e8, a, 2*a, a/2)
		g.line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`, t0+int64(i)*1e8, 2*a+700*MiB)
	}
	rep := analyzeJSONL(t, g.b.String())["frag"]
	f := rep.GPUs[0].Fragmentation
	if f == nil || f.Mean != 0.5 || f.P95 != 0.5 || f.Max != 0.5 || f.Final != 0.5 || f.StuckMean != 0.25 || f.Samples != 100 {
		t.Fatalf("%+v", f)
	}
	if u := rep.GPUs[0].Unseen; u == nil || u.MeanBytes != 700*MiB {
		t.Fatalf("unseen %+v", u)
	}
}

func TestOOMPostMortem(t *testing.T) {
	g := &gen{rng: rand.New(rand.NewPCG(7, 8))}
	c := trainCfg{gpus: 1, epochs: 2, stepsPerEpoch: 30, stepNS: 100e6, leak: []int64{64 * MiB}, oomAt: 45}
	g.train("oom", c)
	job := c.job()
	rep := analyzeJSONL(t, g.b.String())["oom"]
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
	step := job.OOMStep(0, c.epochs*c.stepsPerEpoch)
	wantAlloc := job.At(0, step, 0.45).Allocated
	if o.AllocatedBytes == nil || *o.AllocatedBytes != wantAlloc || o.UsedBytes == nil || o.Epoch == nil || *o.Epoch != job.Epoch(step) {
		t.Errorf("allocated %v want %d, used %v, epoch %v want %d", deref(o.AllocatedBytes), wantAlloc, deref(o.UsedBytes), deref(o.Epoch), job.Epoch(step))
	}
	if o.LargestGrowth == nil || *o.LargestGrowth != job.LeakPerStep(0) || o.Fragmentation == nil {
		t.Errorf("growth %v frag %v", deref(o.LargestGrowth), o.Fragmentation)
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
		if _, err := db.Import([]storage.Source{{Name: f, R: bytes.NewReader(fixtures.Read(t, f))}}, storage.ImportOptions{}); err != nil {
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
		t.Errorf("leak run: %+v %v", l, deref(l.SlopeBytesPerStep))
	}
	if u := rep.GPUs[0].Unseen; u == nil || u.MeanBytes < 760*MiB || u.MeanBytes > 775*MiB {
		t.Errorf("unseen %+v", u)
	}
	if p := rep.GPUs[0].PeakUsedBytes; p == nil || math.Round(float64(*p)/MiB) != 3603 {
		t.Errorf("peak used %v bytes, want 3603 MiB", deref(p))
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
	g := &gen{}
	g.line(`{"type":"run","name":"empty","start_ns":%d}`, t0)
	g.line(`{"type":"gpu","gpu":0}`)
	g.line(`{"type":"run","name":"short","start_ns":%d}`, t0)
	g.line(`{"type":"gpu","gpu":0}`)
	g.line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":5}`, t0+1)
	reps := analyzeJSONL(t, g.b.String())
	for _, name := range []string{"empty", "short"} {
		if v := reps[name].GPUs[0].Leak.Verdict; v != growth.VerdictInsufficient {
			t.Errorf("%s: %v", name, v)
		}
	}
	if !strings.Contains(strings.Join(reps["empty"].Notes, " "), "no samples") {
		t.Error(reps["empty"].Notes)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestStepPeakInsideTheStep: a step's peak is the highest peak reported
// by a sample inside the step, up to its own mark (whose sample, dated
// the mark's nanosecond, reports it); a sample after the last mark belongs
// to no step, and a step without a sample of its own has no peak. The
// steps here peak at 1 GiB, read by the sample at each mark, with timer
// samples inside the steps reporting 900 MiB so far; the last step (9)
// shares its predecessor's sample, and after it the job holds 100 MiB.
func TestStepPeakInsideTheStep(t *testing.T) {
	g := &gen{}
	g.line(`{"type":"run","name":"peaks","start_ns":%d}`, t0)
	g.line(`{"type":"gpu","gpu":0,"total_bytes":%d}`, int64(80*GiB))
	torch := func(t int64, peak int64) {
		g.line(`{"type":"torch","t_ns":%d,"gpu":0,"pid":7,"allocated_bytes":%d,"reserved_bytes":%d,"peak_allocated_bytes":%d}`, t, 50*MiB, 2*GiB, peak)
	}
	for i := int64(0); i < 10; i++ {
		mark := t0 + (i+1)*1e9
		if i < 9 {
			torch(mark-5e8, 900*MiB) // inside step i, before its end
		}
		g.line(`{"type":"mark","t_ns":%d,"kind":"step","step":%d}`, mark, i)
		if i < 9 {
			torch(mark, GiB)
		}
	}
	torch(t0+105e8, 100*MiB) // after the loop
	torch(t0+110e8, 100*MiB)
	rep := analyzeJSONL(t, g.b.String())["peaks"]
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
	g := &gen{}
	g.line(`{"type":"run","name":"cpu","start_ns":%d}`, t0)
	g.line(`{"type":"gpu","gpu":0,"total_bytes":%d}`, int64(80*GiB))
	for i := range 20 {
		g.line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`, t0+int64(i)*1e8, 600*MiB)
	}
	for range 2 { // from two moments of one process: one note
		g.line(`{"type":"mark","t_ns":%d,"kind":"probe","pid":7,"text":"torch 1.13.1 without CUDA: no allocator view"}`, t0+5e8)
	}
	rep := analyzeJSONL(t, g.b.String())["cpu"]
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
	g := &gen{}
	g.line(`{"type":"run","name":"own","start_ns":%d}`, t0)
	g.line(`{"type":"gpu","gpu":0,"total_bytes":%d}`, int64(80*GiB))
	g.line(`{"type":"mark","t_ns":%d,"kind":"probe","pid":7,"text":"torch 2.11.0 without CUDA: no allocator view"}`, t0+1)
	for i := range 20 {
		g.line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`, t0+int64(i)*1e8, 600*MiB)
		g.line(`{"type":"torch","t_ns":%d,"gpu":0,"pid":7,"allocated_bytes":%d,"reserved_bytes":%d}`, t0+int64(i)*1e8+7, 100*MiB, 200*MiB)
	}
	g.line(`{"type":"mark","t_ns":%d,"kind":"probe","pid":7,"text":"the job records the allocator's history itself: no allocator trace, its history left as it sets it"}`, t0+5e8)
	rep := analyzeJSONL(t, g.b.String())["own"]
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
