// Package analysistest writes runs with a known truth as JSON Lines, and
// imports and analyses them, for the tests of package analysis and of the
// packages built on it (compare). The truth is internal/jobmodel's job:
// a test checks the analysis against the model the lines came from.
//
// It imports storage and jobmodel, never analysis, so that analysis's own
// tests (package analysis) can use it without an import cycle; Analyze
// takes the analysis to run as a function.
package analysistest

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/internal/jobmodel"
	"github.com/memrec/memrec/storage"
)

const (
	MiB = 1 << 20
	GiB = 1 << 30
	// Start is when the runs Gen writes start (ns since the epoch).
	Start = int64(1_764_430_000_000_000_000)
)

// Gen writes runs with known ground truth as JSON Lines. Its zero value
// writes runs without noise (Train's Noise needs Rand).
type Gen struct {
	b           strings.Builder
	Rand        *rand.Rand
	SampleEvery int // site snapshots: stacks kept on one step in this many (see SiteLine)
}

// Line writes one line.
func (g *Gen) Line(format string, a ...any) { fmt.Fprintf(&g.b, format+"\n", a...) }

// String is every line written so far.
func (g *Gen) String() string { return g.b.String() }

// Train is a data-parallel job (every GPU steps together) whose memory is
// jobmodel's H200 job on 80 GiB GPUs; Job is that model, the truth a test
// checks the analysis against.
type Train struct {
	GPUs, Epochs, StepsPerEpoch int
	StepNS                      int64
	Leak                        []int64 // bytes kept per step, by GPU
	Noise                       int64   // ± bytes on step-end allocated
	JumpAt                      int     // step of a one-off permanent allocation (0: none)
	Jump                        int64
	OOMAt                       int // step whose peak GPU 0 cannot hold (0: none)
	NoMarks                     bool
	Sites                       bool // site snapshots at epoch ends and at the OOM (see SiteLine)
}

// Job is the model c's lines are written from.
func (c Train) Job() jobmodel.Job {
	j := jobmodel.H200(c.GPUs, c.StepsPerEpoch)
	j.Leak, j.JumpAt, j.Jump, j.Total = c.Leak, c.JumpAt, c.Jump, 80*GiB
	if c.OOMAt > 0 {
		// The GPU holds the peak of the step before, not this one's.
		j.Total = j.Peak(0, c.OOMAt) + j.Context - 1
	}
	return j
}

