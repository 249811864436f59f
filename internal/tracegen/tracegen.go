// Package tracegen generates synthetic training runs, with known ground
// truth, for benchmarks and tests: as memrec's JSON Lines (Write) or as
// calls on any Sink (Generate), which lets a benchmark write hours of run
// straight into a database.
//
// A generated run looks like a data-parallel job recorded by memrec: one
// NVML tick every Interval (one timestamp per tick, with jitter), a device
// sample and one process sample per GPU on each tick, PyTorch allocator
// samples from each rank's probe on its own timer, and epoch and step marks
// from every rank. Memory warms up during the first epoch (optimizer state
// at the first step, the allocator cache growing), then holds steady with
// the sawtooth of activations inside each step; a per-GPU leak adds a fixed
// number of bytes at each step. The memory by step is internal/jobmodel's.
//
// Mixes name configurations that stress the codec differently; see Mix.
package tracegen

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/memrec/memrec/internal/jobmodel"
	"github.com/memrec/memrec/storage/wire"
)

// Config describes a run to generate. Zero fields take the defaults of
// Default.
type Config struct {
	Name          string
	Start         time.Time
	GPUs          int
	Interval      time.Duration // NVML tick
	Duration      time.Duration
	Jitter        time.Duration // uniform ± jitter of each tick
	TorchInterval time.Duration // probe timer; 0 = no allocator samples
	StepTime      time.Duration // 0 = no step marks
	EpochSteps    int           // steps per epoch; 0 = no epoch marks
	Procs         bool          // per-process samples
	LeakPerStep   []int64       // bytes kept per step, by GPU (missing = 0)
	// StepEndTorch adds an allocator sample at every step end that carries
	// the step's peak, which the probe then resets: timer samples report
	// the peak since the last step end (equal to allocated while the
	// forward pass still grows).
	StepEndTorch bool
	// CacheFlushSteps empties the allocator cache every that many steps
	// (torch.cuda.empty_cache): reserved and the device's used memory drop,
	// then grow back during the next step. 0 = never.
	CacheFlushSteps int
	Seed            uint64
	Tags            map[string]string
}

// Default is an 8-GPU, 100 Hz, 10-minute run: about a million lines. It is
// the "steady" mix.
func Default() Config {
	return Config{
		Name: "gen", Start: time.Unix(1764430000, 0), GPUs: 8, Interval: 10 * time.Millisecond,
		Duration: 10 * time.Minute, Jitter: 50 * time.Microsecond, TorchInterval: 100 * time.Millisecond,
		StepTime: 250 * time.Millisecond, EpochSteps: 480, Procs: true, Seed: 1,
		Tags: map[string]string{"batch_size": "64", "amp": "on"},
	}
}

// Mixes are the names Mix knows, in the order benchmarks report them.
var Mixes = []string{"steady", "realistic", "leak", "churn"}

// Mix returns a named configuration, each 8 GPUs at 100 Hz for 10 minutes:
//
//	steady     Default: allocator samples on a 10 Hz timer, the peak flat
//	           once warm, ±50 µs tick jitter
//	realistic  what real runs show: ±30 µs tick jitter, allocator samples
//	           at random points of the step on the timer and one at every
//	           step end with the step's peak (then reset), so allocated,
//	           peak and inactive_split move at every sample
//	leak       realistic with 256 000 B kept per step on every GPU
//	churn      realistic with the cache emptied every 20 steps: reserved,
//	           segments and the device's used memory move too
func Mix(name string) (Config, error) {
	c := Default()
	if name == "steady" {
		return c, nil
	}
	c.Jitter = 30 * time.Microsecond
	c.StepEndTorch = true
	switch name {
	case "realistic":
	case "leak":
		c.LeakPerStep = slices.Repeat([]int64{256000}, c.GPUs)
	case "churn":
		c.CacheFlushSteps = 20
	default:
		return Config{}, fmt.Errorf("tracegen: unknown mix %q (known: %v)", name, Mixes)
	}
	return c, nil
}

// TotalBytes is the memory of each generated GPU (an H200).
const TotalBytes int64 = 150754820096

// job is the generated job's memory, by step (see jobmodel): 1 GiB of
// weights, 2 GiB of optimizer state from the middle of the first step,
// 6 GiB of activations at the peak of a step, a 536 MiB CUDA context.
func (c Config) job() jobmodel.Job {
	return jobmodel.Job{
		GPUs: c.GPUs, StepsPerEpoch: c.EpochSteps,
		Weights: 1 << 30, Optimizer: 2 << 30, OptimizerAt: 0.5, Activations: 6 << 30,
		Leak: c.LeakPerStep, Page: page, Context: 536 << 20, Total: TotalBytes,
	}
}

