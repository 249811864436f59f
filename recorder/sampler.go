package recorder

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/memrec/memrec/storage"
)

// Sampler reads every selected GPU on an absolute schedule: tick k is due at
// t0 + k·Interval, whatever happened to the ticks before it, so the schedule
// never drifts. A tick taken more than one interval after its deadline is
// not taken at all: it is counted as missed, never silently shifted.
type Sampler struct {
	Source   Source
	GPUs     []int // indices to read
	Interval time.Duration
	// Procs also lists the processes on each GPU with their memory. A
	// process changes what it holds only by changing its GPU's used memory,
	// so a GPU's list is read again only when that moved, or ProcsEvery has
	// passed since the last list (0: at every tick).
	Procs      bool
	ProcsEvery time.Duration
	Clock      Clock
	// GoLoop samples from Go even where the source could sample on a
	// native thread (to compare the two).
	GoLoop bool
	Sink   Sink
	// OnError is called for a failed read or a refused sample; nil ignores.
	OnError func(error)
	// Progress, if set, counts ticks taken and missed as they happen (for
	// live metrics); SamplerStats has the same counts at the end.
	Progress *Progress
	// Until, if set, ends the Go loop at the first tick due at or after it
	// (by Clock: with a fake clock, a recording of simulated time).
	Until time.Time
	// NoEvents leaves out the marks and allocator samples of a Source that
	// also makes them (an EventSource: the simulator), for a recording
	// whose command's own probe sends them.
	NoEvents bool
}

// SamplerStats are what the sampler measured about itself. Safe to copy.
type SamplerStats struct {
	Ticks   int64 // ticks taken
	Missed  int64 // ticks skipped because their time had passed
	Samples int64 // device samples stored
	Procs   int64 // process samples stored
	Invalid int64 // readings dropped as nonsense
	Errors  int64 // failed reads, and readings lost
	Native  bool  // sampled on a native thread (NVML), not in Go
	// Late is the distribution of how late taken ticks started.
	LateP50, LateP99, LateMax time.Duration
	Elapsed                   time.Duration
}

// AchievedHz is the rate of ticks actually taken.
func (s SamplerStats) AchievedHz() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Ticks) / s.Elapsed.Seconds()
}

// OnTime is the fraction of due ticks that were taken.
func (s SamplerStats) OnTime() float64 {
	if s.Ticks+s.Missed == 0 {
		return 1
	}
	return float64(s.Ticks) / float64(s.Ticks+s.Missed)
}

// lateHist is a histogram of lateness, with four buckets per power of two
// of microseconds (at most 19 % wide), so percentiles cost constant memory
// however long the run.
type lateHist struct {
	buckets [256]int64
	max     time.Duration
	n       int64
}

// lateBucket maps d to a bucket: 0 for under 1 µs, else 4·log2(µs) rounded
// down to quarter powers.
func lateBucket(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us < 1 {
		return 0
	}
	return min(255, 1+int(4*math.Log2(us)))
}

// bucketEdge is the upper edge of bucket b.
func bucketEdge(b int) time.Duration {
	if b == 0 {
		return time.Microsecond
	}
	return time.Duration(math.Exp2(float64(b)/4) * float64(time.Microsecond))
}

func (h *lateHist) add(d time.Duration) {
	d = max(d, 0)
	h.buckets[lateBucket(d)]++
	h.max = max(h.max, d)
	h.n++
}

// quantile returns the upper edge of the bucket holding quantile q.
func (h *lateHist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	want := int64(q * float64(h.n))
	var seen int64
	for b, c := range h.buckets {
		seen += c
		if seen > want {
			return min(bucketEdge(b), h.max).Round(time.Microsecond)
		}
	}
	return h.max
}

