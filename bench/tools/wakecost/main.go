// Command wakecost measures what it costs a Go process to wake every
// interval, by the way it sleeps: nanosleep through the runtime
// (unix.Nanosleep), nanosleep as a raw system call, and time.Sleep. It
// prints CPU use (getrusage) and ticks more than one interval late.
package main

import (
	"flag"
	"fmt"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	d := flag.Duration("d", 10*time.Second, "per mode")
	iv := flag.Duration("i", time.Millisecond, "interval")
	flag.Parse()
	modes := map[string]func(time.Duration){
		"nanosleep": func(x time.Duration) { ts := unix.NsecToTimespec(int64(x)); unix.Nanosleep(&ts, nil) },
		"raw": func(x time.Duration) {
			ts := unix.NsecToTimespec(int64(x))
			syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
		},
		"timesleep": time.Sleep,
	}
	for _, name := range []string{"nanosleep", "raw", "timesleep"} {
		sleep := modes[name]
		done := make(chan string)
		go func() {
			runtime.LockOSThread()
			unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
			var r0, r1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
			t0 := time.Now()
			late, n := 0, 0
			for k := 1; ; k++ {
				dl := t0.Add(time.Duration(k) * *iv)
				if w := time.Until(dl); w > 0 {
					sleep(w)
				}
				if time.Since(dl) > *iv {
					late++
				}
				n++
				if time.Since(t0) > *d {
					break
				}
			}
			syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
			wall := time.Since(t0)
			cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
			done <- fmt.Sprintf("%-10s %d ticks, %.3f%% late, %.2f%% of one core", name, n, 100*float64(late)/float64(n), 100*cpu.Seconds()/wall.Seconds())
		}()
		fmt.Println(<-done)
	}
}
