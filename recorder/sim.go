package recorder

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/memrec/memrec/internal/jobmodel"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// The run tags a simulated job reads its shape from.
const (
	SimBatchTag  = "batch_size"
	SimSeqLenTag = "seq_len"
)

// Scenarios of the simulated source.
const (
	ScenarioNone          = "none"
	ScenarioLeak          = "leak"          // the last GPU keeps LeakPerStep bytes at every step
	ScenarioFragmentation = "fragmentation" // the allocator cache keeps growing with split blocks
	ScenarioOOM           = "oom"           // the last GPU leaks until it runs out of memory
)

// SimConfig describes a simulated data-parallel training job.
type SimConfig struct {
	GPUs        int           // default 2
	Scenario    string        // default none
	StepTime    time.Duration // default 100 ms
	EpochSteps  int           // default 20
	LeakPerStep int64         // default 16 MiB (leak), 512 MiB (oom)
	TotalBytes  int64         // default an H200's; 24 GiB for oom
	TorchTimer  time.Duration // allocator samples between steps; default 100 ms
	// RankBase is the global rank of the first GPU: a node of a
	// multi-node job (node k of 8-GPU nodes has RankBase 8k). Only global
	// rank 0 marks epochs.
	RankBase int
	// BatchSize and SeqLen scale the activations, as the run's batch_size
	// and seq_len tags would for a real job: SimRefBatch samples of
	// SimRefSeqLen tokens hold the job's 4 GiB, and activations grow in
	// proportion to both (no part grows with the square of the length).
	// 0 means the reference value.
	BatchSize, SeqLen float64
}

// The batch and length at which the simulated job holds its reference
// activations.
const (
	SimRefBatch  = 64
	SimRefSeqLen = 512
)

// When the simulated job's memory appears; its sizes are jobmodel.H200's.
const (
	simCtxAt   = 300 * time.Millisecond // the CUDA context
	simModelAt = 600 * time.Millisecond // the weights
	simTrainAt = time.Second            // the first step
	simPID0    = 20000
	// simDriverReserved is what NVML says the driver keeps of each GPU:
	// neither used nor free, so no process can have it.
	simDriverReserved = 644939776
)

// Sim is a simulated source: GPUs whose memory follows a training job, and
// the marks and allocator samples its probes would send. It behaves like a
// DDP job: every rank steps in lockstep (with a little skew), memory warms
// up during the first epoch (optimizer state at the first step, the cache
// growing), then holds steady under the sawtooth of activations.
type Sim struct {
	cfg   SimConfig
	job   jobmodel.Job
	start time.Time
	mu    sync.Mutex
	ranks []simRank
}

// OOM reports whether the simulated job ran out of memory, as a real job
// would: the first rank whose step did not fit, and that step. Safe for
// concurrent use.
func (s *Sim) OOM() (rank, step int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for r, rk := range s.ranks {
		if rk.oomed {
			return r, rk.stepsDone, true
		}
	}
	return 0, 0, false
}

// SpeedHint says what a simulated recording at speed that ran at only
// achieved (its job's time over the real time it took) means: every tick
// was recorded (the job's clock moves by the schedule, ScaledClock), but
// later than asked, and a speed the machine keeps pace with is the one it
// achieved with a fifth to spare. Empty when it kept 95 % of the pace.
func SpeedHint(speed, achieved float64) string {
	if achieved >= 0.95*speed || speed <= 1 {
		return ""
	}
	next := math.Floor(achieved * 0.8)
	try := fmt.Sprintf("--sim-speed %g or lower keeps pace", max(next, 1))
	if next <= 1 {
		try = "at real time (--sim-speed 1), or with fewer --sim-gpus, it keeps pace"
	}
	return fmt.Sprintf("this machine ran the simulated job at %.0f× where --sim-speed %g asked, so it took %.0f× as long in real time; every tick of the job's --duration was recorded: %s",
		achieved, speed, speed/max(achieved, 1e-9), try)
}