const (
	// The allocator's cache here warms up sample by sample (each allocator
	// sample may reserve up to 20 MiB more than is allocated) towards
	// cacheBytes plus what has leaked, and empty_cache resets it: a history
	// that jobmodel's cache, a function of the step, does not model.
	cacheBytes = 7<<30 + 40
	pid0       = 4100
	page       = 2 << 20 // the allocator's segment rounding
)

// Truth is what a generated run is known to contain.
type Truth struct {
	Lines       int // JSON lines (header lines included), or Sink calls
	Steps       int
	PeakUsed    []int64 // by GPU
	LeakPerStep []int64
}

// RunInfo is a generated run's header.
type RunInfo struct {
	Name       string
	StartNS    int64
	IntervalNS int64
	Tags       map[string]string
}

// GPUInfo is one generated GPU.
type GPUInfo struct {
	Index      int
	UUID       string
	TotalBytes int64
}

// Torch is one allocator sample.
type Torch struct {
	T                                                int64
	GPU, PID, Rank                                   int
	Allocated, Reserved, Active, InactiveSplit, Peak int64
	Segments                                         int64
}

// Mark is an epoch or step mark; absent fields are -1.
type Mark struct {
	T                 int64
	Kind              string
	Epoch, Step, Rank int
}

// Sink receives a generated run in order: the run, its GPUs, then samples
// and marks, each group sampled at one tick in time order (allocator
// samples and marks may precede by a tick the device samples they follow).
type Sink interface {
	Run(RunInfo)
	GPU(GPUInfo)
	Device(t int64, gpu int, used, reserved int64)
	Proc(t int64, gpu, pid int, used int64)
	Torch(Torch)
	Mark(Mark)
}

// Write writes the run to w as JSON Lines.
func Write(w io.Writer, c Config) (Truth, error) {
	s := &jsonSink{w: bufio.NewWriterSize(w, 1<<20)}
	truth := Generate(s, c)
	if err := s.w.Flush(); err != nil {
		return truth, err
	}
	return truth, nil
}

// Generate calls s for each line of the run, in the order Write writes them.
func Generate(s Sink, c Config) Truth {
	g := newGenerator(s, withDefaults(c))
	g.header()
	end := g.start + int64(g.c.Duration)
	for k := int64(0); ; k++ {
		t := g.start + k*int64(g.c.Interval)
		if g.c.Jitter > 0 {
			t += g.rng.Int64N(2*int64(g.c.Jitter)+1) - int64(g.c.Jitter)
		}
		if t >= end {
			break
		}
		g.tick(t)
	}
	if g.c.EpochSteps > 0 && g.ranks[0].epochOpen {
		g.mark(Mark{T: end - 1000, Kind: "epoch_end", Epoch: (g.ranks[0].step - 1) / g.c.EpochSteps, Step: -1, Rank: -1})
	}
	return g.truth
}

// withDefaults fills the zero fields of c from Default.
func withDefaults(c Config) Config {
	d := Default()
	if c.GPUs == 0 {
		c.GPUs = d.GPUs
	}
	if c.Interval == 0 {
		c.Interval = d.Interval
	}
	if c.Duration == 0 {
		c.Duration = d.Duration
	}
	if c.Start.IsZero() {
		c.Start = d.Start
	}
	if c.Name == "" {
		c.Name = d.Name
	}
	return c
}

// rank is one training process: it runs steps of StepTime (with a little
// noise), reports its allocator on its timer, and marks each step's end.
type rank struct {
	step      int
	stepStart int64 // ns
	stepLen   int64
	nextTorch int64
	reserved  int64
	epochOpen bool
}

// generator holds one run being generated. The random numbers are drawn in
// a fixed order (rank timers, then per tick: jitter, then each rank's steps
// and reports), so a seed always gives the same run.
type generator struct {
	s     Sink
	c     Config
	job   jobmodel.Job
	rng   *rand.Rand
	truth Truth
	start int64 // ns
	ranks []rank
	used  []int64 // device used bytes per GPU at the current tick
}

