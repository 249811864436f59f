// Package tracegen writes synthetic training runs in memrec's JSON Lines
// format, with known ground truth, for benchmarks and tests.
//
// A generated run looks like a data-parallel job recorded by memrec: one
// NVML tick every Interval (one timestamp per tick, with jitter), a device
// sample and one process sample per GPU on each tick, PyTorch allocator
// samples from each rank's probe on its own timer, and epoch and step marks
// from every rank. Memory warms up during the first epoch (optimizer state
// at the first step, the allocator cache growing), then holds steady with
// the sawtooth of activations inside each step; a per-GPU leak adds a fixed
// number of bytes at each step.
package tracegen

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"time"
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
	Seed          uint64
	Tags          map[string]string
}

// Default is an 8-GPU, 100 Hz, 10-minute run: about a million lines.
func Default() Config {
	return Config{
		Name: "gen", Start: time.Unix(1764430000, 0), GPUs: 8, Interval: 10 * time.Millisecond,
		Duration: 10 * time.Minute, Jitter: 50 * time.Microsecond, TorchInterval: 100 * time.Millisecond,
		StepTime: 250 * time.Millisecond, EpochSteps: 480, Procs: true, Seed: 1,
		Tags: map[string]string{"batch_size": "64", "amp": "on"},
	}
}

// TotalBytes is the memory of each generated GPU (an H200).
const TotalBytes int64 = 150754820096

// Model of one rank's memory, in bytes.
const (
	contextBytes   = 536 << 20  // CUDA context and libraries: seen by NVML only
	weightsBytes   = 1 << 30    // parameters and gradients, from the start
	optimizerBytes = 2 << 30    // optimizer state, appears at the first step
	activations    = 6 << 30    // peak activations inside a step
	cacheBytes     = 7<<30 + 40 // reserved by the allocator once warm
	pid0           = 4100
)

// Truth is what a generated run is known to contain.
type Truth struct {
	Lines       int
	Steps       int
	PeakUsed    []int64 // by GPU
	LeakPerStep []int64
}