type simRank struct {
	stepsDone int       // step marks sent
	nextTimer time.Time // next timer sample
	oomed     bool
	oomAt     time.Time
}

// SetTags sets BatchSize and SeqLen from a run's batch_size and seq_len
// tags, where it has them; a tag that is not a number above 0 is an error
// that names it.
func (c *SimConfig) SetTags(tags map[string]string) error {
	for _, t := range []struct {
		key string
		to  *float64
	}{{SimBatchTag, &c.BatchSize}, {SimSeqLenTag, &c.SeqLen}} {
		v, ok := tags[t.key]
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) || math.IsInf(f, 0) {
			return fmt.Errorf("tag %s=%s: the simulated job wants a number above 0", t.key, v)
		}
		*t.to = f
	}
	return nil
}

// NewSim returns a simulated job that starts at start.
func NewSim(cfg SimConfig, start time.Time) (*Sim, error) {
	if cfg.GPUs == 0 {
		cfg.GPUs = 2
	}
	if cfg.Scenario == "" {
		cfg.Scenario = ScenarioNone
	}
	switch cfg.Scenario {
	case ScenarioNone, ScenarioLeak, ScenarioFragmentation, ScenarioOOM:
	default:
		return nil, fmt.Errorf("unknown simulation scenario %q (want none, leak, fragmentation or oom)", cfg.Scenario)
	}
	if cfg.StepTime == 0 {
		cfg.StepTime = 100 * time.Millisecond
	}
	if cfg.EpochSteps == 0 {
		cfg.EpochSteps = 20
	}
	if cfg.TorchTimer == 0 {
		cfg.TorchTimer = 100 * time.Millisecond
	}
	if cfg.TotalBytes == 0 {
		cfg.TotalBytes = 150754820096
		if cfg.Scenario == ScenarioOOM {
			cfg.TotalBytes = 24 << 30
		}
	}
	if cfg.LeakPerStep == 0 {
		cfg.LeakPerStep = 16 << 20
		if cfg.Scenario == ScenarioOOM {
			cfg.LeakPerStep = 512 << 20
		}
	}
	if cfg.BatchSize < 0 || cfg.SeqLen < 0 {
		return nil, fmt.Errorf("simulated batch %g, length %g: want values above 0", cfg.BatchSize, cfg.SeqLen)
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = SimRefBatch
	}
	if cfg.SeqLen == 0 {
		cfg.SeqLen = SimRefSeqLen
	}
	job := jobmodel.H200(cfg.GPUs, cfg.EpochSteps)
	job.Total = cfg.TotalBytes
	// Past a pebibyte no GPU holds the step: a cap keeps the sums in int64.
	act := min(float64(job.Activations)*cfg.BatchSize/SimRefBatch*cfg.SeqLen/SimRefSeqLen, 1<<50)
	job.Activations = int64(act) / 512 * 512
	job.Fragmenting = cfg.Scenario == ScenarioFragmentation
	if cfg.Scenario == ScenarioLeak || cfg.Scenario == ScenarioOOM {
		job.Leak = make([]int64, cfg.GPUs) // the last GPU leaks
		job.Leak[cfg.GPUs-1] = cfg.LeakPerStep
	}
	s := &Sim{cfg: cfg, job: job, start: start, ranks: make([]simRank, cfg.GPUs)}
	for i := range s.ranks {
		s.ranks[i].nextTimer = start.Add(simTrainAt + cfg.TorchTimer/2)
	}
	return s, nil
}

// GPUs implements Source.
func (s *Sim) GPUs() ([]storage.GPU, error) {
	gpus := make([]storage.GPU, s.cfg.GPUs)
	for i := range gpus {
		gpus[i] = storage.GPU{Index: i, UUID: fmt.Sprintf("GPU-5e000000-0000-0000-0000-%012d", s.cfg.RankBase+i),
			Name: "Simulated NVIDIA H200", TotalBytes: s.cfg.TotalBytes,
			PCIBusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+i), Device: "nvidia" + strconv.Itoa(i)}
	}
	return gpus, nil
}

