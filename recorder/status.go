package recorder

import (
	"context"
	"time"
)

// Status is what the status line of a recording shows: a snapshot of its
// Live view.
type Status struct {
	Elapsed       time.Duration
	GPUs          []GPUStatus
	Epoch, Step   int64 // storage.None before the first mark
	Samples       int64 // device samples taken
	Ticks, Missed int64
}

// GPUStatus is one GPU's latest reading; Seen is false before the first.
type GPUStatus struct {
	Index       int
	Used, Total int64
	Seen        bool
}

// Status takes a snapshot of the live view, elapsed after start. Safe for
// concurrent use with the writers.
func (l *Live) Status(elapsed time.Duration) Status {
	s := Status{Elapsed: elapsed, Epoch: l.epoch.Load(), Step: l.step.Load(), Samples: l.samples.Load(),
		Ticks: l.progress.Ticks.Load(), Missed: l.progress.Missed.Load()}
	for _, i := range l.order {
		g := l.gpus[i]
		gs := GPUStatus{Index: i, Total: g.info.TotalBytes}
		if d := g.cur.Load(); d != nil {
			gs.Used, gs.Seen = d.Used, true
		}
		s.GPUs = append(s.GPUs, gs)
	}
	return s
}

// statusEvery is how often the status line is redrawn.
const statusEvery = time.Second

// reportStatus calls f with a snapshot every statusEvery until ctx is
// done. It blocks; run it on its own goroutine.
func reportStatus(ctx context.Context, f func(Status), l *Live, clock Clock) {
	start := clock.Now()
	next := start.Add(statusEvery)
	for {
		clock.SleepUntil(ctx, next)
		if ctx.Err() != nil {
			return
		}
		f(l.Status(clock.Now().Sub(start)))
		next = next.Add(statusEvery)
		if now := clock.Now(); next.Before(now) {
			next = now.Add(statusEvery)
		}
	}
}
