package recorder

import (
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxRawSleep is the longest sleep made as a raw system call. A raw call
// skips the runtime's system-call bookkeeping (which, in a VM, is much of
// the CPU cost of waking every millisecond) but keeps its P busy: a garbage
// collection waits for it, so it is kept short.
const maxRawSleep = 2 * time.Millisecond

// preciseSleep sleeps d with nanosleep(2), bypassing the Go timer heap.
func preciseSleep(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	if d <= maxRawSleep {
		syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
		return
	}
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

// prepareThread readies the sampling thread: timer slack 1 ns (the default
// adds 50 µs to every sleep), and, where allowed (CAP_SYS_NICE), a higher
// priority than the training job's threads, so a busy job does not delay a
// tick. The thread sleeps almost all the time, so this takes nothing from
// the job; without the privilege it is silently skipped.
func prepareThread() {
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), -10)
}