// Driver implements Source.
func (s *Sim) Driver() string { return "simulated" }

// Close implements Source.
func (s *Sim) Close() error { return nil }

// stepTime is rank r's step length: ranks drift a little apart.
func (s *Sim) stepTime(r int) time.Duration {
	return s.cfg.StepTime + time.Duration(r)*s.cfg.StepTime/500
}

// step returns the step rank r is in at t, and how far into it (0..1);
// step -1 before training starts.
func (s *Sim) step(r int, t time.Time) (int, float64) {
	e := t.Sub(s.start) - simTrainAt
	if e < 0 {
		return -1, 0
	}
	st := s.stepTime(r)
	return int(e / st), float64(e%st) / float64(st)
}

// capacity is what the allocator of a rank's process can reserve: the
// GPU's total less what the driver reserves and what NVML shows besides
// (the idle GPU, the CUDA context, NCCL's buffers with more than one GPU).
func (s *Sim) capacity() int64 {
	c := s.cfg.TotalBytes - simDriverReserved - s.job.Idle - s.job.Context
	if s.cfg.GPUs > 1 {
		c -= s.job.NCCL
	}
	return c
}

// fits reports whether rank r's step fits: its peak within capacity.
// Near the limit the caching allocator frees its cache and retries before
// it fails, so the step's peak decides, not the cache above it.
func (s *Sim) fits(r, step int) bool { return s.job.Peak(r, step) <= s.capacity() }

// alloc is the allocator's view of rank r at t: nothing before the model
// loads; never more than the GPU can hold (a step whose peak does not fit
// fails at the allocation that would pass it, which never happens).
func (s *Sim) alloc(r int, t time.Time) jobmodel.Alloc {
	if t.Sub(s.start) < simModelAt {
		return jobmodel.Alloc{}
	}
	step, f := s.step(r, t)
	a := s.job.At(r, step, f)
	c := s.capacity()
	a.Allocated, a.Reserved, a.Active, a.Peak = min(a.Allocated, c), min(a.Reserved, c), min(a.Active, c), min(a.Peak, c)
	a.InactiveSplit = min(a.InactiveSplit, a.Reserved-a.Allocated)
	return a
}

// Read implements Source.
func (s *Sim) Read(gpu int, t time.Time, r *Reading) error {
	used, _, err := s.used(gpu, t)
	r.Invalid, r.Used, r.Reserved = 0, used, simDriverReserved
	return err
}

// ReadProcs implements Source: one training process per GPU while it lives.
func (s *Sim) ReadProcs(gpu int, t time.Time, r *Reading) error {
	_, proc, err := s.used(gpu, t)
	r.Procs, r.Invalid = r.Procs[:0], 0
	if proc > 0 {
		r.Procs = append(r.Procs, Proc{PID: simPID0 + gpu, Used: proc})
	}
	return err
}

// used is what NVML would report at t: the GPU's used memory, and the
// training process's share of it (0 when it has not started or has died).
func (s *Sim) used(gpu int, t time.Time) (device, proc int64, err error) {
	if gpu < 0 || gpu >= s.cfg.GPUs {
		return 0, 0, fmt.Errorf("GPU %d: no such simulated device", gpu)
	}
	s.mu.Lock()
	rank := s.ranks[gpu]
	s.mu.Unlock()
	if rank.oomed && !t.Before(rank.oomAt) || t.Sub(s.start) < simCtxAt {
		return s.job.Idle, 0, nil // the process died, or has no context yet
	}
	proc = s.job.Context + s.alloc(gpu, t).Reserved
	if s.cfg.GPUs > 1 && t.Sub(s.start) >= simTrainAt {
		proc += s.job.NCCL
	}
	return s.job.Idle + proc, proc, nil
}