// Run samples until ctx is done and returns its statistics. Errors from the
// source do not stop it. A source that can sample on a thread of its own
// (NVML opened with OpenNVML) does so when the clock is the real one and
// GoLoop is off; otherwise Run holds its OS thread for precise sleeping.
//
// Run is long on purpose: past the choice of thread it is the Go tick
// loop, read top to bottom as one tick (sleep to the deadline, skip the
// ticks missed, take one timestamp, read and append each GPU, then its
// processes when due). Its counters, histogram and reading buffer are
// locals of that one loop; split into methods they would move into a
// struct that every step writes through, which reads no better.
func (s *Sampler) Run(ctx context.Context) SamplerStats {
	if ls, ok := s.Source.(loopSource); ok && s.Clock == (RealClock{}) && !s.GoLoop {
		loop, err := ls.startLoop(s.GPUs, s.Interval, s.Procs, s.ProcsEvery)
		if err == nil {
			return s.runLoop(ctx, loop)
		}
		if !errors.Is(err, errNoLoop) && s.OnError != nil {
			s.OnError(fmt.Errorf("sampling from Go instead of a native thread: %w", err))
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prepareThread()
	// Fewer collections: a GC cycle's assists can delay a tick, and the
	// recorder's heap is small either way.
	defer debug.SetGCPercent(debug.SetGCPercent(400))

	var st SamplerStats
	var hist lateHist
	var r Reading
	events, _ := s.Source.(EventSource)
	if s.NoEvents {
		events = nil
	}
	lists := make(map[int]*procList, len(s.GPUs))
	for _, g := range s.GPUs {
		lists[g] = &procList{}
	}
	t0 := s.Clock.Now()
	for k := int64(0); ctx.Err() == nil; {
		deadline := t0.Add(time.Duration(k) * s.Interval)
		if !s.Until.IsZero() && !deadline.Before(s.Until) {
			break
		}
		s.Clock.SleepUntil(ctx, deadline)
		if ctx.Err() != nil {
			break
		}
		now := s.Clock.Now() // one timestamp per tick, for every GPU
		if late := now.Sub(deadline); late > s.Interval {
			// Skip every tick whose start window has passed.
			skip := int64(late / s.Interval)
			st.Missed += skip
			k += skip
			if s.Progress != nil {
				s.Progress.Missed.Add(skip)
			}
			continue
		} else {
			hist.add(late)
		}
		st.Ticks++
		if s.Progress != nil {
			s.Progress.Ticks.Add(1)
		}
		for _, g := range s.GPUs {
			s.sampleGPU(g, now, &r, lists[g], &st)
		}
		if events != nil {
			events.Emit(now, s.Sink)
		}
		k++
	}
	st.Elapsed = s.Clock.Now().Sub(t0)
	st.LateP50, st.LateP99, st.LateMax = hist.quantile(0.5), hist.quantile(0.99), hist.max
	return st
}

// sampleGPU reads GPU g at now into the sink, and its process list when
// that is due, counting into st; an error is counted and reported, and the
// loop goes on.
func (s *Sampler) sampleGPU(g int, now time.Time, r *Reading, list *procList, st *SamplerStats) {
	t := now.UnixNano()
	err := s.Source.Read(g, now, r)
	st.Invalid += int64(r.Invalid)
	if errors.Is(err, errInvalid) {
		return
	}
	if err != nil {
		s.fail(st, err)
		return
	}
	if err := s.Sink.AppendDevice(storage.DeviceSample{T: t, GPU: g, Used: r.Used, Reserved: r.Reserved}); err != nil {
		s.fail(st, err)
		return
	}
	st.Samples++
	if !s.Procs || !list.due(r.Used, now, s.ProcsEvery) {
		return
	}
	err = s.Source.ReadProcs(g, now, r)
	st.Invalid += int64(r.Invalid)
	if err != nil {
		s.fail(st, err)
		return
	}
	list.done(r.Used, now)
	for _, p := range r.Procs {
		if err := s.Sink.AppendProc(storage.ProcSample{T: t, GPU: g, PID: p.PID, Used: p.Used}); err != nil {
			s.fail(st, err)
			continue
		}
		st.Procs++
	}
}

// fail counts err in st and reports it.
func (s *Sampler) fail(st *SamplerStats, err error) {
	st.Errors++
	if s.OnError != nil {
		s.OnError(err)
	}
}

// procList remembers a GPU's last process list: when it was read, and the
// GPU's used memory then. The native loop keeps the same rule in C.
type procList struct {
	listed bool
	used   int64
	at     time.Time
}

// due says whether the list should be read again at this tick.
func (p *procList) due(used int64, now time.Time, every time.Duration) bool {
	return !p.listed || used != p.used || now.Sub(p.at) >= every
}

func (p *procList) done(used int64, now time.Time) {
	p.listed, p.used, p.at = true, used, now
}

// FakeClock is a Clock for tests: SleepUntil jumps to the deadline, and
// Hook makes a later Now return later (as a slow read would).
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
	// Hook, if set, is called at each Now with the current time and may
	// advance it (simulating work that takes time).
	Hook func(now time.Time) time.Duration
}

// NewFakeClock returns a fake clock at t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// Now implements Clock.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Hook != nil {
		c.now = c.now.Add(c.Hook(c.now))
	}
	return c.now
}

// SleepUntil implements Clock without sleeping.
func (c *FakeClock) SleepUntil(ctx context.Context, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

// Advance moves the clock forward.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// sortedGPUs returns the indices in order, without duplicates.
func sortedGPUs(gpus []int) []int {
	slices.Sort(gpus)
	return slices.Compact(gpus)
}
