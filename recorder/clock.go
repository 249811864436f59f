package recorder

import (
	"context"
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

// ScaledClock runs Speed times faster than the system clock, from the time
// it was made: with a simulated source, hours of a job are recorded in
// minutes (memrec record --source sim --sim-speed 100). It is safe for
// concurrent use.
type ScaledClock struct {
	speed       float64
	start, real time.Time
}

// NewScaledClock returns a clock that starts at the system clock's now and
// runs speed (> 0) times as fast.
func NewScaledClock(speed float64) *ScaledClock {
	now := time.Now()
	return &ScaledClock{speed: speed, start: now, real: now}
}

// Now implements Clock.
func (c *ScaledClock) Now() time.Time {
	return c.start.Add(time.Duration(float64(time.Since(c.real)) * c.speed))
}

// Real is how long the system clock takes for d of this clock.
func (c *ScaledClock) Real(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.speed)
}

// SleepUntil implements Clock, sleeping as RealClock does.
func (c *ScaledClock) SleepUntil(ctx context.Context, t time.Time) {
	for {
		d := t.Sub(c.Now())
		if d <= 0 || ctx.Err() != nil {
			return
		}
		preciseSleep(min(c.Real(d)+1, maxSleep))
	}
}
