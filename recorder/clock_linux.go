package recorder

import (
	"time"

	"golang.org/x/sys/unix"
)

// preciseSleep sleeps d with nanosleep(2), bypassing the Go timer heap.
func preciseSleep(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

// lowerTimerSlack sets this thread's timer slack to 1 ns (the default is
// 50 µs, added to every sleep).
func lowerTimerSlack() { unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) }
