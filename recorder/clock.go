package recorder

import (
	"context"
	"sync"
	"time"
)

// Clock is the sampler's source of time. Tests pass a fake one and never
// sleep; RealClock sleeps precisely.
type Clock interface {
	Now() time.Time
	// SleepUntil returns at t or soon after, or early when ctx is done.
	SleepUntil(ctx context.Context, t time.Time)
}

// RealClock is the system clock. Its SleepUntil sleeps in a system call on
// a thread of its own with the timer slack set to the minimum, which wakes
// within tens of microseconds where time.Sleep is often a millisecond late.
type RealClock struct{}

// Now implements Clock.
func (RealClock) Now() time.Time { return time.Now() }

// maxSleep bounds one sleep so a cancelled context is noticed quickly even
// with intervals of minutes.
const maxSleep = 50 * time.Millisecond

// SleepUntil implements Clock. The caller should hold its OS thread
// (runtime.LockOSThread) for the timer slack to stay set.
func (RealClock) SleepUntil(ctx context.Context, t time.Time) {
	for {
		d := time.Until(t)
		if d <= 0 || ctx.Err() != nil {
			return
		}
		preciseSleep(min(d, maxSleep))
	}
}

// PlainClock sleeps with time.Sleep: the baseline RealClock is measured
// against (memrec record --sampler plain, a hidden flag).
type PlainClock struct{}

// Now implements Clock.
func (PlainClock) Now() time.Time { return time.Now() }

// SleepUntil implements Clock.
func (PlainClock) SleepUntil(ctx context.Context, t time.Time) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(t)):
	}
}

// ScaledClock is a simulated job's clock at speed times real time
// (memrec record --source sim --sim-speed 100): hours of a job recorded in
// minutes. Its time moves by the sampler's schedule, not by the system
// clock: SleepUntil waits until the system clock reaches t at speed times
// real time, then sets the clock to t. A machine that cannot keep up
// therefore takes longer in real time, and every tick of the job's
// --duration is still taken; with a clock that ran with the system's, a
// tick that came late would skip the job's time between, and each skipped
// tick holds more of the job to compute, so a slow machine falls further
// behind. It is safe for concurrent use; only the sampler may call
// SleepUntil (others wait on Watch).
type ScaledClock struct {
	speed       float64
	start, real time.Time
	mu          sync.Mutex
	now         time.Time
}

// NewScaledClock returns a clock that starts at the system clock's now and
// runs speed (> 0) times as fast.
func NewScaledClock(speed float64) *ScaledClock {
	now := time.Now()
	return &ScaledClock{speed: speed, start: now, real: now, now: now}
}

// Now implements Clock: the time of the tick the sampler last slept to.
func (c *ScaledClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Real is how long the system clock takes for d of this clock.
func (c *ScaledClock) Real(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.speed)
}

// Behind is how far the system clock is past where this clock's time
// would be at speed: 0 while the sampler keeps up.
func (c *ScaledClock) Behind() time.Duration {
	return max(0, time.Since(c.real)-c.Real(c.Now().Sub(c.start)))
}

// SleepUntil implements Clock: it waits for t's moment in real time, then
// moves the clock to t (not past it: the schedule, not the wait, is the
// job's time).
func (c *ScaledClock) SleepUntil(ctx context.Context, t time.Time) {
	c.wait(ctx, t)
	if ctx.Err() != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

// wait sleeps, as RealClock does, until the system clock reaches t's moment.
func (c *ScaledClock) wait(ctx context.Context, t time.Time) {
	due := c.real.Add(c.Real(t.Sub(c.start)))
	for {
		d := time.Until(due)
		if d <= 0 || ctx.Err() != nil {
			return
		}
		preciseSleep(min(d+1, maxSleep))
	}
}

// Watch is this clock for a reader that waits beside the sampler (the
// status line): its SleepUntil waits as the sampler's does but leaves the
// job's time to the sampler.
func (c *ScaledClock) Watch() Clock { return watchClock{c} }

type watchClock struct{ c *ScaledClock }

func (w watchClock) Now() time.Time { return w.c.Now() }

func (w watchClock) SleepUntil(ctx context.Context, t time.Time) { w.c.wait(ctx, t) }