func newGenerator(s Sink, c Config) *generator {
	g := &generator{
		s:     s,
		c:     c,
		rng:   rand.New(rand.NewPCG(c.Seed, 0x6d656d726563)),
		job:   c.job(),
		truth: Truth{PeakUsed: make([]int64, c.GPUs), LeakPerStep: make([]int64, c.GPUs)},
		start: c.Start.UnixNano(),
		ranks: make([]rank, c.GPUs),
		used:  make([]int64, c.GPUs),
	}
	warm := int64(5 * time.Second)
	for i := range g.ranks {
		g.ranks[i].stepStart = g.start + warm
		g.ranks[i].stepLen = int64(c.StepTime)
		g.ranks[i].nextTorch = g.start + int64(c.TorchInterval) + g.rng.Int64N(int64(c.TorchInterval)+1)
	}
	return g
}

// header writes the run line and one line per GPU.
func (g *generator) header() {
	c := g.c
	g.s.Run(RunInfo{Name: c.Name, StartNS: g.start, IntervalNS: c.Interval.Nanoseconds(), Tags: c.Tags})
	g.truth.Lines++
	for i := 0; i < c.GPUs; i++ {
		g.s.GPU(GPUInfo{Index: i, UUID: fmt.Sprintf("GPU-%08x-0000-0000-0000-%012d", c.Seed, i), TotalBytes: TotalBytes})
		g.truth.Lines++
		g.truth.LeakPerStep[i] = g.job.LeakPerStep(i)
	}
}

func (g *generator) mark(m Mark) { g.s.Mark(m); g.truth.Lines++ }

// frac is how far into rank r's step time t is.
func frac(r *rank, t int64) float64 { return float64(t-r.stepStart) / float64(r.stepLen) }

// allocated returns the bytes rank i has allocated at time t.
func (g *generator) allocated(i int, r *rank, t int64) int64 {
	job := g.job
	switch {
	case t < r.stepStart && r.step == 0:
		return job.Allocated(i, -1, 0) // before training
	case t < r.stepStart:
		// A timer sample reported after the step it fell in ended:
		// what that step's end holds.
		return job.Allocated(i, r.step-1, 1)
	case g.c.StepTime == 0 && t == r.stepStart:
		return job.Weights
	case g.c.StepTime == 0: // no steps: no activations, the optimizer state once training started
		return job.Weights + job.Optimizer
	}
	return job.Allocated(i, r.step, frac(r, t))
}

// torch writes rank i's allocator report at tt with a allocated and the
// given peak, growing its cache as the allocator would.
func (g *generator) torch(i int, r *rank, tt, a, peak int64) {
	// The cache grows to its steady size during the first epoch.
	want := int64(cacheBytes) + g.job.Kept(i, r.step)/page*page
	if r.reserved < want {
		r.reserved = min(want, max(r.reserved, (a+(20<<20))/page*page))
	}
	if r.reserved < a {
		r.reserved = (a + page) / page * page
	}
	split := (r.reserved - a) / 7 / 512 * 512
	g.s.Torch(Torch{T: tt, GPU: i, PID: pid0 + i, Rank: i, Allocated: a, Reserved: r.reserved, Active: a,
		InactiveSplit: split, Peak: peak, Segments: r.reserved / (20 << 20)})
	g.truth.Lines++
}

// tick advances every rank to time t, then writes the device (and process)
// lines of the tick.
func (g *generator) tick(t int64) {
	for i := range g.ranks {
		r := &g.ranks[i]
		g.catchUp(i, r, t)
		// Device memory: the context, then whatever the cache reserved;
		// NVML moves in whole 2 MiB pages.
		u := g.job.Context
		if r.reserved > 0 {
			u += r.reserved
		}
		g.used[i] = u
		if u > g.truth.PeakUsed[i] {
			g.truth.PeakUsed[i] = u
		}
	}
	for i := range g.ranks {
		g.s.Device(t, i, g.used[i], 644939776)
		g.truth.Lines++
	}
	if g.c.Procs {
		for i := range g.ranks {
			g.s.Proc(t, i, pid0+i, g.used[i]-(4<<20))
			g.truth.Lines++
		}
	}
}

// catchUp writes rank i's steps and allocator reports due before t, steps
// first unless step-end reports need them in time order.
func (g *generator) catchUp(i int, r *rank, t int64) {
	c := g.c
	for {
		stepDue := c.StepTime > 0 && r.stepStart+r.stepLen <= t
		torchDue := c.TorchInterval > 0 && r.nextTorch <= t
		if stepDue && !(c.StepEndTorch && torchDue && r.nextTorch < r.stepStart+r.stepLen) {
			g.endStep(i, r)
			continue
		}
		if !torchDue {
			return
		}
		tt := r.nextTorch
		a := g.allocated(i, r, tt)
		var peak int64
		switch {
		case r.step == 0:
			peak = a
		case !c.StepEndTorch:
			peak = max(a, g.job.Peak(i, r.step))
		case tt >= r.stepStart && frac(r, tt) < 0.45:
			peak = a // still climbing since the reset
		default:
			peak = g.job.Peak(i, r.step)
		}
		g.torch(i, r, tt, a, peak)
		r.nextTorch += int64(c.TorchInterval) + g.rng.Int64N(4_000_000) - 2_000_000
	}
}