// Train writes one run of c.Job(): ten device samples per step, an
// allocator sample at the peak of each step (0.45 into it) and one at its
// end (with noise), and the marks. The job dies with an OOM at the end of
// the first step whose peak does not fit.
func (g *Gen) Train(name string, c Train) {
	job := c.Job()
	g.Line(`{"type":"run","name":%q,"host":"t","start_ns":%d,"interval_ns":10000000,"tags":{"batch_size":"64"}}`, name, Start)
	for i := 0; i < c.GPUs; i++ {
		g.Line(`{"type":"gpu","gpu":%d,"uuid":"GPU-%d","name":"Test GPU","total_bytes":%d}`, i, i, job.Total)
	}
	torch := func(tt int64, gpu int, a jobmodel.Alloc) {
		g.Line(`{"type":"torch","t_ns":%d,"gpu":%d,"pid":%d,"rank":%d,"allocated_bytes":%d,"reserved_bytes":%d,"active_bytes":%d,"inactive_split_bytes":%d,"peak_allocated_bytes":%d,"segments":%d}`,
			tt, gpu, 100+gpu, gpu, a.Allocated, a.Reserved, a.Active, a.InactiveSplit, a.Peak, a.Segments)
	}
	steps := c.Epochs * c.StepsPerEpoch
	t := Start + 1e9
	for s := 0; s < steps; s++ {
		ep := job.Epoch(s)
		if s%c.StepsPerEpoch == 0 && !c.NoMarks {
			// after the previous step's end sample (t+1000) and epoch_end (t+2000)
			g.Line(`{"type":"mark","t_ns":%d,"kind":"epoch_start","epoch":%d}`, t+3000, ep)
		}
		for k := 0; k < 10; k++ {
			tt := t + 5000 + int64(k)*c.StepNS/10
			for gpu := 0; gpu < c.GPUs; gpu++ {
				if k == 5 {
					torch(t+5000+c.StepNS*45/100, gpu, job.At(gpu, s, 0.45))
				}
				g.Line(`{"type":"sample","t_ns":%d,"gpu":%d,"used_bytes":%d,"reserved_bytes":1000}`, tt, gpu, job.Used(gpu, s, float64(k)/10, true))
			}
		}
		t += c.StepNS
		if !job.Fits(0, s) {
			g.Line(`{"type":"mark","t_ns":%d,"kind":"oom","gpu":0,"pid":100,"text":"CUDA out of memory. Tried to allocate 8.00 GiB\n\n|  PyTorch CUDA memory summary  |"}`, t)
			if c.Sites {
				g.SiteLine(t-500, 0, "oom", ep, job.Kept(0, s))
			}
			a := job.At(0, s, 0.45)
			g.Line(`{"type":"torch","t_ns":%d,"gpu":0,"pid":100,"rank":0,"allocated_bytes":%d,"reserved_bytes":%d,"alloc_retries":3,"ooms":1}`, t+1000, a.Allocated, a.Reserved)
			return
		}
		for gpu := 0; gpu < c.GPUs; gpu++ {
			a := job.At(gpu, s, 1)
			if c.Noise > 0 {
				a.Allocated += (g.Rand.Int64N(2*c.Noise) - c.Noise) / 512 * 512
				a.Active = a.Allocated
			}
			if !c.NoMarks {
				g.Line(`{"type":"mark","t_ns":%d,"kind":"step","step":%d,"rank":%d}`, t, s, gpu)
			}
			torch(t+1000, gpu, a)
		}
		if (s+1)%c.StepsPerEpoch == 0 && !c.NoMarks {
			g.Line(`{"type":"mark","t_ns":%d,"kind":"epoch_end","epoch":%d}`, t+2000, ep)
			for gpu := 0; c.Sites && gpu < c.GPUs; gpu++ {
				g.SiteLine(t+2500, gpu, "epoch_end", ep, job.Kept(gpu, s+1))
			}
		}
	}
}

// SiteLine writes a site snapshot of what Train allocates: the weights and
// optimizer state (3 GiB at model.py:10), a steady 512 MiB buffer at
// model.py:20, what leaks (train.py:52 in keep) and 1 GiB untracked.
//
// With g.SampleEvery N > 1 the probe kept stacks on one step in N: the
// leak's site holds a Nth of what leaked, the untracked entry the rest.
func (g *Gen) SiteLine(t int64, gpu int, reason string, epoch int, kept int64) {
	untracked, sampled := int64(GiB), ""
	if n := int64(g.SampleEvery); n > 1 {
		tracked := kept / n
		untracked, kept, sampled = untracked+kept-tracked, tracked, fmt.Sprintf(`"sampled_every":%d,`, n)
	}
	g.Line(`{"type":"sites","t_ns":%d,"gpu":%d,"pid":%d,"rank":%d,"reason":%q,"epoch":%d,`+sampled+`"untracked":{"live_bytes":%d,"live_blocks":9},"sites":[`+
		`{"file":"/w/model.py","line":10,"func":"__init__","live_bytes":%d,"live_blocks":40},`+
		`{"file":"/w/model.py","line":20,"func":"buffer","live_bytes":%d,"live_blocks":1},`+
		`{"file":"/w/train.py","line":52,"func":"keep","stack":["train.py:80 step"],"live_bytes":%d,"live_blocks":%d}]}`,
		t, gpu, 100+gpu, gpu, reason, epoch, untracked, int64(3*GiB)-512*MiB, int64(512*MiB), kept, kept/(4*MiB)+1)
}

