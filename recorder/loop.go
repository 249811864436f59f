package recorder

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/memrec/memrec/storage"
)

// drainEvery is how often the native loop's readings are moved into the
// sink: as seldom as the 1 s commits, since every wake of the Go runtime
// costs CPU (see bench/README.md, "Figures behind the code's constants").
// The ring holds two seconds.
const drainEvery = time.Second

// loopSource is a source that can sample on a thread of its own, outside
// the Go runtime, where waking every millisecond costs far less CPU.
type loopSource interface {
	// startLoop starts sampling gpus at once, tick k at start + k·interval,
	// with Sampler's rules for process lists. errNoLoop: not available.
	startLoop(gpus []int, interval time.Duration, procs bool, procsEvery time.Duration) (sampleLoop, error)
}

// errNoLoop means the source cannot run a native loop (a mock, or a build
// without cgo); the sampler samples from Go.
var errNoLoop = errors.New("no native sampling loop")

// sampleLoop is a running native loop.
type sampleLoop interface {
	// drain hands every reading taken since the last drain to f, in order,
	// and returns how many were lost because the ring was full (in total).
	drain(f func(loopRecord)) (lost int64)
	// stop ends the loop, drains what is left and releases the loop.
	stop(f func(loopRecord)) (lost int64)
}

// loopRecord is one thing a native loop did.
type loopRecord struct {
	Kind     loopKind
	GPU      int
	T        int64         // the tick's time, ns since the epoch
	Late     time.Duration // loopTick: how late the tick started
	Count    int64         // loopMissed: ticks skipped
	Used     int64         // loopDevice, loopProc
	Reserved int64         // loopDevice
	PID      int           // loopProc
	Err      error         // loopFailed
}

type loopKind int

const (
	loopTick    loopKind = iota // a tick was taken
	loopMissed                  // ticks were skipped
	loopDevice                  // a GPU's memory
	loopProc                    // a process's memory
	loopInvalid                 // a reading dropped as nonsense
	loopFailed                  // a query failed
)

// runLoop moves a native loop's readings into the sink until ctx is done.
func (s *Sampler) runLoop(ctx context.Context, loop sampleLoop) SamplerStats {
	st := SamplerStats{Native: true}
	var hist lateHist
	var lost int64
	t0 := time.Now()
	handle := func(r loopRecord) {
		var err error
		switch r.Kind {
		case loopTick:
			st.Ticks++
			hist.add(r.Late)
			if s.Progress != nil {
				s.Progress.Ticks.Add(1)
			}
		case loopMissed:
			st.Missed += r.Count
			if s.Progress != nil {
				s.Progress.Missed.Add(r.Count)
			}
		case loopInvalid:
			st.Invalid++
		case loopFailed:
			err = r.Err
		case loopDevice:
			if err = s.Sink.AppendDevice(storage.DeviceSample{T: r.T, GPU: r.GPU, Used: r.Used, Reserved: r.Reserved}); err == nil {
				st.Samples++
			}
		case loopProc:
			if err = s.Sink.AppendProc(storage.ProcSample{T: r.T, GPU: r.GPU, PID: r.PID, Used: r.Used}); err == nil {
				st.Procs++
			}
		}
		if err != nil {
			st.Errors++
			if s.OnError != nil {
				s.OnError(err)
			}
		}
	}
	account := func(n int64) {
		if n > lost {
			st.Errors += n - lost
			if s.OnError != nil {
				s.OnError(fmt.Errorf("%d readings lost: the sampling thread got ahead of the recorder", n-lost))
			}
			lost = n
		}
	}
	tick := time.NewTicker(drainEvery)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			account(loop.drain(handle))
		}
	}
	account(loop.stop(handle))
	st.Elapsed = time.Since(t0)
	st.LateP50, st.LateP99, st.LateMax = hist.quantile(0.5), hist.quantile(0.99), hist.max
	return st
}