// Write writes the run to w.
func Write(w io.Writer, c Config) (Truth, error) {
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
	rng := rand.New(rand.NewPCG(c.Seed, 0x6d656d726563))
	bw := bufio.NewWriterSize(w, 1<<20)
	truth := Truth{PeakUsed: make([]int64, c.GPUs), LeakPerStep: make([]int64, c.GPUs)}
	line := func(format string, args ...any) {
		fmt.Fprintf(bw, format, args...)
		bw.WriteByte('\n')
		truth.Lines++
	}
	start := c.Start.UnixNano()
	tags := ""
	for k, v := range c.Tags {
		if tags != "" {
			tags += ","
		}
		tags += fmt.Sprintf("%q:%q", k, v)
	}
	line(`{"type":"run","name":%q,"host":"gen","start_ns":%d,"interval_ns":%d,"tags":{%s}}`, c.Name, start, c.Interval.Nanoseconds(), tags)
	for g := 0; g < c.GPUs; g++ {
		line(`{"type":"gpu","gpu":%d,"uuid":"GPU-%08x-0000-0000-0000-%012d","name":"NVIDIA H200","total_bytes":%d}`, g, c.Seed, g, TotalBytes)
		if g < len(c.LeakPerStep) {
			truth.LeakPerStep[g] = c.LeakPerStep[g]
		}
	}

	// Each rank runs steps of StepTime (with a little noise), reports its
	// allocator on its timer, and marks each step's end.
	type rank struct {
		step      int
		stepStart int64 // ns
		stepLen   int64
		nextTorch int64
		reserved  int64
		peakSince int64
		kept      int64 // leaked bytes so far
		epochOpen bool
	}
	ranks := make([]rank, c.GPUs)
	warm := int64(5 * time.Second)
	for i := range ranks {
		ranks[i].stepStart = start + warm
		ranks[i].stepLen = int64(c.StepTime)
		ranks[i].nextTorch = start + int64(c.TorchInterval) + rng.Int64N(int64(c.TorchInterval)+1)
	}
	// phase returns the activation bytes at time t within rank r's step:
	// a forward ramp up to the peak, then backward freeing it.
	phase := func(r *rank, t int64) int64 {
		if c.StepTime == 0 || t < r.stepStart {
			return 0
		}
		f := float64(t-r.stepStart) / float64(r.stepLen)
		if f < 0.45 {
			return int64(f/0.45*activations) / 512 * 512
		}
		return int64((1-f)/0.55*activations) / 512 * 512
	}
	allocated := func(g int, r *rank, t int64) int64 {
		a := int64(weightsBytes) + r.kept
		if r.step > 0 || t > r.stepStart+r.stepLen/2 {
			a += optimizerBytes
		}
		return a + phase(r, t)
	}

	end := start + int64(c.Duration)
	used := make([]int64, c.GPUs)
	for k := int64(0); ; k++ {
		t := start + k*int64(c.Interval)
		if c.Jitter > 0 {
			t += rng.Int64N(2*int64(c.Jitter)+1) - int64(c.Jitter)
		}
		if t >= end {
			break
		}
		for g := range ranks {
			r := &ranks[g]
			// Steps and allocator reports due before this tick.
			for c.StepTime > 0 && r.stepStart+r.stepLen <= t {
				r.stepStart += r.stepLen
				if c.EpochSteps > 0 && r.step%c.EpochSteps == 0 && g == 0 {
					if r.epochOpen {
						line(`{"type":"mark","t_ns":%d,"kind":"epoch_end","epoch":%d}`, r.stepStart-1000, r.step/c.EpochSteps-1)
					}
					line(`{"type":"mark","t_ns":%d,"kind":"epoch_start","epoch":%d}`, r.stepStart, r.step/c.EpochSteps)
					r.epochOpen = true
				}
				if g < len(c.LeakPerStep) {
					r.kept += c.LeakPerStep[g]
				}
				line(`{"type":"mark","t_ns":%d,"kind":"step","step":%d,"rank":%d}`, r.stepStart, r.step, g)
				r.step++
				if g == 0 {
					truth.Steps = r.step
				}
				r.stepLen = int64(c.StepTime) + rng.Int64N(int64(c.StepTime)/50+1)
			}
			for c.TorchInterval > 0 && r.nextTorch <= t {
				tt := r.nextTorch
				a := allocated(g, r, tt)
				peak := max(a, int64(weightsBytes+optimizerBytes)+r.kept+activations)
				if r.step == 0 {
					peak = a
				}
				// The cache grows to its steady size during the first epoch.
				want := int64(cacheBytes) + r.kept/(2<<20)*(2<<20)
				if r.reserved < want {
					r.reserved = min(want, max(r.reserved, (a+(20<<20))/(2<<20)*(2<<20)))
				}
				if r.reserved < a {
					r.reserved = (a + (2 << 20)) / (2 << 20) * (2 << 20)
				}
				split := (r.reserved - a) / 7 / 512 * 512
				line(`{"type":"torch","t_ns":%d,"gpu":%d,"pid":%d,"rank":%d,"allocated_bytes":%d,"reserved_bytes":%d,"active_bytes":%d,"inactive_split_bytes":%d,"peak_allocated_bytes":%d,"segments":%d,"alloc_retries":0,"ooms":0}`,
					tt, g, pid0+g, g, a, r.reserved, a, split, peak, r.reserved/(20<<20))
				r.nextTorch += int64(c.TorchInterval) + rng.Int64N(4_000_000) - 2_000_000
			}
			// Device memory: the context, then whatever the cache reserved;
			// NVML moves in whole 2 MiB pages.
			u := int64(contextBytes)
			if r.reserved > 0 {
				u += r.reserved
			}
			used[g] = u
			if u > truth.PeakUsed[g] {
				truth.PeakUsed[g] = u
			}
		}
		for g := range ranks {
			line(`{"type":"sample","t_ns":%d,"gpu":%d,"used_bytes":%d,"reserved_bytes":644939776}`, t, g, used[g])
		}
		if c.Procs {
			for g := range ranks {
				line(`{"type":"proc","t_ns":%d,"gpu":%d,"pid":%d,"used_bytes":%d}`, t, g, pid0+g, used[g]-(4<<20))
			}
		}
	}
	if c.EpochSteps > 0 && ranks[0].epochOpen {
		line(`{"type":"mark","t_ns":%d,"kind":"epoch_end","epoch":%d}`, end-1000, (ranks[0].step-1)/c.EpochSteps)
	}
	return truth, bw.Flush()
}