// Emit implements EventSource: the step and epoch marks and allocator
// samples of every rank up to t.
func (s *Sim) Emit(t time.Time, sink Sink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for r := range s.ranks {
		rk := &s.ranks[r]
		for !rk.oomed {
			// The next event of this rank: a step's end or a timer sample.
			stepEnd := s.start.Add(simTrainAt + time.Duration(rk.stepsDone+1)*s.stepTime(r))
			if rk.nextTimer.Before(stepEnd) {
				if rk.nextTimer.After(t) {
					break
				}
				s.sendTorch(sink, r, rk.nextTimer, 0)
				rk.nextTimer = rk.nextTimer.Add(s.cfg.TorchTimer)
				continue
			}
			if stepEnd.After(t) {
				break
			}
			s.endStep(sink, r, rk, stepEnd)
		}
	}
}

func (s *Sim) endStep(sink Sink, r int, rk *simRank, at time.Time) {
	step := rk.stepsDone
	ns := at.UnixNano()
	startNS := at.Add(-s.stepTime(r)).UnixNano()
	if s.cfg.RankBase+r == 0 && step%s.cfg.EpochSteps == 0 {
		m := storage.NewMark(startNS, wire.MarkEpochStart)
		m.Epoch = step / s.cfg.EpochSteps
		sink.AppendMark(m)
	}
	if !s.fits(r, step) {
		// This step's peak does not fit: the job dies with an OOM.
		m := storage.NewMark(ns, wire.MarkOOM)
		m.GPU, m.Rank, m.PID = r, s.cfg.RankBase+r, simPID0+r
		m.Text = fmt.Sprintf("CUDA out of memory. Tried to allocate %d MiB. GPU %d has a total capacity of %d MiB", s.job.Activations>>20, r, s.cfg.TotalBytes>>20)
		sink.AppendMark(m)
		s.sendTorch(sink, r, at, 1)
		rk.oomed, rk.oomAt = true, at
		return
	}
	m := storage.NewMark(ns, wire.MarkStep)
	m.Step, m.Rank = step, s.cfg.RankBase+r
	sink.AppendMark(m)
	s.sendTorch(sink, r, at, 0)
	if s.cfg.RankBase+r == 0 && step%s.cfg.EpochSteps == s.cfg.EpochSteps-1 {
		m := storage.NewMark(ns+1000, wire.MarkEpochEnd)
		m.Epoch = step / s.cfg.EpochSteps
		sink.AppendMark(m)
	}
	rk.stepsDone++
}

// sendTorch sends an allocator sample and, from the moment the model is
// loaded, the budget memrec.watch would send with it (jobmodel.Split).
func (s *Sim) sendTorch(sink Sink, r int, at time.Time, ooms int64) {
	before := at.Add(-time.Nanosecond)
	st := s.alloc(r, before)
	sink.AppendTorch(storage.TorchSample{T: at.UnixNano(), GPU: r, PID: simPID0 + r, Rank: s.cfg.RankBase + r,
		Allocated: st.Allocated, Reserved: st.Reserved, Active: st.Active, InactiveSplit: st.InactiveSplit,
		PeakAllocated: st.Peak, Segments: st.Segments, OOMs: ooms})
	if before.Sub(s.start) < simModelAt {
		return
	}
	step, f := s.step(r, before)
	b := s.job.Split(step, f)
	sink.AppendBudget(storage.BudgetSample{T: at.UnixNano(), GPU: r, PID: simPID0 + r, Rank: s.cfg.RankBase + r,
		Params: b.Params, Grads: b.Grads, OptimizerState: b.State, Buffers: b.Buffers, ParamCount: b.ParamCount,
		Trainable: b.ParamCount, Autocast: storage.AutocastOff, GradsAtForward: storage.FlagYes, Optimizer: "AdamW", OptimizerKeys: "exp_avg,exp_avg_sq",
		DType: "bfloat16"})
}

// ProcName implements ProcNamer: the simulated rank r's process is
// "sim-rank-r".
func (s *Sim) ProcName(pid int) string {
	if pid < simPID0 || pid >= simPID0+s.cfg.GPUs {
		return ""
	}
	return "sim-rank-" + strconv.Itoa(pid-simPID0)
}
