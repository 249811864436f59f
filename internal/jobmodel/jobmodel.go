// Package jobmodel is the one model of a data-parallel training job's
// memory that memrec's simulator and tests share, with the truth that the
// analysis must find in it.
//
// A job is a sequence of steps, every rank stepping together. Within a
// step (at fraction f, 0 to 1) the forward pass ramps activations up to
// their peak at f = 0.45 and the backward pass frees them by f = 1. The
// weights are allocated before the first step; the optimizer state appears
// during step 0, once OptimizerAt of it has passed. A rank that leaks
// keeps Leak bytes at the end of every step; a jump is a one-off permanent
// allocation at the start of step JumpAt. The allocator's cache reserves
// the step's peak in whole pages, plus headroom that grows over the first
// epoch (and, when fragmenting, keeps growing with blocks split too small
// to reuse). The device's used memory is the idle GPU's, the CUDA context
// (which the allocator does not see), what the cache reserved and, with
// more than one GPU, the communication buffers.
//
// A job that empties the cache at every step end (EmptyCache) keeps no
// headroom: reserved follows the step's highest allocation so far and
// falls back when the step ends, so the device shows each step as a
// sawtooth. Between epochs such a job may evaluate (Eval): the weights,
// the optimizer state and the evaluation's activations are held, and no
// step falls.
//
// The model is a pure function of (GPU, step, fraction): timing, jitter
// and noise belong to its users.
package jobmodel

// Job describes the job. The zero value is not useful: start from H200.
type Job struct {
	GPUs          int
	StepsPerEpoch int
	Weights       int64   // parameters and gradients, from the start
	Optimizer     int64   // optimizer state, from OptimizerAt of step 0
	OptimizerAt   float64 // fraction of step 0
	Activations   int64   // activations at the peak of a step
	// Held is allocated through every step beyond the model's tensors (the
	// data batch, library workspaces): it outlives the steps.
	Held   int64
	Leak   []int64 // bytes kept at the end of every step, by GPU (missing = 0)
	JumpAt int     // step at whose start Jump bytes are kept (0: none)
	Jump   int64
	// The cache reserves the step's peak times 1 + Headroom·min(1,
	// step/StepsPerEpoch), in Pages; fragmenting, a further 2 % of the
	// peak per step, and 70 % of the unused cache is split blocks (10 %
	// otherwise).
	Headroom    float64
	Fragmenting bool
	// EmptyCache: torch.cuda.empty_cache() at every step end. Reserved is
	// the step's highest allocation so far in Pages, with no headroom.
	EmptyCache bool
	// EvalActivations are held by the evaluation pass between epochs
	// (no gradients: less than Activations); see Eval.
	EvalActivations int64
	Page            int64
	Idle            int64 // NVML's used on an idle GPU
	Context         int64 // CUDA context: NVML sees it, the allocator does not
	NCCL            int64 // communication buffers, with more than one GPU
	Total           int64 // each GPU's memory
}

// H200 is the simulator's job on H200s: 1 GiB of weights, 2 GiB of
// optimizer state, 4 GiB of activations, no leak.
func H200(gpus, stepsPerEpoch int) Job {
	return Job{
		GPUs: gpus, StepsPerEpoch: stepsPerEpoch,
		Weights: 1 << 30, Optimizer: 2 << 30, OptimizerAt: 0.9, Activations: 4 << 30,
		Headroom: 0.15, Page: 2 << 20,
		Idle: 3407872, Context: 512 << 20, NCCL: 256 << 20, Total: 150754820096,
	}
}

// Alloc is the allocator's state (torch.cuda.memory_stats) at one moment.
type Alloc struct {
	Allocated, Reserved, Active, InactiveSplit, Peak, Segments int64
}

// LeakPerStep is the truth of GPU gpu's leak: bytes kept per step.
func (j *Job) LeakPerStep(gpu int) int64 {
	if gpu < len(j.Leak) {
		return j.Leak[gpu]
	}
	return 0
}

// Kept is what GPU gpu holds at the start of step beyond the job's steady
// memory: the leaks of the steps before and the jump.
func (j *Job) Kept(gpu, step int) int64 {
	k := int64(max(step, 0)) * j.LeakPerStep(gpu)
	if j.JumpAt > 0 && step >= j.JumpAt {
		k += j.Jump
	}
	return k
}

// activations is the activation bytes at fraction f of a step, in 512 B
// blocks.
func (j *Job) activations(f float64) int64 {
	var act float64
	if f < 0.45 {
		act = f / 0.45
	} else {
		act = (1 - f) / 0.55
	}
	return int64(act*float64(j.Activations)) / 512 * 512
}

// Allocated is what GPU gpu's tensors hold at fraction f of step; step -1
// is after the model loaded, before training. At f = 1 the step has ended
// and its leak is kept.
func (j *Job) Allocated(gpu, step int, f float64) int64 {
	a := j.Weights + j.Kept(gpu, step)
	if step >= 0 {
		a += j.Held
	}
	if step > 0 || step == 0 && f > j.OptimizerAt {
		a += j.Optimizer
	}
	if step >= 0 {
		a += j.activations(f)
	}
	if step >= 0 && f >= 1 {
		a += j.LeakPerStep(gpu)
	}
	return a
}

