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