// endStep ends rank i's current step: epoch marks (rank 0 only), the step
// mark, the next step's length, and the step-end allocator report.
func (g *generator) endStep(i int, r *rank) {
	c := g.c
	peak := g.job.Peak(i, r.step)
	r.stepStart += r.stepLen
	if c.EpochSteps > 0 && r.step%c.EpochSteps == 0 && i == 0 {
		if r.epochOpen {
			g.mark(Mark{T: r.stepStart - 1000, Kind: "epoch_end", Epoch: r.step/c.EpochSteps - 1, Step: -1, Rank: -1})
		}
		g.mark(Mark{T: r.stepStart, Kind: "epoch_start", Epoch: r.step / c.EpochSteps, Step: -1, Rank: -1})
		r.epochOpen = true
	}
	g.mark(Mark{T: r.stepStart, Kind: "step", Epoch: -1, Step: r.step, Rank: i})
	r.step++
	if i == 0 {
		g.truth.Steps = r.step
	}
	r.stepLen = int64(c.StepTime) + g.rng.Int64N(int64(c.StepTime)/50+1)
	if c.StepEndTorch {
		if c.CacheFlushSteps > 0 && r.step%c.CacheFlushSteps == 0 {
			a := g.allocated(i, r, r.stepStart)
			r.reserved = (a + page - 1) / page * page
		}
		g.torch(i, r, r.stepStart, g.allocated(i, r, r.stepStart), peak)
	}
}

// jsonSink writes memrec's JSON Lines.
type jsonSink struct {
	w   *bufio.Writer
	buf []byte
}

func (j *jsonSink) line(b []byte) {
	j.w.Write(b) // a write error sticks in the bufio.Writer; Flush reports it
	j.w.WriteByte('\n')
}

func (j *jsonSink) Run(r RunInfo) {
	tags := ""
	for k, v := range r.Tags {
		if tags != "" {
			tags += ","
		}
		tags += fmt.Sprintf("%q:%q", k, v)
	}
	j.line(fmt.Appendf(j.buf[:0], `{"type":"run","name":%q,"host":"gen","start_ns":%d,"interval_ns":%d,"tags":{%s}}`, r.Name, r.StartNS, r.IntervalNS, tags))
}

func (j *jsonSink) GPU(g GPUInfo) {
	j.line(fmt.Appendf(j.buf[:0], `{"type":"gpu","gpu":%d,"uuid":%q,"name":"NVIDIA H200","total_bytes":%d}`, g.Index, g.UUID, g.TotalBytes))
}

// The data lines are the wire package's, as memrec export writes them: a
// 24-hour run is 150 M of them, and the appenders allocate nothing.

func (j *jsonSink) Device(t int64, gpu int, used, reserved int64) {
	j.buf = wire.AppendDevice(j.buf[:0], wire.DeviceSample{T: t, GPU: gpu, Used: used, Reserved: reserved})
	j.w.Write(j.buf)
}

func (j *jsonSink) Proc(t int64, gpu, pid int, used int64) {
	j.buf = wire.AppendProc(j.buf[:0], wire.ProcSample{T: t, GPU: gpu, PID: pid, Used: used})
	j.w.Write(j.buf)
}

func (j *jsonSink) Torch(s Torch) {
	j.buf = wire.AppendTorch(j.buf[:0], wire.TorchSample{T: s.T, GPU: s.GPU, PID: s.PID, Rank: s.Rank,
		Allocated: s.Allocated, Reserved: s.Reserved, Active: s.Active, InactiveSplit: s.InactiveSplit,
		PeakAllocated: s.Peak, Segments: s.Segments})
	j.w.Write(j.buf)
}

func (j *jsonSink) Mark(m Mark) {
	w := wire.NewMark(m.T, wire.MarkKind(m.Kind))
	w.Epoch, w.Step = max(m.Epoch, wire.None), max(m.Step, wire.None)
	if m.Step >= 0 {
		w.Rank = max(m.Rank, wire.None)
	}
	j.buf = wire.AppendMark(j.buf[:0], w)
	j.w.Write(j.buf)
}
