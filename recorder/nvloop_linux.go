//go:build linux && cgo

package recorder

// The native loop exists because of what waking every millisecond costs.
// A C thread that sleeps to each deadline with clock_nanosleep costs less
// CPU than the same wait in Go, even as a raw system call on a locked
// thread (bench/tools/cwake, bench/tools/wakecost), and in Go the scheduler
// and its monitor thread wake with every tick too; sampling as a Go loop
// costs more than this loop (bench/perf/h200_cpu.sh; the figures are in
// bench/README.md, "Figures behind the code's constants"). Here the thread
// never enters Go; Go wakes every drainEvery to move the readings on.

/*
#cgo LDFLAGS: -ldl -lpthread
#include <stdlib.h>
#include "nvloop.h"
*/
import "C"

import (
	"errors"
	"time"
	"unsafe"
)

const (
	nativeTick    = C.NVLOOP_TICK
	nativeMissed  = C.NVLOOP_MISSED
	nativeDevice  = C.NVLOOP_DEVICE
	nativeProc    = C.NVLOOP_PROC
	nativeMemErr  = C.NVLOOP_MEM_ERR
	nativeProcErr = C.NVLOOP_PROC_ERR
)

// nativeRecord is one record of the loop (see nvloop.h).
type nativeRecord struct {
	Kind, GPU int
	T, A, B   int64
}

// nativeLoop is the C sampling thread and the Go end of its ring. drain
// must be called from one goroutine at a time.
type nativeLoop struct {
	l   *C.nvloop
	buf []C.nvloop_rec
}

// startNativeLoop starts sampling gpus through the NVML library at path,
// which must already be loaded (by go-nvml).
func startNativeLoop(path string, gpus []int, interval time.Duration, procs bool, procsEvery time.Duration) (*nativeLoop, error) {
	idx := make([]C.int32_t, len(gpus))
	for i, g := range gpus {
		idx[i] = C.int32_t(g)
	}
	// The ring holds two seconds (twice drainEvery) of readings and process
	// lists on every GPU at one tick in two (they are read only when memory
	// moves), so a late drain loses nothing; losses are counted.
	perTick := 1 + len(gpus)
	if procs {
		perTick += len(gpus) * 4 / 2
	}
	ticks := max(int(2*drainEvery/interval), 1)
	capacity := min(max(ticks*perTick, 4096), 1<<19)

	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var errBuf [256]C.char
	var first *C.int32_t
	if len(idx) > 0 {
		first = &idx[0]
	}
	l := C.nvloop_start(cpath, first, C.int(len(idx)), C.int64_t(interval), cbool(procs), C.int64_t(procsEvery),
		C.int(capacity), &errBuf[0], C.int(len(errBuf)))
	if l == nil {
		return nil, errors.New(C.GoString(&errBuf[0]))
	}
	return &nativeLoop{l: l, buf: make([]C.nvloop_rec, 4096)}, nil
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// drain hands every record in the ring to f and returns the number lost so
// far because the ring was full.
func (n *nativeLoop) drain(f func(nativeRecord)) int64 {
	for {
		got := int(C.nvloop_drain(n.l, &n.buf[0], C.int(len(n.buf))))
		for _, r := range n.buf[:got] {
			f(nativeRecord{Kind: int(r.kind), GPU: int(r.gpu), T: int64(r.t), A: int64(r.a), B: int64(r.b)})
		}
		if got < len(n.buf) {
			return int64(C.nvloop_lost(n.l))
		}
	}
}

// stop ends the thread, hands what is left in the ring to f, frees the
// loop and returns the number of records lost.
func (n *nativeLoop) stop(f func(nativeRecord)) int64 {
	C.nvloop_stop(n.l)
	lost := n.drain(f)
	C.nvloop_free(n.l)
	n.l = nil
	return lost
}