// Peak is the most GPU gpu allocates during step: the truth of the peak.
func (j *Job) Peak(gpu, step int) int64 {
	return j.Weights + j.Optimizer + j.Held + j.Activations + j.Kept(gpu, step)
}

func roundUp(v, to int64) int64 { return (v + to - 1) / to * to }

// At is the allocator's state of GPU gpu at fraction f of step.
func (j *Job) At(gpu, step int, f float64) Alloc {
	a := j.Allocated(gpu, step, f)
	peak := j.Peak(gpu, step)
	warm := 1.0 // share of the first epoch done; without epochs, warm from the start
	if j.StepsPerEpoch > 0 {
		warm = min(1, float64(max(step, 0))/float64(j.StepsPerEpoch))
	}
	growth := 1.0 + j.Headroom*warm
	splitShare := 0.1
	if j.Fragmenting && step > 0 {
		growth += 0.02 * float64(step)
		splitShare = 0.7
	}
	reserved := roundUp(int64(float64(peak)*growth), j.Page)
	switch {
	case step < 0:
		reserved = roundUp(a, j.Page)
	case j.EmptyCache:
		// The forward pass allocates up to 0.45 of the step; the backward
		// pass frees into the cache, which empty_cache returns at the end.
		reserved = roundUp(j.Allocated(gpu, step, min(f, 0.45)), j.Page)
	}
	reserved = max(reserved, roundUp(a, j.Page))
	return Alloc{
		Allocated:     a,
		Reserved:      reserved,
		Active:        a,
		InactiveSplit: int64(float64(reserved-a)*splitShare) / 512 * 512,
		Peak:          peak,
		Segments:      reserved / (20 << 20),
	}
}

// Eval is the allocator's state of GPU gpu during the evaluation pass
// after epoch: what the epoch's last step left, and EvalActivations. With
// EmptyCache the cache holds just that; otherwise the cache of the last
// step serves it.
func (j *Job) Eval(gpu, epoch int) Alloc {
	last := (epoch+1)*j.StepsPerEpoch - 1
	a := j.Allocated(gpu, last, 1) + j.EvalActivations
	reserved := roundUp(a, j.Page)
	if !j.EmptyCache {
		reserved = max(reserved, j.At(gpu, last, 1).Reserved)
	}
	return Alloc{Allocated: a, Reserved: reserved, Active: a, Peak: j.Peak(gpu, last), Segments: reserved / (20 << 20)}
}

// EvalUsed is the device's used memory during the evaluation pass after
// epoch.
func (j *Job) EvalUsed(gpu, epoch int) int64 {
	u := j.Idle + j.Context + j.Eval(gpu, epoch).Reserved
	if j.GPUs > 1 {
		u += j.NCCL
	}
	return u
}

// Used is the device's used memory (as NVML reports it) with GPU gpu's
// process at fraction f of step; training is whether the communication
// buffers exist yet.
func (j *Job) Used(gpu, step int, f float64, training bool) int64 {
	return j.Idle + j.ProcUsed(gpu, step, f, training)
}

// ProcUsed is the training process's share of Used.
func (j *Job) ProcUsed(gpu, step int, f float64, training bool) int64 {
	p := j.Context + j.At(gpu, step, f).Reserved
	if j.GPUs > 1 && training {
		p += j.NCCL
	}
	return p
}

// Fits reports whether GPU gpu's peak of step fits in its memory; the
// first step that does not ends the job with an OOM.
func (j *Job) Fits(gpu, step int) bool {
	return j.Peak(gpu, step)+j.Context <= j.Total
}

// OOMStep is the step whose peak GPU gpu cannot hold, or -1 when every
// step of steps fits.
func (j *Job) OOMStep(gpu, steps int) int {
	for s := range steps {
		if !j.Fits(gpu, s) {
			return s
		}
	}
	return -1
}

// Epoch is the epoch of step; StepsPerEpoch must be positive.
func (j *Job) Epoch(step int) int { return step / j.StepsPerEpoch }

// EpochDelta is the truth of how much GPU gpu's allocated memory at the
// end of epoch grew over the end of the epoch before (epoch ≥ 1).
func (j *Job) EpochDelta(gpu, epoch int) int64 {
	end := func(e int) int64 { return j.Allocated(gpu, (e+1)*j.StepsPerEpoch-1, 1) }
	return end(epoch) - end(epoch-1)
}

// Split is what the job's own tensors hold, as memrec.watch counts them:
// the truth of the budget. The model's weights are parameters and
// gradients in equal halves, in bfloat16 (2 bytes an element); the
// optimizer state is AdamW's two moments kept in float32 (8 bytes a
// parameter: H200's 2 GiB for its 256 Mi parameters); there are no
// buffers.
type Split struct {
	Params, Grads, State, Buffers int64
	ParamCount                    int64 // elements
}

// Split is the budget of GPU gpu at fraction f of step (step -1: loaded,
// before training; gradients exist from then on, as Weights says).
func (j *Job) Split(step int, f float64) Split {
	s := Split{Params: j.Weights / 2, Grads: j.Weights - j.Weights/2}
	s.ParamCount = s.Params / 2
	if step > 0 || step == 0 && f > j.OptimizerAt {
		s.State = j.Optimizer
	}
	return s
}