// WatchedRun writes jobmodel's job j for steps steps as a watched run:
// at every step's end a device sample and an allocator sample whose torch
// line carries the budget of jobmodel.Split (the truth), with the dtype,
// optimizer and autocast given. A rank per GPU. As the probe does, the
// step's mark and its allocator sample share a time.
func WatchedRun(j jobmodel.Job, steps int, dtype, autocast string, watch bool) string {
	var g Gen
	g.Line(`{"type":"run","name":"w","host":"t","start_ns":%d,"interval_ns":10000000,"tags":{"batch_size":"64"}}`, Start)
	for i := 0; i < j.GPUs; i++ {
		g.Line(`{"type":"gpu","gpu":%d,"name":"Test GPU","total_bytes":%d}`, i, j.Total)
	}
	t := Start + 1e9
	for s := 0; s < steps; s++ {
		t += 100e6
		for gpu := 0; gpu < j.GPUs; gpu++ {
			a, b := j.At(gpu, s, 1), j.Split(s, 1)
			g.Line(`{"type":"mark","t_ns":%d,"kind":"step","step":%d,"rank":%d}`, t, s, gpu)
			g.Line(`{"type":"sample","t_ns":%d,"gpu":%d,"used_bytes":%d,"reserved_bytes":1000}`, t+1000, gpu, j.Used(gpu, s, 1, true))
			budget := ""
			if watch {
				budget = fmt.Sprintf(`,"params_bytes":%d,"grads_bytes":%d,"optimizer_bytes":%d,"buffers_bytes":%d,"params":%d,"trainable":%d,"autocast":%s,"optimizer":"AdamW","optimizer_state":"exp_avg,exp_avg_sq","dtype":%q`,
					b.Params, b.Grads, b.State, b.Buffers, b.ParamCount, b.ParamCount, autocast, dtype)
			}
			g.Line(`{"type":"torch","t_ns":%d,"gpu":%d,"pid":%d,"rank":%d,"allocated_bytes":%d,"reserved_bytes":%d,"active_bytes":%d,"inactive_split_bytes":%d,"peak_allocated_bytes":%d,"segments":%d%s}`,
				t, gpu, 100+gpu, gpu, a.Allocated, a.Reserved, a.Active, a.InactiveSplit, a.Peak, a.Segments, budget)
		}
	}
	return g.String()
}

// Job is jobmodel's H200 job on gpus GPUs of 80 GiB, 20 steps an epoch.
func Job(gpus int) jobmodel.Job {
	j := jobmodel.H200(gpus, 20)
	j.Total = 80 * GiB
	return j
}

// Analyze imports data into a new database and runs analyze on each of its
// runs, by name; a failure ends the test.
func Analyze[R any](t testing.TB, data string, analyze func(*storage.DB, storage.Run) (R, error)) map[string]R {
	t.Helper()
	return AnalyzeFiles(t, map[string][]byte{"gen": []byte(data)}, analyze)
}

// AnalyzeFiles imports JSON Lines inputs (by file name) into one new
// database and runs analyze on each run, by run name.
func AnalyzeFiles[R any](t testing.TB, inputs map[string][]byte, analyze func(*storage.DB, storage.Run) (R, error)) map[string]R {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "a.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var srcs []jsonl.Source
	for name, data := range inputs {
		srcs = append(srcs, jsonl.Source{Name: name, R: bytes.NewReader(data)})
	}
	runs, err := jsonl.Import(db, srcs, jsonl.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]R{}
	for _, r := range runs {
		rep, err := analyze(db, r)
		if err != nil {
			t.Fatal(err)
		}
		out[r.Name] = rep
	}
	return out
}

// Within reports whether got is within rel (a share) of want.
func Within(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

// Deref is *p, or nil for a nil p: a pointer field printed as its value.
func Deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
